#include "runtime/support/Settings.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <tbb/global_control.h>

#include "kiln/error.h"
#include "runtime/support/Log.h"

namespace kiln::exec {

/// One accepted spelling of an enumerated value and the value it stands for.
struct Spelling {
  const char* text;
  const char* value;
};

struct SettingInfo {
  enum class Kind { Integer, Choice, Text };
  const char* env = nullptr;
  const char* name = nullptr;
  bool option = false;  ///< kiln_set_option may change it
  Kind kind = Kind::Text;
  int64_t min = 0, max = 0;          ///< Integer: the documented range
  std::span<const Spelling> choices;  ///< Choice: lower-case spellings
  int64_t (*getInt)(const Settings&) = nullptr;
  void (*setInt)(Settings&, int64_t) = nullptr;
  std::string (*getText)(const Settings&) = nullptr;
  void (*setText)(Settings&, const std::string&) = nullptr;
};

namespace {

using Kind = SettingInfo::Kind;

constexpr Spelling kLogLevels[] = {{"trace", "trace"}, {"debug", "debug"},       {"info", "info"},
                                   {"warn", "warn"},   {"warning", "warn"},      {"error", "error"},
                                   {"err", "error"},   {"critical", "critical"}, {"off", "off"}};
constexpr Spelling kJitModes[] = {{"async", "async"}, {"sync", "sync"}, {"off", "off"}, {"replay", "replay"}};
/// KILN_JIT's values in JitMode's order (to_string's names).
constexpr const char* kJitModeNames[] = {"async", "sync", "off", "replay"};

/// The mode a KILN_JIT value (a canonical spelling of kJitModes) stands for.
JitMode jitModeNamed(const std::string& value) {
  for (size_t i = 0; i < std::size(kJitModeNames); ++i)
    if (value == kJitModeNames[i]) return static_cast<JitMode>(i);
  return JitMode{};
}
constexpr Spelling kOnOff[] = {{"on", "on"}, {"off", "off"}};

SettingInfo integer(const char* env, const char* name, bool option, int64_t min, int64_t max,
                    int64_t (*get)(const Settings&), void (*set)(Settings&, int64_t)) {
  SettingInfo i;
  i.env = env;
  i.name = name;
  i.option = option;
  i.kind = Kind::Integer;
  i.min = min;
  i.max = max;
  i.getInt = get;
  i.setInt = set;
  return i;
}

SettingInfo text(const char* env, const char* name, bool option, std::span<const Spelling> choices,
                 std::string (*get)(const Settings&), void (*set)(Settings&, const std::string&)) {
  SettingInfo i;
  i.env = env;
  i.name = name;
  i.option = option;
  i.kind = choices.empty() ? Kind::Text : Kind::Choice;
  i.choices = choices;
  i.getText = get;
  i.setText = set;
  return i;
}

// The ranges are documented in the README's environment table.
const SettingInfo kSettings[] = {
    text("KILN_LOG", "log", true, kLogLevels, [](const Settings& s) { return s.log_level; },
         [](Settings& s, const std::string& v) { s.log_level = v; }),
    integer("KILN_MAX_TRACE_OPS", "max_trace_ops", true, 1, int64_t{1} << 24,
            [](const Settings& s) { return s.max_trace_ops; }, [](Settings& s, int64_t v) { s.max_trace_ops = v; }),
    integer("KILN_NUM_THREADS", "num_threads", true, 0, 4096, [](const Settings& s) -> int64_t { return s.num_threads; },
            [](Settings& s, int64_t v) { s.num_threads = static_cast<int>(v); }),
    text("KILN_JIT", "jit", true, kJitModes, [](const Settings& s) -> std::string { return to_string(s.jit); },
         [](Settings& s, const std::string& v) { s.jit = jitModeNamed(v); }),
    integer("KILN_JIT_THRESHOLD", "jit_threshold", true, 1, 1000000,
            [](const Settings& s) { return s.jit_threshold; }, [](Settings& s, int64_t v) { s.jit_threshold = v; }),
    integer("KILN_COMPILE_THREADS", "compile_threads", true, 1, 64,
            [](const Settings& s) -> int64_t { return s.compile_threads; },
            [](Settings& s, int64_t v) { s.compile_threads = static_cast<int>(v); }),
    integer("KILN_COMPILE_SHARE", "compile_share", true, 0, 100,
            [](const Settings& s) -> int64_t { return s.compile_share; },
            [](Settings& s, int64_t v) { s.compile_share = static_cast<int>(v); }),
    integer("KILN_MAX_SHAPES", "max_shapes", false, 1, 4096, [](const Settings& s) { return s.max_shapes; },
            [](Settings& s, int64_t v) { s.max_shapes = v; }),
    text("KILN_CACHE", "cache", false, kOnOff, [](const Settings& s) { return s.cache; },
         [](Settings& s, const std::string& v) { s.cache = v; }),
    text("KILN_TUNE", "tune", true, kOnOff, [](const Settings& s) { return s.tune; },
         [](Settings& s, const std::string& v) { s.tune = v; }),
    text("KILN_WARM_START", "warm_start", false, kOnOff, [](const Settings& s) { return s.warm_start; },
         [](Settings& s, const std::string& v) { s.warm_start = v; }),
    text("KILN_CACHE_DIR", "cache_dir", false, {}, [](const Settings& s) { return s.cache_dir; },
         [](Settings& s, const std::string& v) { s.cache_dir = v; }),
    // 2^30 MB: a petabyte, and the byte count stays far inside int64.
    integer("KILN_CACHE_MAX_MB", "cache_max_mb", false, 1, int64_t{1} << 30,
            [](const Settings& s) { return s.cache_max_mb; }, [](Settings& s, int64_t v) { s.cache_max_mb = v; }),
    integer("KILN_REPLAY_STRICT", "replay_strict", false, 0, 1,
            [](const Settings& s) -> int64_t { return s.replay_strict ? 1 : 0; },
            [](Settings& s, int64_t v) { s.replay_strict = v != 0; }),
    integer("KILN_MAX_TRACE_KEYS", "max_trace_keys", true, 64, int64_t{1} << 24,
            [](const Settings& s) { return s.max_trace_keys; }, [](Settings& s, int64_t v) { s.max_trace_keys = v; }),
    integer("KILN_TEST_DEVICES", "test_devices", false, 0, 8,
            [](const Settings& s) -> int64_t { return s.test_devices; },
            [](Settings& s, int64_t v) { s.test_devices = static_cast<int>(v); }),
    text("KILN_DEFAULT_DEVICE", "default_device", false, {}, [](const Settings& s) { return s.default_device; },
         [](Settings& s, const std::string& v) { s.default_device = v; }),
    integer("KILN_DIST_TIMEOUT", "dist_timeout", true, 1, 7 * 24 * 3600,
            [](const Settings& s) { return s.dist_timeout_s; }, [](Settings& s, int64_t v) { s.dist_timeout_s = v; }),
    text("KILN_CUDA_LIBRARY", "cuda_library", false, {}, [](const Settings& s) { return s.cuda_library; },
         [](Settings& s, const std::string& v) { s.cuda_library = v; }),
    text("KILN_LEVEL_ZERO_LIBRARY", "level_zero_library", false, {},
         [](const Settings& s) { return s.level_zero_library; },
         [](Settings& s, const std::string& v) { s.level_zero_library = v; }),
    integer("KILN_CUDA_GRAPHS", "cuda_graphs", true, 0, 1,
            [](const Settings& s) -> int64_t { return s.cuda_graphs ? 1 : 0; },
            [](Settings& s, int64_t v) { s.cuda_graphs = v != 0; }),
    integer("KILN_CUDA_ROW_KERNELS", "cuda_row_kernels", true, 0, 1,
            [](const Settings& s) -> int64_t { return s.cuda_row_kernels ? 1 : 0; },
            [](Settings& s, int64_t v) { s.cuda_row_kernels = v != 0; }),
};

std::string lowerCase(std::string_view v) {
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// "trace, debug, info, ...": each value once, in table order.
std::string valueList(std::span<const Spelling> choices) {
  std::string list;
  std::set<std::string_view> seen;
  for (const Spelling& c : choices) {
    if (!seen.insert(c.value).second) continue;
    list += (list.empty() ? "" : ", ") + std::string(c.value);
  }
  return list;
}

enum class IntegerParse { Ok, NotAnInteger, BelowInt64, AboveInt64 };

/// A decimal integer with an optional sign, nothing else.
IntegerParse parseInteger(std::string_view text, int64_t* out) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  if (digits.empty() || digits.front() == '+') return IntegerParse::NotAnInteger;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, *out);
  if (ptr != end) return IntegerParse::NotAnInteger;
  if (ec == std::errc::result_out_of_range)
    return digits.front() == '-' ? IntegerParse::BelowInt64 : IntegerParse::AboveInt64;
  if (ec != std::errc()) return IntegerParse::NotAnInteger;
  return IntegerParse::Ok;
}

std::string applyInteger(const SettingInfo& info, std::string_view text, SettingSource source, Settings& s) {
  const std::string range = std::to_string(info.min) + " to " + std::to_string(info.max);
  int64_t v = 0;
  const IntegerParse parsed = parseInteger(text, &v);
  const bool inRange = parsed == IntegerParse::Ok && v >= info.min && v <= info.max;
  if (inRange) {
    info.setInt(s, v);
    return {};
  }
  if (source == SettingSource::Option)
    return std::string(info.name) + " must be an integer >= " + std::to_string(info.min) + " and <= " +
           std::to_string(info.max) + ", got '" + std::string(text) + "'";
  std::string why;
  int64_t used;
  if (parsed == IntegerParse::NotAnInteger) {
    used = info.getInt(Settings{});
    why = "is not an integer (range " + range + "); using the default " + std::to_string(used);
  } else {
    const bool below = parsed == IntegerParse::BelowInt64 || (parsed == IntegerParse::Ok && v < info.min);
    used = below ? info.min : info.max;
    why = std::string("is ") + (below ? "below" : "above") + " the range " + range + "; using " + std::to_string(used);
  }
  info.setInt(s, used);
  return std::string(info.env) + "=" + std::string(text) + " " + why;
}

std::string applyChoice(const SettingInfo& info, std::string_view text, SettingSource source, Settings& s) {
  const std::string lower = lowerCase(text);
  for (const Spelling& c : info.choices) {
    if (lower == c.text) {
      info.setText(s, c.value);
      return {};
    }
  }
  const std::string list = valueList(info.choices);
  if (source == SettingSource::Option)
    return std::string(info.name) + " must be one of " + list + " (any case), got '" + std::string(text) + "'";
  const std::string used = info.getText(Settings{});
  info.setText(s, used);
  return std::string(info.env) + "=" + std::string(text) + " is not one of " + list + "; using " + used;
}

}  // namespace

