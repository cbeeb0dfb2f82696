// Stale handles stay stale (issue 21, defect 4): a slot whose generation is
// spent is retired, never reused. The table is instantiated with a 2-bit
// generation so that a slot is spent after 3 handles instead of 2^24 - 1.
#include "runtime/capi/CApiSupport.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace kiln::capi {
namespace {

using SmallTable = HandleTable<int, 2>;
// The real tables: kind (8 bits) | generation (24) | index (32), so a slot
// serves 2^24 - 1 handles, then retires.
static_assert(HandleTable<int>::kLastGeneration == (1u << 24) - 1);

kiln_status statusOf(SmallTable& t, uint64_t h) {
  try {
    t.get(h, "handle");
    return KILN_OK;
  } catch (const StatusError& e) {
    return e.status();
  }
}

TEST(HandleTable, ASpentSlotIsRetiredSoReleasedHandlesStayInvalid) {
  static_assert(SmallTable::kLastGeneration == 3);
  SmallTable table(HandleKind::Tensor, "kiln_tensor");
  std::vector<uint64_t> released;
  // One slot, reused until its generations are spent.
  for (int i = 0; i < 3; ++i) {
    uint64_t h = table.insert(i);
    EXPECT_EQ(table.get(h, "handle"), i);
    table.release(h, "handle");
    released.push_back(h);
  }
  EXPECT_EQ(std::set<uint64_t>(released.begin(), released.end()).size(), 3u) << "each reuse is a new handle";
  EXPECT_EQ(table.retired(), 1u);
  // Many more handles: none of them is an old one, and every old one is
  // still rejected as released (before the fix the slot's generation wrapped
  // back to 1 and the first handle came back to life).
  for (int i = 0; i < 20; ++i) {
    uint64_t h = table.insert(100 + i);
    for (uint64_t old : released) {
      EXPECT_NE(h, old);
      EXPECT_EQ(statusOf(table, old), KILN_ERROR_INVALID_HANDLE);
    }
    table.release(h, "handle");
    released.push_back(h);
  }
  EXPECT_EQ(std::set<uint64_t>(released.begin(), released.end()).size(), released.size());
  EXPECT_EQ(table.live(), 0u);
  EXPECT_EQ(table.retired(), 7u);  // 23 handles, 3 per slot
}

TEST(HandleTable, RetainedHandlesKeepTheirSlotUntilTheLastRelease) {
  SmallTable table(HandleKind::Tensor, "kiln_tensor");
  uint64_t h = table.insert(7);
  table.retain(h, "handle");
  table.release(h, "handle");
  EXPECT_EQ(table.get(h, "handle"), 7);
  table.release(h, "handle");
  EXPECT_EQ(statusOf(table, h), KILN_ERROR_INVALID_HANDLE);
}

}  // namespace
}  // namespace kiln::capi
