#include <atomic>
#include <cstdlib>
#include <mutex>
#include <memory>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <tbb/global_control.h>

#include "kiln/runtime.h"
#include "runtime/exec/Log.h"

namespace kiln {

namespace {
std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}
int64_t envInt(const char* name, int64_t fallback, int64_t min) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < min) {
    std::fprintf(stderr, "kiln: ignoring %s=%s (expected an integer >= %lld)\n", name, v,
                 static_cast<long long>(min));
    return fallback;
  }
  return x;
}

Settings readSettings() {
  Settings s;
  s.log_level = envOr("KILN_LOG", "warn");
  s.max_trace_ops = envInt("KILN_MAX_TRACE_OPS", 4096, 1);
  s.num_threads = static_cast<int>(envInt("KILN_NUM_THREADS", 0, 0));
  s.jit = envOr("KILN_JIT", "async");
  s.jit_threshold = envInt("KILN_JIT_THRESHOLD", 2, 1);
  s.compile_threads = static_cast<int>(envInt("KILN_COMPILE_THREADS", 1, 1));
  s.max_shapes = envInt("KILN_MAX_SHAPES", 8, 1);
  s.cache = envOr("KILN_CACHE", "on");
  if (s.cache != "on" && s.cache != "off") {
    std::fprintf(stderr, "kiln: ignoring KILN_CACHE=%s (expected on or off)\n", s.cache.c_str());
    s.cache = "on";
  }
  s.cache_dir = envOr("KILN_CACHE_DIR", "");
  if (s.cache_dir.empty()) {
    const std::string xdg = envOr("XDG_CACHE_HOME", "");
    const std::string home = envOr("HOME", "");
    if (!xdg.empty() && xdg[0] == '/') s.cache_dir = xdg + "/kiln";
    else if (!home.empty()) s.cache_dir = home + "/.cache/kiln";
  }
  s.cache_max_mb = envInt("KILN_CACHE_MAX_MB", 1024, 1);
  s.replay_strict = envInt("KILN_REPLAY_STRICT", 0, 0) != 0;
  if (s.jit != "async" && s.jit != "sync" && s.jit != "off" && s.jit != "replay") {
    std::fprintf(stderr, "kiln: ignoring KILN_JIT=%s (expected async, sync, off or replay)\n", s.jit.c_str());
    s.jit = "async";
  }
  return s;
}
}  // namespace

namespace {
// The current settings: an immutable snapshot. set_settings() publishes a new
// one and keeps the old ones alive (they are small and rarely replaced), so a
// reference returned by settings() never dangles.
std::atomic<const Settings*> gSettings{nullptr};
std::mutex gSettingsMutex;
std::unique_ptr<tbb::global_control> gThreadLimit;  // guarded by gSettingsMutex

void applyThreadLimit(int numThreads) {
  gThreadLimit.reset();
  // TBB honours the limit while the object exists.
  if (numThreads > 0)
    gThreadLimit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, numThreads);
}
}  // namespace

const Settings& settings() {
  if (const Settings* s = gSettings.load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(gSettingsMutex);
  if (const Settings* s = gSettings.load(std::memory_order_acquire)) return *s;
  auto* s = new Settings(readSettings());
  applyThreadLimit(s->num_threads);
  gSettings.store(s, std::memory_order_release);
  return *s;
}

void set_settings(const Settings& s) {
  settings();  // read the environment first, once
  std::lock_guard<std::mutex> lock(gSettingsMutex);
  auto* next = new Settings(s);
  if (next->num_threads != gSettings.load()->num_threads) applyThreadLimit(next->num_threads);
  gSettings.store(next, std::memory_order_release);
  exec::log().set_level(spdlog::level::from_str(next->log_level));
}

namespace exec {
spdlog::logger& log() {
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