const SettingInfo* findSetting(std::string_view name) {
  for (const SettingInfo& s : kSettings)
    if (name == s.env || name == s.name) return &s;
  return nullptr;
}

bool isRuntimeOption(const SettingInfo& setting) { return setting.option; }

std::string runtimeOptionNames() {
  std::string list;
  for (const SettingInfo& s : kSettings)
    if (s.option) list += (list.empty() ? "" : ", ") + std::string(s.name);
  return list;
}

std::string applySetting(const SettingInfo& setting, std::string_view text, SettingSource source, Settings& s) {
  switch (setting.kind) {
    case Kind::Integer: return applyInteger(setting, text, source, s);
    case Kind::Choice: return applyChoice(setting, text, source, s);
    case Kind::Text: setting.setText(s, std::string(text)); return {};
  }
  return {};
}

std::string settingText(const SettingInfo& setting, const Settings& s) {
  return setting.kind == Kind::Integer ? std::to_string(setting.getInt(s)) : setting.getText(s);
}

Settings readSettings(EnvironmentLookup lookup, std::vector<std::string>* warnings) {
  Settings s;
  for (const SettingInfo& info : kSettings) {
    const char* v = lookup(info.env);
    if (!v || !*v) continue;  // unset or empty: the default
    if (std::string w = applySetting(info, v, SettingSource::Environment, s); !w.empty()) warnings->push_back(w);
  }
  if (s.cache_dir.empty()) {
    const char* xdg = lookup("XDG_CACHE_HOME");
    const char* home = lookup("HOME");
    if (xdg && xdg[0] == '/') s.cache_dir = std::string(xdg) + "/kiln";
    else if (home && *home) s.cache_dir = std::string(home) + "/.cache/kiln";
  }
  return s;
}

