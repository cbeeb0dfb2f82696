// RegionExecutor: tier 1 of hot regions. For a trace whose whole-trace
// kernel is not available it partitions the trace (Regions.h, once per
// TraceKey), counts each region key's occurrences, starts compilations of hot
// regions, and runs the trace as a mix of compiled regions and interpreted
// nodes when some of its regions have kernels.
//
// Policy (DESIGN.md "Hot regions"):
//  - Region hotness is counted on every run of a trace that has no
//    whole-trace kernel, once per occurrence: a loop body unrolled 40 times
//    counts 40. The threshold is KILN_JIT_THRESHOLD, as for traces.
//  - Whether a hot region is compiled is TieringPolicy's decideRegion: not
//    while its trace is hot (a trace that recurs is compiled as one unit,
//    preferred once ready, so its regions cost no extra compilations), and
//    in a trace's first runs only when it is most of the trace's work or has
//    appeared in several distinct traces. Region kernels found in the kernel
//    cache are used by any trace, hot or not.
//  - KILN_JIT=off: no regions. replay: region kernels only from the kernel
//    cache. sync: hot regions are compiled in the calling thread, before the
//    run that made them hot. async: on a compile thread of their own, so a
//    whole trace (which replaces its regions) never waits behind them.
//  - Region keys get their own KILN_MAX_SHAPES guard per region structure.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/exec/Engine.h"
#include "runtime/exec/Regions.h"

namespace kiln::exec {

/// Percentage of the ops executed so far that ran in compiled code (whole
/// traces and regions), for logs.
double compiledOpPercent();

class RegionExecutor {
 public:
  explicit RegionExecutor(Engine& engine) : engine_(engine) {}

  /// Counts the regions of `trace` (whose key's profile is `profile`) and
  /// runs it on their kernels where there are some, filling `out` like
  /// Interpreter::run. Returns false, having only counted and maybe started
  /// compilations, when no region has a kernel: the caller interprets it.
  bool run(const trace::Trace& trace, const std::vector<uint8_t>& needed, TraceProfile* profile, TraceResult& out);

  /// The end of a region's compile job (Engine::compileJob, engine mutex
  /// held): installs the kernel or marks the region interpret-only, counts
  /// it apart from whole traces and logs the region tier-up.
  static void noteCompiled(TraceProfile* profile, const std::shared_ptr<Executable>& exe, bool fromCache,
                           const CompileResult& result, const char* name);

 private:
  std::shared_ptr<const RegionPlan> planFor(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                            const std::vector<uint32_t>& ids, TraceProfile* profile);
  void startCompile(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region);
  void probeReplay(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region);
  /// Launches one region's kernel on the values computed so far; false
  /// (nothing changed) when an input failed or an index is out of range:
  /// the interpreter then runs the region and reports it.
  /// `sizes`: a dynamic-shape kernel's (the region profile's dynamicSizes;
  /// empty for a static kernel).
  bool launch(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region,
              const std::shared_ptr<Executable>& exe, const std::vector<std::pair<uint32_t, int64_t>>& indexChecks,
              const std::vector<int64_t>& sizes, const RegionStep& step, const std::vector<uint32_t>& lastUse,
              TraceResult& out);

  Engine& engine_;
};

}  // namespace kiln::exec
