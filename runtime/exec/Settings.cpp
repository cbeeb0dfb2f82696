#include <cstdlib>
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
  return s;
}
}  // namespace

const Settings& settings() {
  static const Settings s = [] {
    Settings r = readSettings();
    if (r.num_threads > 0) {
      // Lives for the whole process: TBB honours it while it exists.
      static tbb::global_control limit(tbb::global_control::max_allowed_parallelism, r.num_threads);
    }
    return r;
  }();
  return s;
}

namespace exec {
spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("kiln");
    const std::string& level = settings().log_level;
    l->set_level(spdlog::level::from_str(level));
    l->set_pattern("[kiln %l] %v");
    return l;
  }();
  return *logger;
}
}  // namespace exec

}  // namespace kiln