Settings checkedSettings(const Settings& s) {
  Settings checked = s;
  for (const SettingInfo& info : kSettings) {
    const std::string text = settingText(info, s);
    if (std::string e = applySetting(info, text, SettingSource::Option, checked); !e.empty())
      throw Error("set_settings: " + e);
  }
  return checked;
}

std::string checkIrDumpDirectory(const std::string& path, std::string* warning) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    if (!fs::create_directories(path, ec) && ec) {
      *warning = "the directory cannot be created (" + ec.message() + ")";
      return {};
    }
  } else if (!fs::is_directory(st)) {
    *warning = "it names a file that is not a directory";
    return {};
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    *warning = std::string("the directory cannot be written (") + std::strerror(errno) + ")";
    return {};
  }
  return path;
}

std::string irDumpDirectory() {
  const char* v = std::getenv("KILN_DUMP_IR");
  if (!v || !*v) return {};
  const std::string path = v;
  std::string warning;
  std::string dir = checkIrDumpDirectory(path, &warning);
  if (!warning.empty()) {
    // Leaked: compile threads may still ask during process exit.
    static auto* warned = new std::pair<std::mutex, std::set<std::string>>();
    std::lock_guard<std::mutex> lock(warned->first);
    if (warned->second.insert(path).second) log().warn("KILN_DUMP_IR={}: {}; no IR is dumped", path, warning);
  }
  return dir;
}

}  // namespace kiln::exec

