// The one settings parser (issue 21, defect 5): documented ranges, values in
// any case, and one warning per bad variable naming the value given and the
// value used; kiln_set_option and set_settings reject what the environment
// would clamp.
#include "runtime/support/Settings.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "runtime/support/Log.h"

namespace kiln::exec {
namespace {

std::map<std::string, std::string> gEnv;
const char* fakeEnvironment(const char* name) {
  auto it = gEnv.find(name);
  return it == gEnv.end() ? nullptr : it->second.c_str();
}

Settings read(std::map<std::string, std::string> env, std::vector<std::string>* warnings) {
  gEnv = std::move(env);
  return readSettings(&fakeEnvironment, warnings);
}

void expectMentions(const std::string& message, std::initializer_list<const char*> needles) {
  for (const char* n : needles) EXPECT_NE(message.find(n), std::string::npos) << "'" << n << "' missing in: " << message;
}

/// Reads one variable and expects exactly one warning naming it, the value
/// given and the value used.
Settings readOneBad(const char* variable, const char* value, const char* used) {
  std::vector<std::string> warnings;
  Settings s = read({{variable, value}}, &warnings);
  EXPECT_EQ(warnings.size(), 1u) << variable << "=" << value;
  if (!warnings.empty())
    expectMentions(warnings[0], {(std::string(variable) + "=" + value).c_str(), (std::string("using ") + used).c_str()});
  return s;
}

TEST(Settings, AnEmptyEnvironmentGivesTheDefaultsSilently) {
  std::vector<std::string> warnings;
  Settings s = read({{"HOME", "/home/u"}}, &warnings);
  EXPECT_TRUE(warnings.empty());
  const Settings d;
  EXPECT_EQ(s.log_level, d.log_level);
  EXPECT_EQ(s.jit, d.jit);
  EXPECT_EQ(s.jit_threshold, d.jit_threshold);
  EXPECT_EQ(s.compile_threads, d.compile_threads);
  EXPECT_EQ(s.cache_max_mb, d.cache_max_mb);
  EXPECT_EQ(s.cache_dir, "/home/u/.cache/kiln");
  EXPECT_EQ(read({{"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}}, &warnings).cache_dir, "/xdg/kiln");
}

TEST(Settings, IntegersOutOfRangeAreClampedWithOneWarning) {
  // Was: std::thread creation failed and the process aborted.
  EXPECT_EQ(readOneBad("KILN_COMPILE_THREADS", "100000", "64").compile_threads, 64);
  // Was: truncated to int (0 or negative), so nothing ever compiled.
  EXPECT_EQ(readOneBad("KILN_COMPILE_THREADS", "4294967296", "64").compile_threads, 64);
  EXPECT_EQ(readOneBad("KILN_COMPILE_THREADS", "0", "1").compile_threads, 1);
  // Was: silently ignored past int64, or a threshold no trace reaches.
  EXPECT_EQ(readOneBad("KILN_JIT_THRESHOLD", "99999999999999999999", "1000000").jit_threshold, 1000000);
  // Was: MB * 2^20 overflowed and every entry was evicted right after writing it.
  EXPECT_EQ(readOneBad("KILN_CACHE_MAX_MB", "9999999999999", "1073741824").cache_max_mb, int64_t{1} << 30);
  EXPECT_EQ(readOneBad("KILN_NUM_THREADS", "-5", "0").num_threads, 0);
  EXPECT_EQ(readOneBad("KILN_NUM_THREADS", "-99999999999999999999", "0").num_threads, 0);
  EXPECT_EQ(readOneBad("KILN_MAX_TRACE_OPS", "12abc", "the default 4096").max_trace_ops, 4096);
  EXPECT_EQ(readOneBad("KILN_REPLAY_STRICT", "2", "1").replay_strict, true);
  // Were read with getenv: any value but "0" (graphs) or "1" (row kernels)
  // meant the default, without a word.
  EXPECT_EQ(readOneBad("KILN_CUDA_GRAPHS", "off", "the default 1").cuda_graphs, true);
  EXPECT_EQ(readOneBad("KILN_CUDA_ROW_KERNELS", "2", "1").cuda_row_kernels, true);
}

TEST(Settings, ValuesInRangeAreUsedAsGiven) {
  std::vector<std::string> warnings;
  Settings s = read({{"KILN_COMPILE_THREADS", "64"}, {"KILN_JIT_THRESHOLD", "+7"}, {"KILN_NUM_THREADS", "0"},
                     {"KILN_CACHE_MAX_MB", "1073741824"}, {"KILN_MAX_SHAPES", "1"}},
                    &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(s.compile_threads, 64);
  EXPECT_EQ(s.jit_threshold, 7);
  EXPECT_EQ(s.num_threads, 0);
  EXPECT_EQ(s.cache_max_mb, int64_t{1} << 30);
  EXPECT_EQ(s.max_shapes, 1);
}

TEST(Settings, EnumeratedValuesAreCaseInsensitive) {
  std::vector<std::string> warnings;
  // Was: KILN_LOG=WARN silently disabled every warning.
  Settings s = read({{"KILN_LOG", "WARN"}, {"KILN_JIT", "Sync"}, {"KILN_CACHE", "OFF"}}, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(s.log_level, "warn");
  EXPECT_EQ(s.jit, JitMode::Sync);
  EXPECT_EQ(s.cache, "off");
  EXPECT_EQ(read({{"KILN_LOG", "Warning"}}, &warnings).log_level, "warn");
  EXPECT_EQ(read({{"KILN_LOG", "err"}}, &warnings).log_level, "error");
  EXPECT_TRUE(warnings.empty());
}

TEST(Settings, UnknownEnumeratedValuesWarnAndUseTheDefault) {
  // Was: KILN_LOG=xyz silently disabled every warning.
  Settings s = readOneBad("KILN_LOG", "xyz", "warn");
  EXPECT_EQ(s.log_level, "warn");
  EXPECT_EQ(readOneBad("KILN_JIT", "fast", "async").jit, JitMode::Async);
  std::vector<std::string> warnings;
  read({{"KILN_JIT", "fast"}}, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  expectMentions(warnings[0], {"async, sync, off, replay"});
}

TEST(Settings, EachBadVariableWarnsOnce) {
  std::vector<std::string> warnings;
  read({{"KILN_LOG", "xyz"}, {"KILN_COMPILE_THREADS", "100000"}, {"KILN_JIT_THRESHOLD", "2"}}, &warnings);
  ASSERT_EQ(warnings.size(), 2u);
  expectMentions(warnings[0], {"KILN_LOG=xyz"});
  expectMentions(warnings[1], {"KILN_COMPILE_THREADS=100000"});
}

TEST(Settings, OptionsRejectWhatTheEnvironmentWouldClamp) {
  const SettingInfo* threads = findSetting("compile_threads");
  ASSERT_NE(threads, nullptr);
  EXPECT_EQ(findSetting("KILN_COMPILE_THREADS"), threads);
  EXPECT_TRUE(isRuntimeOption(*threads));
  Settings s;
  for (const char* v : {"4294967297", "2147483648", "100000", "0", "-1", "1x", ""}) {
    std::string e = applySetting(*threads, v, SettingSource::Option, s);
    expectMentions(e, {"compile_threads", (std::string("'") + v + "'").c_str(), ">= 1", "<= 64"});
    EXPECT_EQ(s.compile_threads, 1) << "unchanged on error";
  }
  EXPECT_EQ(applySetting(*threads, "8", SettingSource::Option, s), "");
  EXPECT_EQ(s.compile_threads, 8);
  expectMentions(applySetting(*findSetting("num_threads"), "4294967296", SettingSource::Option, s),
                 {"num_threads", "4294967296", "<= 4096"});
  EXPECT_EQ(applySetting(*findSetting("log"), "WARN", SettingSource::Option, s), "");
  EXPECT_EQ(s.log_level, "warn");
  expectMentions(applySetting(*findSetting("log"), "xyz", SettingSource::Option, s), {"log", "xyz", "warn"});
  EXPECT_EQ(settingText(*findSetting("jit_threshold"), s), "2");
  EXPECT_FALSE(isRuntimeOption(*findSetting("KILN_CACHE_DIR")));
  EXPECT_EQ(findSetting("no_such_setting"), nullptr);
}

TEST(Settings, SetSettingsChecksRangesAndNormalizesCase) {
  Settings bad = settings();
  bad.compile_threads = 100000;
  try {
    set_settings(bad);
    FAIL() << "no kiln::Error";
  } catch (const Error& e) {
    expectMentions(e.what(), {"set_settings", "compile_threads", "100000"});
  }
  Settings s = checkedSettings([] {
    Settings x;
    x.log_level = "WARNING";
    return x;
  }());
  EXPECT_EQ(s.log_level, "warn");
}

/// A scoped override set and undone on every call (as JitScope, or Python's
/// `with kiln.settings(...)` does) publishes one snapshot per distinct
/// configuration, not one per call; earlier references keep their values.
TEST(Settings, SettingsEqualToEarlierOnesReuseTheirSnapshot) {
  const Settings saved = settings();
  Settings other = saved;
  other.max_shapes = saved.max_shapes + 3;
  set_settings(other);
  const Settings* first = &settings();
  EXPECT_EQ(first->max_shapes, saved.max_shapes + 3);
  set_settings(saved);
  const Settings* savedSnapshot = &settings();
  EXPECT_NE(savedSnapshot, first);
  for (int i = 0; i < 1000; ++i) {
    set_settings(other);
    ASSERT_EQ(&settings(), first) << "call " << i;
    set_settings(saved);
    ASSERT_EQ(&settings(), savedSnapshot) << "call " << i;
  }
  EXPECT_EQ(first->max_shapes, saved.max_shapes + 3) << "an earlier reference keeps its values";
  EXPECT_EQ(settings(), saved);
}

TEST(Settings, JitModeIsAnEnumParsedByTheTable) {
  const SettingInfo& jit = *findSetting("KILN_JIT");
  Settings s;
  for (JitMode mode : {JitMode::Async, JitMode::Sync, JitMode::Off, JitMode::Replay}) {
    EXPECT_EQ(applySetting(jit, to_string(mode), SettingSource::Option, s), "");
    EXPECT_EQ(s.jit, mode);
    EXPECT_EQ(settingText(jit, s), to_string(mode));
  }
  EXPECT_EQ(applySetting(jit, "Sync", SettingSource::Option, s), "");
  EXPECT_EQ(s.jit, JitMode::Sync);
  EXPECT_NE(applySetting(jit, "sometimes", SettingSource::Option, s), "");
  EXPECT_EQ(s.jit, JitMode::Sync);  // unchanged
  Settings bad;
  bad.jit = static_cast<JitMode>(42);
  EXPECT_THROW(checkedSettings(bad), Error);
}

class DumpDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("kiln-dump-settings-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged_);
    log().sinks().push_back(sink_);
  }
  void TearDown() override {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    unsetenv("KILN_DUMP_IR");
    std::filesystem::remove_all(root_);
  }
  int warningsLogged() const {
    const std::string text = logged_.str();
    int n = 0;
    for (size_t at = text.find("KILN_DUMP_IR="); at != std::string::npos; at = text.find("KILN_DUMP_IR=", at + 1)) ++n;
    return n;
  }
  std::filesystem::path root_;
  std::ostringstream logged_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST_F(DumpDirectory, AMissingDirectoryIsCreated) {
  const std::string dir = (root_ / "a" / "b").string();
  setenv("KILN_DUMP_IR", dir.c_str(), 1);
  EXPECT_EQ(irDumpDirectory(), dir);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_EQ(warningsLogged(), 0);
}

TEST_F(DumpDirectory, ARegularFileIsWarnedAboutOnce) {
  const std::string file = (root_ / "file").string();
  std::ofstream(file) << "x";
  setenv("KILN_DUMP_IR", file.c_str(), 1);
  EXPECT_EQ(irDumpDirectory(), "");
  EXPECT_EQ(irDumpDirectory(), "");
  EXPECT_EQ(warningsLogged(), 1);
  expectMentions(logged_.str(), {file.c_str(), "not a directory"});
  std::string warning;
  const std::string under = file + "/sub";
  EXPECT_EQ(checkIrDumpDirectory(under, &warning), "");
  expectMentions(warning, {"cannot be created"});
}

}  // namespace
}  // namespace kiln::exec

namespace kiln::exec {
namespace {

// Run alone, with bad settings in the environment, by the
// kiln_settings_first_use test (test/unit/CMakeLists.txt): the logger is the
// first to read the settings, and their warning goes through it.
TEST(SettingsFirstUse, TheLoggerCanBeTheFirstToReadBadSettings) {
  if (!std::getenv("KILN_SETTINGS_FIRST_USE")) GTEST_SKIP() << "run by the kiln_settings_first_use test";
  testing::internal::CaptureStderr();
  log().info("first use");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("KILN_COMPILE_THREADS=100000 is above the range 1 to 64; using 64"), std::string::npos) << err;
  EXPECT_NE(err.find("first use"), std::string::npos) << err;
  EXPECT_EQ(settings().compile_threads, 64);
  EXPECT_EQ(settings().log_level, "info");
}

}  // namespace
}  // namespace kiln::exec
