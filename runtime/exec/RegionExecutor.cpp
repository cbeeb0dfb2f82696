#include "runtime/exec/RegionExecutor.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "kiln/runtime.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/cache/TraceKeyCodec.h"
#include "runtime/exec/LaunchTarget.h"
#include "runtime/support/Log.h"
#include "runtime/support/StatsCounters.h"
#include "runtime/exec/TieringPolicy.h"
#include "runtime/interp/Kernels.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::exec {

namespace {

std::vector<uint8_t> allNeeded(const trace::Trace& t) { return std::vector<uint8_t>(t.nodes.size(), 1); }

std::string hex(uint64_t h) {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(h));
  return name;
}

/// Fills the plan's key occurrences and the share of the trace's estimated
/// work its recurring regions carry (TieringPolicy's facts).
void measureRecurrence(const trace::Trace& trace, const std::vector<uint32_t>& ids, RegionPlan& plan) {
  double total = 0, recurring = 0;
  for (uint32_t id : ids) total += estimateNodeWork(trace, trace.nodes[id]);
  std::unordered_map<uint64_t, uint32_t> count;
  for (const Region& r : plan.regions)
    if (r.keyed) ++count[r.key.hash];
  plan.keyOccurrences.assign(plan.regions.size(), 0);
  for (size_t ri = 0; ri < plan.regions.size(); ++ri) {
    const Region& r = plan.regions[ri];
    if (!r.keyed) continue;
    plan.keyOccurrences[ri] = count[r.key.hash];
    if (plan.keyOccurrences[ri] < 2) continue;
    for (uint32_t q : r.nodes) recurring += estimateNodeWork(trace, trace.nodes[ids[q]]);
  }
  plan.recurringWorkShare = total > 0 ? std::min(1.0, recurring / total) : 0.0;
}

/// Where the trace being run stands, for the region policy.
TraceOutlook outlookOf(const TraceProfile& trace, bool traceCompiles, uint64_t threshold) {
  if (!traceCompiles || trace.tier == Tier::InterpretOnly) return TraceOutlook::NoWholeKernel;
  return trace.runs >= threshold ? TraceOutlook::WholeKernelComing : TraceOutlook::MayRecur;
}

}  // namespace

double compiledOpPercent() {
  Counters& c = counters();
  const double compiled = static_cast<double>(c.compiledOps.load(std::memory_order_relaxed));
  const double total = compiled + static_cast<double>(c.interpretedOps.load(std::memory_order_relaxed));
  return total > 0 ? 100.0 * compiled / total : 0.0;
}

void RegionExecutor::noteCompiled(TraceProfile* profile, const std::shared_ptr<Executable>& exe, bool fromCache,
                                  const CompileResult& result, const char* name) {
  Counters& c = counters();
  if (!exe) {
    profile->tier = Tier::InterpretOnly;
    profile->failure = result.error;
    c.regionCompileFailures.fetch_add(1);
    log().log(compilesStopped() ? spdlog::level::debug : spdlog::level::warn,
              "region {} ({} ops) stays interpreted: compilation failed: {}", name, profile->ops, result.error);
    return;
  }
  profile->executable = exe;
  profile->tier = Tier::Compiled;
  if (fromCache) return;
  c.regionCompiles.fetch_add(1);
  c.regionCompileUs.fetch_add(static_cast<uint64_t>(result.timings.totalMs() * 1000.0));
  log().info("tier-up: region {} ({} ops, seen {} times) compiled into {} fused kernel(s) in {:.1f} ms; {:.0f}% of "
             "executed ops ran compiled so far",
             name, profile->ops, profile->runs, exe->kernelCount(), result.timings.totalMs(), compiledOpPercent());
}

