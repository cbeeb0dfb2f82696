#include <sstream>

#include "kiln/runtime.h"
#include "runtime/backends/Hal.h"
#include "runtime/support/StatsCounters.h"

namespace kiln {

namespace exec {
Counters& counters() {
  static Counters* c = new Counters();
  return *c;
}
}  // namespace exec

namespace {
// Allocator figures are cumulative in the allocator; reset_stats() records a
// baseline so that stats() reports what happened since.
std::atomic<uint64_t> gAllocBase{0}, gAllocHitBase{0};
}  // namespace

Stats stats() {
  exec::Counters& c = exec::counters();
  Stats s;
  s.traces_recorded = c.tracesRecorded.load();
  s.ops_recorded = c.opsRecorded.load();
  s.ops_eliminated = c.opsEliminated.load();
  s.interpreted_runs = c.interpretedRuns.load();
  s.interpreted_ops = c.interpretedOps.load();
  s.distinct_trace_keys = c.distinctTraceKeys.load();
  s.flushes_size_limit = c.flushesSizeLimit.load();
  s.flushes_cross_thread = c.flushesCrossThread.load();
  s.compiles = c.compiles.load();
  s.compile_failures = c.compileFailures.load();
  s.urgent_compiles = c.urgentCompiles.load();
  s.quick_compiles = c.quickCompiles.load();
  s.full_recompiles = c.fullRecompiles.load();
  s.compiled_runs = c.compiledRuns.load();
  s.kernel_launches = c.kernelLaunches.load();
  s.donated_buffers = c.donatedBuffers.load();
  s.compile_ms = static_cast<double>(c.compileUs.load()) / 1000.0;
  s.compile_import_ms = static_cast<double>(c.importUs.load()) / 1000.0;
  s.compile_lower_ms = static_cast<double>(c.lowerUs.load()) / 1000.0;
  s.compile_llvm_ms = static_cast<double>(c.llvmUs.load()) / 1000.0;
  s.compile_jit_ms = static_cast<double>(c.jitUs.load()) / 1000.0;
  s.cache_memory_hits = c.cacheMemoryHits.load();
  s.cache_disk_hits = c.cacheDiskHits.load();
  s.cache_misses = c.cacheMisses.load();
  s.cache_rejected = c.cacheRejected.load();
  s.cache_stores = c.cacheStores.load();
  s.cache_load_ms = static_cast<double>(c.cacheLoadUs.load()) / 1000.0;
  s.replay_misses = c.replayMisses.load();
  s.compiled_ops = c.compiledOps.load();
  s.mixed_runs = c.mixedRuns.load();
  s.region_launches = c.regionLaunches.load();
  s.region_compiles = c.regionCompiles.load();
  s.region_compile_failures = c.regionCompileFailures.load();
  s.region_compile_ms = static_cast<double>(c.regionCompileUs.load()) / 1000.0;
  s.distinct_region_keys = c.distinctRegionKeys.load();
  s.regions_deferred = c.regionsDeferred.load();
  s.trace_keys_evicted = c.profilesEvicted.load();
  s.tune_sites = c.tuneSites.load();
  s.tune_sites_settled = c.tuneSitesSettled.load();
  s.tune_trials = c.tuneTrials.load();
  s.tune_records_used = c.tuneRecordsUsed.load();
  s.warm_start_kernels = c.warmStartKernels.load();
  s.warm_start_bytes = c.warmStartBytes.load();
  for (hal::Driver* d : hal::drivers()) {
    for (int i = 0; i < d->deviceCount(); ++i) {
      hal::AllocatorStats a = d->device(i).allocator().stats();
      s.bytes_allocated += a.bytes_requested;
      s.allocator_cache_hits += a.cache_hits;
      s.allocator_bytes_reserved += a.bytes_reserved;
      s.allocator_bytes_peak += a.bytes_peak_active;
      if (d->kind() != Device::CPU) {
        const hal::DeviceCounters counters = d->device(i).counters();
        s.device_bytes_active += a.bytes_active;
        s.device_kernel_launches += counters.launches;
        s.device_graph_launches += counters.graph_launches;
        s.device_copy_bytes +=
            counters.copy_bytes_to_device + counters.copy_bytes_to_host + counters.copy_bytes_on_device;
      }
    }
  }
  s.bytes_allocated -= gAllocBase.load();
  s.allocator_cache_hits -= gAllocHitBase.load();
  return s;
}

void reset_stats() {
  exec::Counters& c = exec::counters();
  for (auto* a : {&c.tracesRecorded, &c.opsRecorded, &c.opsEliminated, &c.interpretedRuns, &c.interpretedOps,
                  &c.distinctTraceKeys, &c.flushesSizeLimit, &c.flushesCrossThread, &c.compiles, &c.compileFailures, &c.urgentCompiles,
                  &c.quickCompiles, &c.fullRecompiles,
                  &c.compiledRuns, &c.kernelLaunches, &c.donatedBuffers, &c.compileUs, &c.importUs, &c.lowerUs, &c.llvmUs, &c.jitUs, &c.cacheMemoryHits, &c.cacheDiskHits,
                  &c.cacheMisses, &c.cacheRejected, &c.cacheStores, &c.cacheLoadUs, &c.replayMisses,
                  &c.compiledOps, &c.mixedRuns, &c.regionLaunches, &c.regionCompiles, &c.regionCompileFailures,
                  &c.regionCompileUs, &c.distinctRegionKeys, &c.regionsDeferred, &c.profilesEvicted,
                  &c.tuneTrials, &c.tuneRecordsUsed, &c.warmStartKernels, &c.warmStartBytes})
    a->store(0);
  gAllocBase.store(0);
  gAllocHitBase.store(0);
  Stats now = stats();
  gAllocBase.store(now.bytes_allocated);
  gAllocHitBase.store(now.allocator_cache_hits);
}

// KILN_STATS_FIELDS must name every field (each 8 bytes): a field missing
// from it would be missing from kiln_stats_json and kiln.stats().
#define KILN_STAT_SIZE(name) +sizeof(Stats::name)
static_assert(sizeof(Stats) == 0 KILN_STATS_FIELDS(KILN_STAT_SIZE), "KILN_STATS_FIELDS (kiln/runtime.h) misses a Stats field");
#undef KILN_STAT_SIZE

std::string Stats::str() const {
  // From KILN_STATS_FIELDS, like the C ABI's JSON: a new counter shows here
  // without another list to keep.
  std::ostringstream o;
#define KILN_STAT_LINE(name) o << #name " " << name << "\n";
  KILN_STATS_FIELDS(KILN_STAT_LINE)
#undef KILN_STAT_LINE
  o << "compiled_op_share " << compiled_op_share() << " (of executed ops, compiled_ops / (compiled_ops + "
    << "interpreted_ops))\n";
  return o.str();
}

DeviceStats device_stats(Device device) {
  hal::DeviceContext& ctx = hal::deviceContext(device);
  const hal::AllocatorStats a = ctx.allocator().stats();
  const hal::DeviceCounters c = ctx.counters();
  DeviceStats s;
  s.bytes_active = a.bytes_active;
  s.bytes_reserved = a.bytes_reserved;
  s.bytes_peak_active = a.bytes_peak_active;
  s.allocator_retries = a.retries;
  s.kernel_launches = c.launches;
  s.graph_launches = c.graph_launches;
  s.graphs_built = c.graphs_built;
  s.graph_updates = c.graph_updates;
  s.copy_bytes_to_device = c.copy_bytes_to_device;
  s.copy_bytes_to_host = c.copy_bytes_to_host;
  s.copy_bytes_on_device = c.copy_bytes_on_device;
  return s;
}

void empty_cache() {
  for (hal::Driver* d : hal::drivers())
    for (int i = 0; i < d->deviceCount(); ++i) d->device(i).allocator().emptyCache();
}

}  // namespace kiln
