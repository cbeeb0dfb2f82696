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
// A compile that pays back soon is worth a core of its own now: the
// interpreter's steps run slower while it compiles, but for a much shorter
// time than at the lowest priority (on 2 cores a 900 ms compile took 3 s at
// the lowest priority and still slowed every parallel op of the
// interpreter, whose critical path waits for its preempted thread). One
// whose payback lies beyond the runs seen so far keeps the lowest priority
// until the trace has run about as often as its payback needs: a trace seen
// n times is expected to be seen about n more times.

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
/// from the start (a training step of 20 ms and a 1 s compile: 100 runs).
inline constexpr double kUrgentPaybackRuns = 100;

/// Runs of the trace the compile needs to pay for itself (infinite when the
/// interpreted time is not measured).
double paybackRuns(const TraceCompileFacts& facts);
CompilePriority decideCompilePriority(const TraceCompileFacts& facts);

// Codegen effort of a hot trace's first kernel. LLVM's quick code generator
// (CodegenEffort::Quick) makes a large trace's kernel arrive sooner, but its
// code runs slower, so once it runs the engine compiles the trace again
// with Full effort in the background, at the lowest priority, from the
// Quick compile's optimised modules, and swaps the kernels
// (Engine::recompileFull). It paid when machine code was most of a
// compile: on the transformer bench's 889-op step (2-core Zen 3) it took
// 65 ms instead of 260-275 of a 650 ms compile, and the first 40 async
// steps took 1.17 of their interpreted time instead of 1.44. Since codegen
// was partitioned it no longer does: on the 930-op step (2-core Zen 4)
// Quick saves 27 ms of a 240 ms compile (machine code 45 instead of 73 ms),
// its kernel's steps take 7.0 ms instead of 5.9, and the Full recompile
// beside them costs more: Full first, the first 200 async steps took
// 1.39-1.49 s instead of 1.55-1.75 (5 alternating pairs; the first 40
// alike, 0.47-0.53 s against 0.46-0.63). So only a trace whose compile is
// estimated this long, where codegen alone takes hundreds of milliseconds,
// gets a Quick kernel first; the others get one Full kernel, no second
// compile.
/// Estimated compile time from which a trace's first kernel is Quick.
inline constexpr double kQuickCodegenFromMs = 1000;
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
// runs). It loads urgent (a core of its own, CompilePriority::Urgent), as
// that compile will: at the lowest priority the load took 112-147 ms beside
// the interpreter's first steps and held the urgent compile up, urgent
// 66-89 ms (2-core Xeon; the first 40 steps 0.02-0.04 of their interpreted
// time sooner, paired medians of 16 alternating runs, noisy). Programs of
// smaller traces load it at their first compile.
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