namespace kiln {

const char* to_string(JitMode mode) {
  const auto i = static_cast<size_t>(mode);
  return i < std::size(exec::kJitModeNames) ? exec::kJitModeNames[i] : "?";
}

namespace {
// The current settings: an immutable snapshot. set_settings() publishes a new
// one and keeps the old ones alive, so a reference returned by settings()
// never dangles; settings equal to an earlier snapshot publish that one, so
// the snapshots are as many as the distinct configurations a program sets
// (a loop that scopes an override per call would otherwise grow without end).
std::atomic<const Settings*> gSettings{nullptr};
std::mutex gSettingsMutex;
/// Every snapshot ever published, kept reachable (guarded by gSettingsMutex;
/// never destroyed: threads may read settings during exit).
std::vector<std::unique_ptr<const Settings>>& snapshots() {
  static auto* all = new std::vector<std::unique_ptr<const Settings>>();
  return *all;
}
std::unique_ptr<tbb::global_control> gThreadLimit;  // guarded by gSettingsMutex

void applyThreadLimit(int numThreads) {
  gThreadLimit.reset();
  // TBB honours the limit while the object exists.
  if (numThreads > 0)
    gThreadLimit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, numThreads);
}

const char* processEnvironment(const char* name) { return std::getenv(name); }
}  // namespace

const Settings& settings() {
  if (const Settings* s = gSettings.load(std::memory_order_acquire)) return *s;
  std::vector<std::string> warnings;
  {
    std::lock_guard<std::mutex> lock(gSettingsMutex);
    if (const Settings* s = gSettings.load(std::memory_order_acquire)) return *s;
    auto* s = new Settings(exec::readSettings(&processEnvironment, &warnings));
    snapshots().emplace_back(s);
    applyThreadLimit(s->num_threads);
    gSettings.store(s, std::memory_order_release);
  }
  // After publishing: the logger reads the settings for its level.
  for (const std::string& w : warnings) exec::log().warn("{}", w);
  return *gSettings.load(std::memory_order_acquire);
}

void set_settings(const Settings& s) {
  settings();  // read the environment first, once
  const Settings checked = exec::checkedSettings(s);
  std::lock_guard<std::mutex> lock(gSettingsMutex);
  const Settings* next = nullptr;
  for (const auto& snapshot : snapshots())
    if (*snapshot == checked) next = snapshot.get();
  if (!next) next = snapshots().emplace_back(std::make_unique<const Settings>(checked)).get();
  if (next->num_threads != gSettings.load()->num_threads) applyThreadLimit(next->num_threads);
  gSettings.store(next, std::memory_order_release);
  exec::log().set_level(spdlog::level::from_str(next->log_level));
}

namespace exec {
spdlog::logger& log() {
  // Settings first: reading them may log warnings through this logger, which
  // must not happen while it is being created.
  settings();
  // Leaked on purpose: compile threads may still log during process exit.
  static auto* logger = new std::shared_ptr<spdlog::logger>([] {
    // Not registered with spdlog's registry, which is destroyed at exit
    // while compile threads may still log.
    auto l = std::make_shared<spdlog::logger>("kiln", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    const std::string& level = settings().log_level;
    l->set_level(spdlog::level::from_str(level));
    l->set_pattern("[kiln %l] %v");
    return l;
  }());
  return **logger;
}
}  // namespace exec

}  // namespace kiln
