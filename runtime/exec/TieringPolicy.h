// TieringPolicy: what to compile and when, as pure functions of what the
// engine knows (runs, work estimates, where a candidate's trace stands). The
// engine and the region executor gather the facts and carry the verdicts
// out; nothing here compiles, locks or logs (STYLE.md rule 14).
//
// Hot regions against whole traces (issue 20). A region kernel is worth its
// compile only while no whole-trace kernel replaces it: once its trace is
// hot, the trace is compiled as one unit and its regions never run again.
// When a region gets hot in the first runs of a trace, nobody knows yet
// whether that trace will recur. The region is then compiled only when
//  - it recurs inside the trace and the regions that do carry most of the
//    trace's work (a loop body unrolled into the trace: its kernels are as
//    good as the trace's, and serve every other trip count), or
//  - it has shown up in several distinct traces (the program's traces do
//    not recur: a varying trip count, a step that logs now and then). The
//    first two steps of a training loop differ (the first creates the
//    optimizer's state), so two distinct traces are not yet evidence.
// Otherwise it waits: if the trace recurs it is compiled whole, and the
// region costs nothing.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/exec/CompileTarget.h"
#include "runtime/trace/Trace.h"

namespace kiln::exec {

/// Where the trace that contains a region stands.
enum class TraceOutlook : uint8_t {
  /// Its whole-trace kernel cannot come (interpret-only, whole-trace compiles
  /// off, or another structure's shape guard stopped it).
  NoWholeKernel,
  /// Seen fewer times than the threshold: it may or may not recur.
  MayRecur,
  /// Hot: its whole-trace kernel is compiling or will be.
  WholeKernelComing,
};

/// What the region executor knows about one region of the trace being run.
struct RegionFacts {
  uint64_t occurrences = 0;       ///< of the region key so far, this run included
  uint64_t threshold = 2;         ///< KILN_JIT_THRESHOLD
  uint32_t distinctTraces = 1;    ///< trace keys it has been seen in (saturating count)
  uint32_t occurrencesInTrace = 1;  ///< in the trace being run
  /// Share of the trace's estimated work (estimateNodeWork) carried by the
  /// regions whose key occurs more than once in it (its unrolled loop
  /// bodies), 0..1.
  double recurringWorkShare = 0;
  TraceOutlook trace = TraceOutlook::MayRecur;
};

enum class RegionVerdict : uint8_t {
  Compile,
  NotHot,                 ///< fewer occurrences than the threshold
  WholeTraceWillReplace,  ///< its trace is hot: the whole-trace kernel replaces it
  WaitForRecurrence,      ///< small part of a trace that may recur: wait and see
};

/// Share of a trace's work above which its recurring regions are compiled
/// at once (the trace is mostly an unrolled loop).
inline constexpr double kLoopBodyWorkShare = 0.25;
/// Distinct traces a region must appear in before it is compiled for a trace
/// that may still recur.
inline constexpr uint32_t kDistinctTracesForRegions = 3;

RegionVerdict decideRegion(const RegionFacts& facts);
std::string_view verdictName(RegionVerdict verdict);

// Background compiles of hot traces: how much of the machine they get.
// By default a bounded share of one core (KILN_COMPILE_SHARE, taken in
// spells in which the user's threads leave it a core: CompileQueue.h), so
// that no step runs much slower than interpreted while it compiles. A
// compile that pays back soon is worth a core of its own now: the
// interpreter's steps run slower while it compiles (1.7x for the
// transformer bench's 2-thread step), but for a much shorter time. One
// whose payback lies beyond the runs seen so far keeps its share until the
// trace has run about as often as its payback needs: a trace seen n times
// is expected to be seen about n more times. That breaks the 1.1x bound on
// a step for the steps the urgent compile then runs beside (the transformer
// bench on a loaded 2-core Zen 5: urgent after ~135 steps, its ~15 steps
// to the kernel at 1.4-1.7x), but a compile kept at its share to the end
// did not finish within 200 steps there: the first 200 steps took 1.14-1.18x
// their interpreted time, against 1.00-1.08x with the escalation (6
// alternating rounds at 8480412, the rule removed against kept).

/// Interpreted runs of a trace the cost model ignores: the first is cold
/// (its buffers' first touch, the GEMM's packing space, the tuner's first
/// trials, and for a large trace the compiler loading beside it), and the
/// next ones run beside the compile that has just started. The transformer
/// bench's 4.2 ms step took 36 ms and then 20 ms; read from those, its
/// 270 ms compile looked as if it paid back within 20 runs and took a core
/// from step 2 on.
inline constexpr uint32_t kUntimedRuns = 1;
/// Timed runs (after the untimed ones) before the cost model reads the
/// interpreted time: the moving average falls at once to a run that was
/// not disturbed.
inline constexpr uint32_t kTimedRunsForCostModel = 3;

/// What the engine knows about a hot trace whose compile is queued or running.
struct TraceCompileFacts {
  uint64_t runs = 0;              ///< of the trace so far
  double interpretedMs = 0;       ///< its interpreted run (moving average); 0: not measured
  double estimatedCompileMs = 0;  ///< CompileCostModel::estimateMs of its size
};

enum class CompilePriority : uint8_t {
  Background,  ///< lowest CPU priority, a bounded share of one core (CompileQueue)
  Urgent,      ///< a core of its own: normal priority, the user's threads leave it one core
};

/// Share of an interpreted run a whole-trace kernel is expected to save
/// (bench/RESULTS.md, 2-core Zen 3: the transformer step 0.6, the MLP step
/// 0.25, chain8 0.95).
inline constexpr double kExpectedSavedFraction = 0.5;
/// A compile that pays back within this many runs of its trace is urgent
/// from the start (a step of 100 ms and a 1 s compile). Urgent, the
/// transformer bench's 2-thread step took 1.7x its interpreted time while
/// its compile ran (its kernel at step 42, and the first 40 steps 1.3-1.5x
/// their interpreted wall time); with a fifth of a core its steps took
/// 1.05-1.06x and its Quick kernel came at steps 80-112 (the first 40 steps
/// 0.94-0.99x, the first 200 0.88-0.94x; at 100 runs it was urgent, on
/// samples taken beside the compile's start). 2-core Zen 5, 12 alternating
/// rounds each.
inline constexpr double kUrgentPaybackRuns = 20;

/// Runs of the trace the compile needs to pay for itself (infinite when the
/// interpreted time is not measured).
double paybackRuns(const TraceCompileFacts& facts);
CompilePriority decideCompilePriority(const TraceCompileFacts& facts);

// Codegen effort of a hot trace's first kernel. LLVM's quick code generator
// (CodegenEffort::Quick) makes a large trace's kernel arrive sooner, but its
// code runs slower, so once it runs the engine compiles the trace again
// with Full effort in the background, from the Quick compile's optimised
// modules, and swaps the kernels (Engine::recompileFull). While urgent
// compiles took a core at once, it paid only where machine code took
// hundreds of milliseconds (the 930-op step on a 2-core Zen 4: Quick saved
// 27 ms of 240 and its Full recompile cost more). A background compile gets
// a bounded share of one core, so its CPU time is what the loop waits for:
// on the transformer bench's 748-op step (2-core Zen 5) Quick machine code
// takes 34 ms of the compile thread instead of 112 (the compile 180 ms
// instead of 266), and its kernel arrives some 60 steps sooner.
/// Estimated compile time from which a trace's first kernel is Quick
/// (about 500 ops: no bench row but the transformer step's).
inline constexpr double kQuickCodegenFromMs = 250;
/// Runs of a Quick kernel before its Full compile starts. The Full compile
/// runs at the lowest priority, yet it slowed the compiled steps it ran
/// beside (the transformer bench's steps 31-40: 8.8 ms with it running,
/// 7.9 without, where the Full kernel's take 7.4; on the Xeon its ~20
/// steps beside it cost 12 ms more in all, the Full kernel then saves about
/// 0.6 ms a step: it pays back some 40 steps after it starts). As the first
/// compile waits for a trace to recur, the upgrade waits until the Quick
/// kernel has stayed hot long enough that the loop is likely to run that
/// much longer, and a loop that ends sooner never pays for it. After 16
/// runs it started within the transformer bench's first 40 steps: their
/// last 20 took 131-145 ms, 120-126 after 32 (10 runs each, Xeon).
inline constexpr uint32_t kFullRecompileAfterQuickRuns = 32;
/// The effort of a hot trace's first compile, from its estimated compile
/// time (CompileCostModel, which learns from Full compiles), for a compile
/// in the background; one the user's thread waits for (KILN_JIT=sync) is
/// Full, the only one it gets.
CodegenEffort chooseCodegenEffort(double estimatedCompileMs, bool background,
                                  double quickFromMs = kQuickCodegenFromMs);

// The compiler library (MLIR and LLVM: 100-125 ms to load and warm up on a
// 2-core Zen 3) loads on the compile thread as soon as a trace this large
// runs for the first time: likely a step of a loop, whose first compile
// would otherwise wait for the load (the transformer bench's first 40 async
// steps: 1.24 -> 1.18 of their interpreted time, medians of 8 alternating
// runs). It loads as a background job, at the compile's share of a core
// (an urgent compile queued behind it makes it urgent too: it held that
// compile up). Programs of smaller traces load it at their first compile.
inline constexpr uint32_t kPreloadCompilerFromOps = 64;

/// Compile time of a trace from its size, learnt from this process's
/// background compiles (their compile thread's CPU time).
class CompileCostModel {
 public:
  /// Fixed cost per compile (pipeline set-up, linking, loading) and the
  /// prior per-op cost, which decides a process's first compiles: the
  /// transformer bench's 889-op step compiled in 414 ms (2-core Zen 3, Full)
  /// and its Quick kernel in 290-330 ms of the compile thread (2-core Xeon,
  /// AVX-512); a 10-op trace in 20-24 ms. The earlier prior of 1 ms an op
  /// (909 ms for that step) made its payback hang on its first interpreted
  /// run's noise on the Xeon: at 13.5 ms, 134 runs, so it compiled at the
  /// lowest priority and its kernel came at steps 100-137 (the first 200
  /// steps took 0.85-0.9 of their interpreted time); at 20 ms, 91 runs, an
  /// urgent compile and the kernel at step 27 (0.65).
  static constexpr double kFixedMs = 20;
  static constexpr double kPriorMsPerOp = 0.45;

  double estimateMs(uint32_t ops) const { return kFixedMs + msPerOp_ * ops; }
  /// A Full compile of `ops` ops took `cpuMs` of its thread: the per-op
  /// cost moves halfway towards it.
  void noteCompile(uint32_t ops, double cpuMs);
  double msPerOp() const { return msPerOp_; }

 private:
  double msPerOp_ = kPriorMsPerOp;
};

/// Estimated interpretation work of one node, in element operations: the
/// elements written (read, for reductions); a matmul's multiply-adds count
/// 1/8 each (they run vectorised and cache-blocked); views and parameters
/// cost nothing.
double estimateNodeWork(const trace::Trace& trace, const trace::Node& node);

}  // namespace kiln::exec
