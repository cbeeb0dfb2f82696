// Engine: the one entry point that runs flushed traces. It keeps a profile
// per TraceKey, interprets cold traces, queues hot ones for compilation and
// runs their kernels once ready (tiering policy of DESIGN.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "kiln/runtime.h"
#include "runtime/exec/CompileService.h"
#include "runtime/exec/DynamicShapes.h"
#include "runtime/exec/Executable.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/exec/ScalarArgs.h"
#include "runtime/exec/TieringPolicy.h"
#include "runtime/interp/Interpreter.h"
#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceKey.h"
#include "runtime/trace/TraceRunner.h"

namespace kiln::exec {

class CompileQueue;
struct RegionPlan;

/// Per-node results of a run; only entries of live nodes are meaningful.
using TraceResult = interp::NodeResults;

enum class Tier : uint8_t { Interpreted, Compiling, Compiled, InterpretOnly };

/// Whether a trace's needed nodes can be compiled, and the index checks its
/// kernel needs before each launch (kernels clamp indices, so an index out of
/// range must reach the interpreter): false, with the reason, when it cannot.
bool planIndexChecks(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                     std::vector<std::pair<uint32_t, int64_t>>* checks, std::string* reason);

/// What the engine knows about one TraceKey.
struct TraceProfile {
  uint64_t runs = 0;
  uint32_t ops = 0;  ///< needed nodes, parameters included
  Tier tier = Tier::Interpreted;
  std::shared_ptr<Executable> executable;
  /// Index inputs to range-check before each compiled run: (kernel input
  /// position, extent of the indexed axis).
  std::vector<std::pair<uint32_t, int64_t>> indexChecks;
  /// The sizes its dynamic-shape kernel runs with (empty for a static one).
  std::vector<int64_t> dynamicSizes;
  /// The scalar slots its key makes kernel arguments (ScalarArgs.h); null
  /// when its constants are all in the key.
  std::shared_ptr<const ArgSlots> scalarArgs;
  std::string failure;  ///< why the key stays interpreted
  /// Its interpreted run time (whole runs through the interpreter): a
  /// moving average that falls at once and rises slowly, and the runs it
  /// has seen; the average leaves out the first kUntimedRuns, and the cost
  /// model reads it after kTimedRunsForCostModel more (TieringPolicy.h).
  double interpretedMs = 0;
  uint32_t interpretedSamples = 0;
  /// Its background compile runs urgent (TieringPolicy's CompilePriority).
  bool urgentCompile = false;
  /// The process whose compile thread its compile was queued to (while
  /// Tier::Compiling): a forked child has no such thread and compiles anew.
  pid_t compilingIn = 0;
  /// Its kernel is a Quick one and the Full compile that replaces it was
  /// submitted (Engine::recompileFull; under KILN_JIT=replay, which compiles
  /// nothing: the warning that it runs a Quick kernel was given).
  bool fullRecompileSubmitted = false;
  /// Runs of its Quick kernel so far (kFullRecompileAfterQuickRuns).
  uint32_t quickRuns = 0;
  /// The compile of its Quick kernel (its object file dropped), kept until
  /// the Full compile, which takes its optimised modules; null when the
  /// Quick kernel came from the disk cache.
  std::shared_ptr<const CompileResult> quickCompile;
  bool cacheChecked = false;  ///< the kernel cache was asked on an early run
  bool replayMiss = false;    ///< KILN_JIT=replay found no cached kernel for it
  /// The key is a hot-region key (Regions.h), not a whole trace's.
  bool region = false;
  /// A trace key's partition into regions (RegionExecutor), kept once the
  /// key has recurred without a kernel of its own.
  std::shared_ptr<const RegionPlan> regions;
  /// Region keys: the profiles of the first distinct traces it was seen in
  /// (up to kDistinctTracesForRegions, TieringPolicy.h), and whether its
  /// compilation was put off once (counted and logged once).
  std::vector<const TraceProfile*> seenInTraces;
  bool deferred = false;
  /// The engine's use counter at this key's last run (least recently used
  /// profiles are dropped beyond KILN_MAX_TRACE_KEYS).
  uint64_t lastUse = 0;
};

/// Every recorder flushes through the engine: it is the installed
/// trace::TraceRunner (one indirect call per flush).
class Engine final : public trace::TraceRunner {
 public:
  static Engine& instance();

  /// Runs the trace's needed nodes, fills `out` and sets `key` to the
  /// trace's key. Thread-safe.
  void run(const trace::Trace& trace, TraceResult& out, trace::TraceKey& key) override;

