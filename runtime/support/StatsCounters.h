// Process-wide counters behind kiln::stats().
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln::exec {

struct Counters {
  std::atomic<uint64_t> tracesRecorded{0};
  std::atomic<uint64_t> opsRecorded{0};
  std::atomic<uint64_t> opsEliminated{0};
  std::atomic<uint64_t> interpretedRuns{0};
  std::atomic<uint64_t> interpretedOps{0};
  std::atomic<uint64_t> distinctTraceKeys{0};
  std::atomic<uint64_t> flushesSizeLimit{0};
  std::atomic<uint64_t> flushesCrossThread{0};
  std::atomic<uint64_t> compiles{0};
  std::atomic<uint64_t> compileFailures{0};
  std::atomic<uint64_t> urgentCompiles{0};
  std::atomic<uint64_t> quickCompiles{0}, fullRecompiles{0};
  std::atomic<uint64_t> compiledRuns{0};
  std::atomic<uint64_t> kernelLaunches{0};
  std::atomic<uint64_t> donatedBuffers{0};
  std::atomic<uint64_t> cacheMemoryHits{0}, cacheDiskHits{0}, cacheMisses{0}, cacheRejected{0}, cacheStores{0};
  std::atomic<uint64_t> cacheLoadUs{0};
  std::atomic<uint64_t> replayMisses{0};
  std::atomic<uint64_t> profilesEvicted{0};
  /// Tier 2 (runtime/exec/Tuner.h).
  std::atomic<uint64_t> tuneSites{0}, tuneSitesSettled{0}, tuneTrials{0}, tuneRecordsUsed{0};  ///< trace/region keys dropped beyond KILN_MAX_TRACE_KEYS
  /// Warm start (runtime/exec/WarmStart.h).
  std::atomic<uint64_t> warmStartKernels{0}, warmStartBytes{0};
  /// Hot regions (RegionExecutor.h).
  std::atomic<uint64_t> compiledOps{0}, mixedRuns{0}, regionLaunches{0}, regionCompiles{0}, regionCompileFailures{0},
      regionCompileUs{0}, distinctRegionKeys{0}, regionsDeferred{0};
  /// Microseconds, so they can be atomic integers.
  std::atomic<uint64_t> compileUs{0}, importUs{0}, lowerUs{0}, llvmUs{0}, jitUs{0};
};

Counters& counters();

}  // namespace kiln::exec
