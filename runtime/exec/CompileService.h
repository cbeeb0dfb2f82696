// CompileService: the one way hot work reaches the compiler. Whole traces,
// dynamic-shape kernels and hot regions are all submitted here (at once in
// the calling thread, or to a background lane) and build their kernel with
// kernelFor(): the disk cache first (another process may have compiled it
// since this one looked), else the compiler, then the kernel cache installs
// it. What a finished kernel means for a profile stays with its caller
// (Engine::compileJob, Engine::compileDynamicJob, RegionExecutor).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "runtime/exec/CompileQueue.h"
#include "runtime/exec/Executable.h"
#include "runtime/trace/TraceGraph.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::exec {

/// A kernel built (or found) for one key.
struct BuiltKernel {
  std::shared_ptr<Executable> executable;  ///< null when it failed (result.error says why)
  bool fromCache = false;                  ///< found in the disk cache, not compiled
  /// Only machine code was made, from a Quick compile's optimised modules
  /// (no import, lowering or LLVM optimisation).
  bool codegenOnly = false;
  CompileResult result;                    ///< the compile's timings and error (empty when fromCache)
};

class CompileService {
 public:
  /// Background lanes: hot regions have their own thread, so that a whole
  /// trace, which replaces its regions, never waits behind them.
  enum class Lane { Traces, Regions };

  /// Runs `job` now in the calling thread (KILN_JIT=sync, tests) or on
  /// `lane`'s compile threads (bounded share of the machine: CompileQueue;
  /// JobRank::Urgent: a core of its own, TieringPolicy's CompilePriority).
  void submit(Lane lane, bool now, std::function<void()> job, JobRank rank = JobRank::Background);
  /// What `lane` has queued or running becomes urgent.
  void makeUrgent(Lane lane);
  /// The kernel of `key`: from the disk cache, else compiled from `graph`
  /// under `name` with `effort` and installed. With `dynamicSizes` >= 0 a
  /// compiled kernel must take that many dynamic sizes (a dynamic-shape
  /// kernel). A Full request is not served by a cached Quick kernel; given
  /// `quick`, the Quick compile it replaces, it needs only machine code
  /// (codegenTraceFull) when that kept its optimised modules. A compile
  /// calls `scratchKnown` (CompileTarget::scratchKnown) when it knows the
  /// kernel's scratch size.
  BuiltKernel kernelFor(const trace::TraceKey& key, const trace::TraceGraph& graph, const std::string& name,
                        int dynamicSizes = -1, CodegenEffort effort = CodegenEffort::Full,
                        const CompileResult* quick = nullptr, std::function<void(std::size_t)> scratchKnown = {});
  /// Waits for every submitted job (tests, KILN_JIT=sync's drain).
  void drain();
  /// Drops queued jobs and joins the threads (exit).
  void shutdown();

 private:
  CompileQueue& queue(Lane lane);
  /// `lane`'s queue if this process made it, else null: a forked child
  /// inherits the parent's queues but none of their threads.
  CompileQueue* ownQueue(int lane) const;

  std::mutex createMutex_;
  /// Created on first use, never destroyed (threads may submit at exit);
  /// read without a lock by the exit handler. A forked child makes its own
  /// (CompileQueue::owner) and leaves the parent's as they are (a lock in
  /// them may be held).
  std::atomic<CompileQueue*> queues_[2] = {nullptr, nullptr};
};

}  // namespace kiln::exec
