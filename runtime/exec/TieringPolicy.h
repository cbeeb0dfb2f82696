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

/// Estimated interpretation work of one node, in element operations: the
/// elements written (read, for reductions); a matmul's multiply-adds count
/// 1/8 each (they run vectorised and cache-blocked); views and parameters
/// cost nothing.
double estimateNodeWork(const trace::Trace& trace, const trace::Node& node);

}  // namespace kiln::exec