std::shared_ptr<const RegionPlan> RegionExecutor::planFor(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                                         const std::vector<uint32_t>& ids,
                                                         TraceProfile* profile) {
  {
    auto lock = engine_.lockProfiles();
    if (profile->regions) return profile->regions;
  }
  const std::vector<uint32_t> scalarArgs =
      profile->scalarArgs ? cache::scalarArgNodes(trace, needed, *profile->scalarArgs) : std::vector<uint32_t>{};
  auto plan = std::make_shared<RegionPlan>(partitionRegions(trace, ids, scalarArgs));
  measureRecurrence(trace, ids, *plan);
  std::vector<const Region*> newKeys;
  {
    auto lock = engine_.lockProfiles();
    if (profile->regions) return profile->regions;  // another thread was faster
    Counters& c = counters();
    for (Region& r : plan->regions) {
      if (!r.keyed) continue;
      bool inserted = false;
      std::shared_ptr<TraceProfile> held = engine_.profileLocked(r.key, &inserted);
      TraceProfile& rp = *held;
      if (inserted) {
        // A key that is also a whole trace's (a trace that is one region) is
        // counted as what it was first seen as; both share its kernel.
        rp.region = true;
        rp.ops = static_cast<uint32_t>(r.inputs.size()) + r.ops;
        c.distinctRegionKeys.fetch_add(1, std::memory_order_relaxed);
        newKeys.push_back(&r);
      }
      r.profile = held;
    }
    // Kept for the key's later runs once it has recurred; a trace seen once
    // (a loop with a new trip count) does not keep its plan.
    if (profile->runs > 1) profile->regions = plan;
  }
  // A new key is a new shape of its region's structure, which a dynamic-shape
  // kernel for the structure is planned from (run: past max_shapes).
  if (settings().jit != JitMode::Async && settings().jit != JitMode::Sync) return plan;
  for (const Region* r : newKeys) {
    trace::Trace sub = regionTrace(trace, ids, *r);
    auto lock = engine_.lockProfiles();
    engine_.noteRegionShapeLocked(r->key.structureHash, sub);
  }
  return plan;
}

void RegionExecutor::startCompile(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region) {
  trace::Trace sub = regionTrace(trace, ids, region);
  const std::vector<uint8_t> needed = allNeeded(sub);
  std::vector<std::pair<uint32_t, int64_t>> checks;
  std::string reason;
  TraceProfile* rp = region.profile.get();
  if (!planIndexChecks(sub, needed, &checks, &reason)) {
    auto lock = engine_.lockProfiles();
    rp->tier = Tier::InterpretOnly;
    rp->failure = reason;
    log().info("region {} stays interpreted: {}", hex(region.key.hash), reason);
    return;
  }
  {
    auto lock = engine_.lockProfiles();
    rp->indexChecks = std::move(checks);
  }
  std::vector<int64_t> paramOfInput;
  std::vector<uint32_t> nodeOfOutput;
  auto graph = std::make_shared<const trace::TraceGraph>(trace::extractGraph(sub, needed, &paramOfInput, &nodeOfOutput));
  engine_.compileRegion(region.profile, std::move(graph), region.key, settings().jit == JitMode::Sync);
}

void RegionExecutor::probeReplay(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region) {
  trace::Trace sub = regionTrace(trace, ids, region);
  const std::vector<uint8_t> needed = allNeeded(sub);
  std::vector<std::pair<uint32_t, int64_t>> checks;
  std::string reason;
  const bool compilable = planIndexChecks(sub, needed, &checks, &reason);
  std::shared_ptr<Executable> exe;
  if (compilable) exe = engine_.probeCache(sub, needed, region.key, region.profile.get(), true);
  auto lock = engine_.lockProfiles();
  TraceProfile* rp = region.profile.get();
  if (exe) return;
  rp->tier = Tier::InterpretOnly;
  if (!compilable) {
    rp->failure = reason;
    return;
  }
  rp->replayMiss = true;
  rp->failure = "KILN_JIT=replay: no cached kernel";
  log().info("KILN_JIT=replay: hot region {} ({} ops) has no cached kernel; it runs interpreted", hex(region.key.hash),
             region.ops);
}