  /// Runs recorded for a key so far (0 when never seen).
  uint64_t runCount(const trace::TraceKey& key);
  Tier tierOf(const trace::TraceKey& key);
  /// The key of the most recent run on the calling thread (for tests/tools).
  static trace::TraceKey lastKey();
  /// Waits for queued compilations (tests, benchmarks).
  void drainCompiles();
  /// Finishes the compilation in progress, drops queued ones and stops the
  /// compile threads (at process exit, before the compiler's statics go).
  void shutdownCompiles();
  /// Test hook: every compilation first sleeps this long.
  void setCompileDelayForTesting(int milliseconds) { compileDelayMs_ = milliseconds; }
  /// The estimated compile time from which a background first compile has
  /// quick codegen (TieringPolicy's kQuickCodegenFromMs).
  void setQuickCodegenFromMsForTesting(double ms) { quickCodegenFromMs_ = ms; }
  /// Test hook: forgets every profile (with KernelCache::clearMemory(), a
  /// process as if freshly started).
  void resetProfilesForTesting();
  /// Test hook: the compile-cost model's per-op estimate (TieringPolicy.h).
  double compileMsPerOpForTesting();
  /// Test hook: profiles held (trace and region keys) and trace structures
  /// whose scalar slots are tracked (ScalarArgs.h).
  std::pair<size_t, size_t> profileCountsForTesting();
  /// Test hook: the largest of the per-structure tables (scalar slots,
  /// dynamic shapes, kernels started per structure).
  size_t structureCountForTesting();
  /// Test and benchmark hook: false keeps whole traces from being compiled,
  /// so that only hot regions are (to measure region kernels alone).
  void setTraceCompilesForTesting(bool on) { traceCompiles_ = on; }
  bool traceCompilesEnabled() const { return traceCompiles_; }

  // What hot regions (RegionExecutor) share with whole traces: the profile
  // table, compile jobs, kernel cache probes and the interpreter. Every
  // TraceProfile field and the per-structure kernel counts are guarded by
  // the profile lock.

  /// Holds the profile lock while the returned lock lives.
  [[nodiscard]] std::unique_lock<std::mutex> lockProfiles() { return std::unique_lock<std::mutex>(mutex_); }
  /// The profile of `key`, created when new (`*inserted`); marks it used.
  /// Under lockProfiles(). Beyond KILN_MAX_TRACE_KEYS profiles, the least
  /// recently used eighth is dropped first (whoever holds one keeps it alive).
  std::shared_ptr<TraceProfile> profileLocked(const trace::TraceKey& key, bool* inserted);
  /// Kernels started so far for a trace or region structure
  /// (TraceKey::structureHash; the KILN_MAX_SHAPES guard). Under lockProfiles().
  int64_t& kernelsOfStructureLocked(uint64_t structure) { return shapesPerStructure_[structure]; }
  /// Asks the kernel cache for `key`; on a hit, the profile runs compiled.
  /// Takes the profile lock itself.
  std::shared_ptr<Executable> probeCache(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                         const trace::TraceKey& key, TraceProfile* profile, bool always);
  /// Compiles a hot region's `graph` for its `profile` (RegionExecutor::noteCompiled
  /// records the end): in the calling thread when `now`, else on the region
  /// compile thread, so that a whole trace never waits behind regions.
  void compileRegion(std::shared_ptr<TraceProfile> profile, std::shared_ptr<const trace::TraceGraph> graph,
                     trace::TraceKey key, bool now);
  const interp::Interpreter& interpreter() const { return interpreter_; }

  // Dynamic-shape kernels of hot regions (RegionExecutor), as of whole
  // traces: a region structure seen with more than max_shapes shapes gets
  // one kernel whose varying extents are sizes.
  /// A new region key of `structure` (its region as the trace `sub`): one
  /// more shape of the structure, which its dynamic-shape kernel is planned
  /// from. Under lockProfiles().
  void noteRegionShapeLocked(uint64_t structure, const trace::Trace& sub) {
    (void)dynamic_.noteNewShape(structure, sub, std::vector<uint8_t>(sub.nodes.size(), 1), settings().max_shapes);
  }
  /// Whether the structure has a dynamic-shape kernel, compiling or ready;
  /// under lockProfiles().
  bool dynamicKernelCoversLocked(uint64_t structure) const { return dynamic_.coveredByKernel(structure); }
  /// Whether one was planned for it, failed included; under lockProfiles().
  bool dynamicKernelPlannedLocked(uint64_t structure) const { return dynamic_.kernelOf(structure) != nullptr; }
  /// Plans and compiles the dynamic-shape kernel of a hot region's
  /// structure once its static kernels have reached max_shapes.
  void startRegionDynamicCompile(const trace::Trace& sub, const trace::TraceKey& key);
  /// The region `sub` of key `key` bound to its structure's dynamic-shape
  /// kernel once that is ready and the shape fits (`profile`'s executable
  /// and dynamicSizes); null otherwise. Takes the profile lock itself.
  std::shared_ptr<Executable> bindRegionDynamic(const trace::Trace& sub, const trace::TraceKey& key,
                                                TraceProfile* profile) {
    return bindDynamic(sub, std::vector<uint8_t>(sub.nodes.size(), 1), key, profile);
  }

