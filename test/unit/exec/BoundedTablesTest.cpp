// The engine's tables stay bounded (issue 21): beyond KILN_MAX_TRACE_KEYS the
// least recently used trace keys are dropped with their in-memory kernels,
// and a dropped key that comes back runs correctly again.
#include <gtest/gtest.h>

#include <vector>

#include "kiln/kiln.h"
#include "runtime/exec/Engine.h"
#include "test/unit/exec/JitScope.h"

namespace kiln {
namespace {

/// A key per `k`: the integer constant stays in the key (integer constants
/// are never kernel arguments).
std::vector<int64_t> runKey(int64_t k) {
  Tensor x = from_vector<int64_t>({1, 2, 3, 4}, {4});
  Tensor y = (x + k) * 3;
  std::vector<int64_t> out = y.to_vector<int64_t>();
  step();
  return out;
}

/// A trace structure per `k` (its ten bits choose add or multiply by a float
/// constant at each of ten steps): every structure has scalar slots and, in
/// a JIT mode, a dynamic-shape record.
float runStructure(int64_t k) {
  Tensor y = from_vector<float>({1, 2}, {2});
  for (int bit = 0; bit < 10; ++bit) y = (k >> bit) & 1 ? y + 0.5f : y * 1.5f;
  const float out = y.to_vector<float>()[0];
  step();
  return out;
}

class MaxTraceKeys {
 public:
  explicit MaxTraceKeys(int64_t n) : saved_(settings()) {
    Settings s = saved_;
    s.max_trace_keys = n;
    set_settings(s);
  }
  ~MaxTraceKeys() { set_settings(saved_); }

 private:
  Settings saved_;
};

TEST(BoundedTables, InterpretedKeysPlateau) {
  exec::Engine::instance().resetProfilesForTesting();
  JitScope off(JitMode::Off);
  MaxTraceKeys cap(64);
  reset_stats();
  for (int64_t k = 0; k < 1000; ++k) {
    const std::vector<int64_t> got = runKey(k);
    ASSERT_EQ(got, (std::vector<int64_t>{3 * (1 + k), 3 * (2 + k), 3 * (3 + k), 3 * (4 + k)}));
    ASSERT_LE(exec::Engine::instance().profileCountsForTesting().first, 64u) << "after key " << k;
  }
  EXPECT_GE(stats().trace_keys_evicted, 900u);
  EXPECT_EQ(stats().distinct_trace_keys, 1000u);
}

TEST(BoundedTables, PerStructureTablesPlateauWithTheKeys) {
  exec::Engine::instance().resetProfilesForTesting();
  JitScope neverHot(JitMode::Sync, 1'000'000);  // keys, scalar slots and shape records, no compiles
  MaxTraceKeys cap(64);
  for (int64_t k = 0; k < 1024; ++k) {
    float expected = 1;
    for (int bit = 0; bit < 10; ++bit) expected = (k >> bit) & 1 ? expected + 0.5f : expected * 1.5f;
    ASSERT_EQ(runStructure(k), expected) << "structure " << k;
    ASSERT_LE(exec::Engine::instance().structureCountForTesting(), 64u) << "after structure " << k;
  }
  // A structure whose records were dropped starts again, correctly.
  EXPECT_EQ(runStructure(0), 1.0f * 1.5f * 1.5f * 1.5f * 1.5f * 1.5f * 1.5f * 1.5f * 1.5f * 1.5f * 1.5f);
}

TEST(BoundedTables, CompiledKeysAreDroppedAndComeBackCorrect) {
  exec::Engine::instance().resetProfilesForTesting();
  JitScope sync(JitMode::Sync, 1);
  MaxTraceKeys cap(64);
  reset_stats();
  for (int64_t k = 0; k < 100; ++k) ASSERT_EQ(runKey(k)[0], 3 * (1 + k));
  EXPECT_LE(exec::Engine::instance().profileCountsForTesting().first, 64u);
  EXPECT_GT(stats().trace_keys_evicted, 0u);
  EXPECT_GE(stats().compiles, 100u);
  // Key 0 was dropped long ago: it is compiled again (the disk cache is off
  // here) and gives the same result.
  const uint64_t compiles = stats().compiles;
  EXPECT_EQ(runKey(0), (std::vector<int64_t>{3, 6, 9, 12}));
  EXPECT_EQ(stats().compiles, compiles + 1);
  // A recent key kept its kernel: no compile.
  EXPECT_EQ(runKey(99)[0], 300);
  EXPECT_EQ(stats().compiles, compiles + 1);
}

TEST(BoundedTables, TheLimitIsARangeCheckedOption) {
  Settings s = settings();
  s.max_trace_keys = 10;
  EXPECT_THROW(set_settings(s), Error);
}

}  // namespace
}  // namespace kiln