bool RegionExecutor::launch(const trace::Trace& trace, const std::vector<uint32_t>& ids, const Region& region,
                            const std::shared_ptr<Executable>& exe,
                            const std::vector<std::pair<uint32_t, int64_t>>& indexChecks,
                            const std::vector<int64_t>& sizes, const RegionStep& step,
                            const std::vector<uint32_t>& lastUse, TraceResult& out) {
  for (uint32_t q : region.inputs) {
    if (!out.pending.empty()) interp::awaitValue(out, ids[q]);  // a collective's result
    if (out.errors[ids[q]]) return false;
  }
  LaunchTarget target(trace.device);
  // Kernels clamp indices: an index out of range must reach the interpreter.
  for (auto [pos, extent] : indexChecks) {
    const uint32_t id = ids[region.inputs[pos]];
    for (int64_t x : interp::readIndicesOnce(trace, id, out))
      if (x < 0 || x >= extent) return false;
  }
  std::vector<void*> args;
  // Dense copies of strided inputs live until the kernel has run: on the CPU
  // it runs before launch() returns; a device frees them stream-ordered.
  std::vector<core::View> dense;
  args.reserve(region.inputs.size() + region.outputs.size() + 1);
  for (uint32_t q : region.inputs) {
    const uint32_t id = ids[q];
    const trace::Node& node = trace.nodes[id];
    dense.push_back(target.dense(out.values[id], node.dtype, node.shape));
    args.push_back(dense.back().bytes(node.dtype));
  }
  for (uint32_t q : region.outputs) {
    const uint32_t id = ids[q];
    const trace::Node& node = trace.nodes[id];
    out.values[id] = target.alloc(node.dtype, node.shape);
    args.push_back(out.values[id].bytes(node.dtype));
  }
  std::shared_ptr<core::Storage> scratch;
  // A dynamic-shape kernel's scratch depends on its sizes, which follow it.
  const std::size_t scratchBytes = sizes.empty() ? exe->scratchBytes() : exe->dynamicScratchBytes(sizes.data());
  if (scratchBytes > 0) scratch = target.scratch(scratchBytes);
  args.push_back(scratch ? scratch->data() : nullptr);
  target.launch(exe, std::move(args), sizes);  // never donates: region inputs may be read again
  // Free inputs whose last reader was in this region, unless a tensor holds them.
  for (uint32_t q : region.inputs) {
    const uint32_t id = ids[q];
    if (lastUse[id] >= step.begin && lastUse[id] < step.end && !trace.holders[id]) out.values[id] = core::View{};
  }
  return true;
}