 private:
  /// The job holds its profile: it may be dropped from the table meanwhile.
  /// `quick`: the Quick compile a Full one replaces (CompileService::kernelFor).
  void compileJob(std::shared_ptr<TraceProfile> profile, std::shared_ptr<const trace::TraceGraph> graph,
                  trace::TraceKey key, CodegenEffort effort, std::shared_ptr<const CompileResult> quick = nullptr);
  /// After a run of `profile`'s Quick kernel (TieringPolicy.h,
  /// chooseCodegenEffort): counts it, and at its
  /// kFullRecompileAfterQuickRuns-th submits, once, the Full compile that
  /// replaces it, in the background as an upgrade, behind first compiles
  /// (JobRank; KILN_JIT=sync: now); under KILN_JIT=replay warns once, at
  /// its first run, instead.
  /// `scalarArgs` as for launchCompiled; `paramOfInput` and `nodeOfOutput`
  /// are scratch.
  void recompileFull(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                     const std::shared_ptr<TraceProfile>& profile, const trace::TraceKey& key,
                     std::span<const uint32_t> scalarArgs, std::vector<int64_t>* paramOfInput,
                     std::vector<uint32_t>* nodeOfOutput);
  /// How much of the machine a background compile of `profile` gets now
  /// (TieringPolicy's CompilePriority); under mutex_.
  CompilePriority compilePriorityLocked(const TraceProfile& profile) const;
  /// After an interpreted run of `profile` that took `ms`: its moving
  /// average, and a background compile under way becomes urgent once the
  /// trace has run about as often as its payback needs.
  void noteInterpretedRun(TraceProfile* profile, uint64_t key, double ms);
  /// The trace's key (ScalarArgs.cpp): its float constants that varied
  /// across runs of its structure are arguments, unless the trace's exact
  /// key already has a kernel. Returns the argument slots (null: none) and
  /// fills `slots` (ScalarSlots::argNodes: the arguments' nodes).
  std::shared_ptr<const ArgSlots> keyTrace(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                           trace::TraceKey* key, trace::ScalarSlots* slots);
  /// Runs a compiled trace on the trace's device (on its stream when the
  /// device is asynchronous). False when an index is out of range (the
  /// caller interprets, which reports it). `scalarArgs`: the trace nodes
  /// whose values the kernel takes as arguments (ScalarSlots::argNodes of
  /// the profile's key).
  bool launchCompiled(const trace::Trace& trace, const std::vector<uint8_t>& needed, const TraceProfile& profile,
                      const std::shared_ptr<Executable>& exe, std::span<const uint32_t> scalarArgs,
                      TraceResult& out);
  /// Dynamic-shape kernels (DynamicShapes.cpp): plans and compiles the
  /// kernel of a structure seen with more than max_shapes shapes, and binds
  /// a trace key of that structure to it when its shape fits.
  void startDynamicCompile(const trace::Trace& trace, const std::vector<uint8_t>& needed, const trace::TraceKey& key,
                           std::span<const uint32_t> scalarArgs,
                           const std::vector<std::pair<uint32_t, int64_t>>* indexChecks, const std::string& reason);
  void compileDynamicJob(std::shared_ptr<DynamicKernel> kernel, uint64_t structure);
  std::shared_ptr<Executable> bindDynamic(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                          const trace::TraceKey& key, TraceProfile* profile);
  /// A dynamic-shape kernel of the trace's structure from the disk cache
  /// (compiled by an earlier process; replay and warm starts), bound to the
  /// trace when its shape fits. Null when there is none or it does not fit.
  std::shared_ptr<Executable> cachedDynamic(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                            const trace::TraceKey& key, TraceProfile* profile,
                                            std::vector<std::pair<uint32_t, int64_t>> indexChecks,
                                            KernelCache::Probe probe);
  /// Binds `profile` to `kernel` (Ready) when the trace fits; under mutex_.
  std::shared_ptr<Executable> bindLocked(const DynamicKernel& kernel, const trace::Trace& trace,
                                         const std::vector<uint8_t>& needed, const trace::TraceKey& key,
                                         TraceProfile* profile);

  std::mutex mutex_;
  std::unordered_map<trace::TraceKey, std::shared_ptr<TraceProfile>, trace::TraceKeyHash> profiles_;
  uint64_t useCounter_ = 0;
  /// Kernels started per trace structure (TraceKey::structureHash).
  std::unordered_map<uint64_t, int64_t> shapesPerStructure_;
  /// Shapes seen and dynamic-shape kernels per trace structure.
  DynamicShapes dynamic_;
  /// Scalar slot values seen and argument slots per trace structure.
  ScalarArgs scalarArgs_;
  interp::Interpreter interpreter_;
  /// Whole traces, dynamic-shape kernels and hot regions reach the
  /// compiler through it.
  CompileService compiles_;
  /// Compile time from a trace's size, learnt from background compiles.
  CompileCostModel compileCost_;
  std::atomic<int> compileDelayMs_{0};
  /// A large trace ran: the compiler library was asked to load (under mutex_).
  bool compilerPreloadSubmitted_ = false;
  std::atomic<double> quickCodegenFromMs_{kQuickCodegenFromMs};
  std::atomic<bool> traceCompiles_{true};
};

}  // namespace kiln::exec
