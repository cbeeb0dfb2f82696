// Loads libkiln_jit (MLIR, LLVM) on first need, so a process that never
// compiles never loads or initialises the compiler. Kernels, fresh or cached,
// are mapped by the built-in shared-object loader, which needs no LLVM.
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "runtime/backends/Hal.h"
#include "runtime/exec/Engine.h"
#include "runtime/exec/Executable.h"
#include "runtime/support/Log.h"

namespace kiln::exec {

namespace {
std::atomic<bool> gLoaded{false};
/// Set by the exit handler: no compilation starts after it.
std::atomic<bool> gExiting{false};
/// Compilations running now (on compile threads or, in sync mode, on the
/// caller's): the exit handler waits for them.
std::atomic<int> gInFlight{0};
/// True while a thread is inside the library load (dlopen and the static
/// constructors of MLIR and LLVM); guarded by gLoadMutex, which also orders
/// it with gExiting: no load starts once exit has begun.
std::mutex gLoadMutex;
std::condition_variable gLoadDone;
bool gLoading = false;

void waitForLoad(std::unique_lock<std::mutex>& lock) {
  gLoadDone.wait(lock, [] { return !gLoading; });
}

/// Directory of libkiln itself: libkiln_jit is installed next to it.
std::string ownDirectory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&loadCompiler), &info) == 0 || !info.dli_fname) return {};
  std::string path = info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

/// dlopens the first of $envVar, <libkiln's dir>/file, file that exports
/// `symbol`; null with the reasons in `*errors` otherwise.
void* openLibrary(const char* envVar, const char* file, const char* symbol, int flags, std::string* errors,
                  std::string* loadedFrom) {
  std::string candidates[3];
  if (const char* env = std::getenv(envVar)) candidates[0] = env;
  candidates[1] = ownDirectory() + file;
  candidates[2] = file;
  for (const std::string& path : candidates) {
    if (path.empty()) continue;
    void* handle = dlopen(path.c_str(), flags | RTLD_LOCAL);
    if (!handle) {
      *errors += std::string("\n  ") + dlerror();
      continue;
    }
    if (void* sym = dlsym(handle, symbol)) {
      *loadedFrom = path;
      return sym;
    }
    *errors += "\n  " + path + ": no symbol " + symbol;
  }
  return nullptr;
}

/// Set in a forked child whose parent was loading the compiler or
/// compiling when it forked: the compiler's state (a half-built static, a
/// lock held by a thread the child does not have) cannot be trusted, so
/// this process interprets (and replays cached kernels) instead.
std::atomic<bool> gForkedMidCompile{false};

/// In a forked child: the parent's compile threads are gone, and with them
/// the loads and compilations they were counted for.
void afterForkInChild() {
  if (gLoading || gInFlight.load() > 0) gForkedMidCompile = true;
  // A thread of the parent may have held these; none runs here to release them.
  new (&gLoadMutex) std::mutex();
  new (&gLoadDone) std::condition_variable();
  gLoading = false;
  gInFlight = 0;
}

const bool gForkHandled = [] {
  pthread_atfork(nullptr, nullptr, afterForkInChild);
  return true;
}();
}  // namespace

