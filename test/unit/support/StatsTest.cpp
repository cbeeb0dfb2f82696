// Stats::str() prints every counter (KILN_STATS_FIELDS) with its value.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "kiln/runtime.h"

namespace kiln {
namespace {

TEST(Stats, StrHasALinePerCounterWithItsValue) {
  Stats s;
  uint64_t next = 1;
  // Distinct values, so that a line printing another field's value fails.
#define KILN_STAT_SET(name) s.name = static_cast<decltype(s.name)>(next++);
  KILN_STATS_FIELDS(KILN_STAT_SET)
#undef KILN_STAT_SET
  const std::string text = s.str();
  next = 1;
#define KILN_STAT_CHECK(name)                                                                  \
  {                                                                                            \
    std::ostringstream line;                                                                   \
    line << "\n" #name " " << static_cast<decltype(s.name)>(next++) << "\n";                   \
    EXPECT_NE(("\n" + text).find(line.str()), std::string::npos) << #name << " in\n" << text;  \
  }
  KILN_STATS_FIELDS(KILN_STAT_CHECK)
#undef KILN_STAT_CHECK
  EXPECT_NE(text.find("compiled_op_share "), std::string::npos);
}

}  // namespace
}  // namespace kiln