bool RegionExecutor::run(const trace::Trace& trace, const std::vector<uint8_t>& needed, TraceProfile* profile,
                         TraceResult& out) {
  const Settings& s = settings();
  const bool compileMode = s.jit == JitMode::Async || s.jit == JitMode::Sync;
  const bool replay = s.jit == JitMode::Replay;
  if (!compileMode && !replay) return false;
  const uint64_t threshold = static_cast<uint64_t>(std::max<int64_t>(s.jit_threshold, 1));
  const std::vector<uint32_t> ids = neededNodes(needed);
  std::shared_ptr<const RegionPlan> plan = planFor(trace, needed, ids, profile);
  if (plan->keyedRegions == 0) return false;
  const std::vector<Region>& regions = plan->regions;

  // Count, and find the regions to look up in the kernel cache.
  std::vector<uint32_t> probe, probeAlways, compile, dynamic;
  TraceOutlook outlook;
  {
    auto lock = engine_.lockProfiles();
    outlook = outlookOf(*profile, engine_.traceCompilesEnabled(), threshold);
    for (const Region& r : regions) {
      if (!r.keyed) continue;
      TraceProfile* rp = r.profile.get();
      ++rp->runs;
      if (rp->seenInTraces.size() < kDistinctTracesForRegions &&
          std::find(rp->seenInTraces.begin(), rp->seenInTraces.end(), profile) == rp->seenInTraces.end())
        rp->seenInTraces.push_back(profile);
    }
    for (uint32_t ri = 0; ri < regions.size(); ++ri) {
      TraceProfile* rp = regions[ri].profile.get();
      if (!rp || rp->executable) continue;
      if (rp->replayMiss && compileMode) {  // left replay mode: compile it after all
        rp->replayMiss = false;
        rp->tier = Tier::Interpreted;
      }
      if (rp->tier == Tier::Interpreted && !rp->cacheChecked) {
        rp->cacheChecked = true;
        probe.push_back(ri);
      }
    }
  }
  // Warm start: region kernels an earlier process cached (listed keys only).
  for (uint32_t ri : probe) {
    trace::Trace sub = regionTrace(trace, ids, regions[ri]);
    engine_.probeCache(sub, allNeeded(sub), regions[ri].key, regions[ri].profile.get(), false);
  }
  {
    auto lock = engine_.lockProfiles();
    Counters& c = counters();
    for (uint32_t ri = 0; ri < regions.size(); ++ri) {
      TraceProfile* rp = regions[ri].profile.get();
      if (!rp || rp->executable || rp->tier != Tier::Interpreted || rp->runs < threshold) continue;
      if (replay) {
        // Replay compiles nothing: a hot region of a trace that is not hot
        // itself may come from the kernel cache.
        if (outlook == TraceOutlook::WholeKernelComing) continue;
        rp->tier = Tier::Compiling;  // decided by probeReplay
        probeAlways.push_back(ri);
        continue;
      }
      const RegionFacts facts{.occurrences = rp->runs,
                              .threshold = threshold,
                              .distinctTraces = static_cast<uint32_t>(rp->seenInTraces.size()),
                              .occurrencesInTrace = plan->keyOccurrences[ri],
                              .recurringWorkShare = plan->recurringWorkShare,
                              .trace = outlook};
      const RegionVerdict verdict = decideRegion(facts);
      if (verdict != RegionVerdict::Compile) {
        if (verdict != RegionVerdict::NotHot && !rp->deferred) {
          rp->deferred = true;
          c.regionsDeferred.fetch_add(1, std::memory_order_relaxed);
          log().info("region {} ({} ops, seen {} times in {} trace(s); this trace's recurring regions are {:.1f}% "
                     "of its work) not compiled: {}",
                     hex(regions[ri].key.hash), regions[ri].ops, rp->runs, rp->seenInTraces.size(),
                     100.0 * facts.recurringWorkShare, verdictName(verdict));
        }
        continue;
      }
      // Bound below once its structure's dynamic-shape kernel is ready.
      const uint64_t structure = regions[ri].key.structureHash;
      if (engine_.dynamicKernelCoversLocked(structure)) continue;
      int64_t& shapes = engine_.kernelsOfStructureLocked(structure);
      if (shapes >= s.max_shapes && !engine_.dynamicKernelPlannedLocked(structure)) {
        // Its structure's kernels reached max_shapes: one dynamic-shape kernel
        // for it (as for whole traces), once per structure.
        if (std::find_if(dynamic.begin(), dynamic.end(), [&](uint32_t other) {
              return regions[other].key.structureHash == structure;
            }) == dynamic.end())
          dynamic.push_back(ri);
        continue;
      }
      if (shapes >= s.max_shapes) {
        rp->tier = Tier::InterpretOnly;
        rp->failure = "its structure was already compiled for KILN_MAX_SHAPES shapes";
        if (shapes++ == s.max_shapes)
          log().info("region {:016x}: structure seen with more than {} shapes; new shapes stay interpreted",
                     regions[ri].key.hash, s.max_shapes);
        continue;
      }
      ++shapes;
      rp->tier = Tier::Compiling;
      compile.push_back(ri);
    }
  }
  for (uint32_t ri : probeAlways) probeReplay(trace, ids, regions[ri]);
  for (uint32_t ri : compile) startCompile(trace, ids, regions[ri]);
  for (uint32_t ri : dynamic) engine_.startRegionDynamicCompile(regionTrace(trace, ids, regions[ri]), regions[ri].key);

  // Regions whose structure has a dynamic-shape kernel: bound to it once it
  // is ready (their own key's shape as its sizes).
  std::vector<uint32_t> bind;
  {
    auto lock = engine_.lockProfiles();
    for (uint32_t ri = 0; ri < regions.size(); ++ri) {
      TraceProfile* rp = regions[ri].profile.get();
      if (rp && !rp->executable && rp->tier == Tier::Interpreted &&
          engine_.dynamicKernelCoversLocked(regions[ri].key.structureHash))
        bind.push_back(ri);
    }
  }
  for (uint32_t ri : bind)
    engine_.bindRegionDynamic(regionTrace(trace, ids, regions[ri]), regions[ri].key, regions[ri].profile.get());

  // The kernels this run can use.
  std::vector<std::shared_ptr<Executable>> exes(regions.size());
  std::vector<std::vector<std::pair<uint32_t, int64_t>>> checks(regions.size());
  std::vector<std::vector<int64_t>> sizes(regions.size());
  bool any = false;
  {
    auto lock = engine_.lockProfiles();
    for (uint32_t ri = 0; ri < regions.size(); ++ri) {
      TraceProfile* rp = regions[ri].profile.get();
      if (!rp || !rp->executable) continue;
      exes[ri] = rp->executable;
      checks[ri] = rp->indexChecks;
      if (rp->executable->dynamicSizes > 0) sizes[ri] = rp->dynamicSizes;
      any = true;
    }
  }
  if (!any) return false;

  // Mixed run: steps in order, compiled regions launched, the rest interpreted.
  auto start = std::chrono::steady_clock::now();
  const size_t n = trace.nodes.size();
  out.reset(n);
  std::vector<uint32_t> order(plan->order.size()), lastUse(n, 0);
  for (size_t i = 0; i < order.size(); ++i) order[i] = ids[plan->order[i]];
  for (size_t p = 0; p < ids.size(); ++p) lastUse[ids[p]] = plan->lastUse[p];
  uint64_t compiledOps = 0, interpretedOps = 0, launches = 0, kernels = 0;
  for (const RegionStep& step : plan->steps) {
    if (step.region >= 0) {
      const auto ri = static_cast<size_t>(step.region);
      if (exes[ri] && launch(trace, ids, regions[ri], exes[ri], checks[ri], sizes[ri], step, lastUse, out)) {
        compiledOps += regions[ri].ops;
        ++launches;
        kernels += static_cast<uint64_t>(exes[ri]->kernelCount());
        continue;
      }
    }
    std::span<const uint32_t> nodes(order.data() + step.begin, step.end - step.begin);
    engine_.interpreter().runNodes(trace, nodes, step.begin, lastUse, out);
    for (uint32_t id : nodes) interpretedOps += trace.nodes[id].op != core::OpKind::Param;
  }
  // Collectives still running (their results are outputs, or unread).
  interp::awaitAll(out);
  Counters& c = counters();
  c.mixedRuns.fetch_add(1, std::memory_order_relaxed);
  c.regionLaunches.fetch_add(launches, std::memory_order_relaxed);
  c.kernelLaunches.fetch_add(kernels, std::memory_order_relaxed);
  c.compiledOps.fetch_add(compiledOps, std::memory_order_relaxed);
  c.interpretedOps.fetch_add(interpretedOps, std::memory_order_relaxed);
  if (log().should_log(spdlog::level::debug)) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    log().debug("trace: {} regions, {} launched compiled ({} of {} ops), the rest interpreted, in {:.3f} ms",
                regions.size(), launches, compiledOps, compiledOps + interpretedOps, ms);
  }
  return true;
}

}  // namespace kiln::exec
