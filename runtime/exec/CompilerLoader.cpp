// Loads libkiln_jit (MLIR, LLVM) on first need, so a process that never
// compiles never loads or initialises the compiler.
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "runtime/exec/Engine.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/Log.h"

namespace kiln::exec {

namespace {
std::atomic<bool> gLoaded{false};

/// Directory of libkiln itself: libkiln_jit is installed next to it.
std::string ownDirectory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&loadCompiler), &info) == 0 || !info.dli_fname) return {};
  std::string path = info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}
}  // namespace

bool compilerLoaded() { return gLoaded.load(); }

TraceCompiler* loadCompiler() {
  static std::once_flag once;
  static TraceCompiler* compiler = nullptr;
  std::call_once(once, [] {
    std::string candidates[3];
    if (const char* env = std::getenv("KILN_JIT_LIBRARY")) candidates[0] = env;
    candidates[1] = ownDirectory() + "libkiln_jit.so";
    candidates[2] = "libkiln_jit.so";
    std::string errors;
    for (const std::string& path : candidates) {
      if (path.empty()) continue;
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        errors += std::string("\n  ") + dlerror();
        continue;
      }
      auto factory = reinterpret_cast<TraceCompiler* (*)()>(dlsym(handle, kCompilerFactorySymbol));
      if (!factory) {
        errors += "\n  " + path + ": no symbol " + kCompilerFactorySymbol;
        continue;
      }
      compiler = factory();
      gLoaded = compiler != nullptr;
      // Registered after the compiler's static objects: at exit it runs
      // first, so no compilation outlives them.
      std::atexit([] { Engine::instance().shutdownCompiles(); });
      log().debug("loaded the compiler from {}", path);
      return;
    }
    log().warn("the JIT compiler library could not be loaded; traces stay interpreted (set KILN_JIT=off to "
               "silence this, or KILN_JIT_LIBRARY to its path):{}",
               errors);
  });
  return compiler;
}

}  // namespace kiln::exec
