// kiln_set_option range-checks through the settings parser (issue 21,
// defects 4 and 5): out-of-range integers are rejected with the option, the
// value and the range; enumerated values take any case.
#include <string>

#include "CApiTestUtil.h"

namespace kiln::capitest {
namespace {

std::string option(const char* name) {
  char buf[64] = {};
  EXPECT_EQ(kiln_get_option(name, buf, sizeof buf, nullptr), KILN_OK) << kiln_last_error();
  return buf;
}

TEST(CApiOptions, IntegersOutsideTheirRangeAreRejected) {
  const std::string threads = option("compile_threads"), pool = option("num_threads");
  // Were accepted: wrapped to 1, to a negative count, and to 0.
  expectError(kiln_set_option("compile_threads", "4294967297"), KILN_ERROR_INVALID_ARGUMENT,
              {"compile_threads", "'4294967297'", ">= 1", "<= 64"});
  expectError(kiln_set_option("compile_threads", "2147483648"), KILN_ERROR_INVALID_ARGUMENT,
              {"compile_threads", "'2147483648'", "<= 64"});
  expectError(kiln_set_option("KILN_NUM_THREADS", "4294967296"), KILN_ERROR_INVALID_ARGUMENT,
              {"num_threads", "'4294967296'", ">= 0", "<= 4096"});
  expectError(kiln_set_option("jit_threshold", "99999999999999999999"), KILN_ERROR_INVALID_ARGUMENT,
              {"jit_threshold", "'99999999999999999999'", "<= 1000000"});
  expectError(kiln_set_option("max_trace_ops", "-1"), KILN_ERROR_INVALID_ARGUMENT, {"max_trace_ops", ">= 1"});
  EXPECT_EQ(option("compile_threads"), threads);
  EXPECT_EQ(option("num_threads"), pool);
}

TEST(CApiOptions, EnumeratedValuesTakeAnyCase) {
  const std::string log = option("log"), jit = option("jit");
  KILN_ASSERT_OK(kiln_set_option("log", "WARN"));
  EXPECT_EQ(option("log"), "warn");
  KILN_ASSERT_OK(kiln_set_option("KILN_JIT", "Off"));
  EXPECT_EQ(option("jit"), "off");
  expectError(kiln_set_option("log", "xyz"), KILN_ERROR_INVALID_ARGUMENT, {"log", "'xyz'", "trace, debug, info, warn"});
  KILN_ASSERT_OK(kiln_set_option("log", log.c_str()));
  KILN_ASSERT_OK(kiln_set_option("jit", jit.c_str()));
}

TEST(CApiOptions, OnlyRuntimeOptionsAreSettable) {
  expectError(kiln_set_option("cache_dir", "/tmp"), KILN_ERROR_INVALID_ARGUMENT,
              {"unknown option", "compile_threads"});
}

}  // namespace
}  // namespace kiln::capitest