// Registered before the first background compile is queued
// (prepareBackgroundCompile) and again once the library is loaded, so that
// it runs before the compiler's statics are destroyed.
void finishCompilesAtExit() {
  {
    std::unique_lock<std::mutex> lock(gLoadMutex);
    gExiting = true;
    waitForLoad(lock);
  }
  Engine::instance().shutdownCompiles();
  while (gInFlight.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

bool compilerLoaded() { return gLoaded.load(); }

bool compilesStopped() { return gExiting.load(); }

TraceCompiler* loadCompiler() {
  if (gExiting.load() || gForkedMidCompile.load()) return nullptr;
  static std::once_flag once;
  static TraceCompiler* compiler = nullptr;
  std::call_once(once, [] {
    {
      std::lock_guard<std::mutex> lock(gLoadMutex);
      if (gExiting.load()) return;
      gLoading = true;
    }
    struct LoadFinished {
      ~LoadFinished() {
        {
          std::lock_guard<std::mutex> lock(gLoadMutex);
          gLoading = false;
        }
        gLoadDone.notify_all();
      }
    } loadFinished;
    const auto start = std::chrono::steady_clock::now();
    std::string errors, path;
    // Lazy binding: the loader resolves a function of MLIR's and LLVM's
    // when it is first called, not all of their tens of thousands at once.
    // The load runs beside a loop's first steps (a large trace starts it),
    // and binding everything took a third of it: the transformer bench's
    // first two steps 109 -> 84 ms, its 40 async steps 794 -> 742 ms
    // (medians of 8 alternating runs, 2-core Zen 3). A library that lacks
    // a function would fail at its first call instead of here; libkiln_jit
    // is built against the MLIR and LLVM it loads (their sonames carry
    // the version).
    auto factory = reinterpret_cast<TraceCompiler* (*)()>(
        openLibrary("KILN_JIT_LIBRARY", "libkiln_jit.so", kCompilerFactorySymbol, RTLD_LAZY, &errors, &path));
    if (!factory) {
      log().warn("the JIT compiler library could not be loaded; traces stay interpreted (set KILN_JIT=off to "
                 "silence this, or KILN_JIT_LIBRARY to its path):{}",
                 errors);
      return;
    }
    compiler = factory();
    gLoaded = compiler != nullptr;
    // Registered after the compiler's static objects: at exit it runs
    // first, so no compilation outlives them.
    std::atexit(finishCompilesAtExit);
    log().info("loaded the compiler from {} in {:.0f} ms", path,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  });
  return gExiting.load() ? nullptr : compiler;
}

namespace {
/// Set once a background compile has been queued: only then has exit work
/// to wait for.
std::atomic<bool> gBackgroundUsed{false};

bool onMainThread() { return ::gettid() == ::getpid(); }

/// exit() runs the exiting thread's thread_local destructors before any
/// atexit handler or static destructor. On the main thread (where
/// returning from main and most exit() calls run) this one stops the
/// compiler there, first: the compiler builds some of its static objects
/// lazily during compiles, so their destructors are registered after, and
/// run before, any atexit handler of ours; a compile still running when
/// they run crashes or spins in destroyed LLVM tables. A main thread that
/// ends by pthread_exit while others go on loses tier-up, never results.
/// On other threads, whose thread_locals also die when they merely end, it
/// only waits for a load of the compiler under way, so that no static
/// object of MLIR or LLVM is destroyed while others are still being built.
struct StopCompilesAtExit {
  ~StopCompilesAtExit() {
    if (onMainThread()) {
      if (gBackgroundUsed.load()) finishCompilesAtExit();
      return;
    }
    std::unique_lock<std::mutex> lock(gLoadMutex);
    waitForLoad(lock);
  }
};
void guardThisThread() {
  static thread_local StopCompilesAtExit guard;
  (void)guard;
}

/// The main thread may never queue a compile itself (workers record), yet
/// it is the one that usually exits: give it the guard when libkiln is
/// loaded there.
const bool gMainThreadGuarded = [] {
  if (onMainThread()) guardThisThread();
  return true;
}();
}  // namespace

void prepareBackgroundCompile() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(finishCompilesAtExit); });
  gBackgroundUsed = true;
  guardThisThread();
}

namespace {
/// Runs `work` with the compiler and the target of `graph`'s device, as one
/// compilation the exit handler waits for; an error result when either is
/// missing or the process is exiting.
CompileResult withCompiler(const trace::TraceGraph& graph,
                           const std::function<CompileResult(TraceCompiler&, const CompileTarget&)>& work) {
  CompileResult result;
  ++gInFlight;
  // Counted before the check, so the exit handler either sees this
  // compilation or this compilation sees the exit.
  TraceCompiler* compiler = loadCompiler();  // null once exit has begun
  const std::optional<CompileTarget> target = hal::deviceContext(graph.device).compileTarget();
  if (!target) result.error = "device " + graph.device.str() + " has no compiler target";
  else if (compiler) {
    result = work(*compiler, *target);
    // The first compile builds most of the compiler's lazily constructed
    // statics, whose destructors then run before the handler registered at
    // load: registered again after it, the handler also runs first when a
    // thread other than main exits the process (the main thread's guard
    // covers its own exit).
    static std::once_flag again;
    std::call_once(again, [] { std::atexit(finishCompilesAtExit); });
  }
  else if (gExiting.load()) result.error = "the process is exiting";
  else if (gForkedMidCompile.load())
    result.error = "the process was forked while its parent was compiling; it does not compile (its hot traces "
                   "run interpreted, or from the kernel cache)";
  else result.error = "the compiler library is not available";
  --gInFlight;
  return result;
}
}  // namespace

CompileResult compileTrace(const trace::TraceGraph& graph, const std::string& name, CodegenEffort effort,
                           std::function<void(std::size_t)> scratchKnown) {
  return withCompiler(graph, [&](TraceCompiler& compiler, const CompileTarget& target) {
    if (!scratchKnown) return compiler.compile(graph, name, target, effort);
    CompileTarget withHook = target;
    withHook.scratchKnown = std::move(scratchKnown);
    return compiler.compile(graph, name, withHook, effort);
  });
}

CompileResult codegenTraceFull(const trace::TraceGraph& graph, const CompileResult& quick, const std::string& name) {
  return withCompiler(graph, [&](TraceCompiler& compiler, const CompileTarget& target) {
    return compiler.codegenFull(quick, name, target);
  });
}

}  // namespace kiln::exec
