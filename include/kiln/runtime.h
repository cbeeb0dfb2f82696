// Trace boundaries, statistics and settings of the Kiln runtime.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/device.h"

namespace kiln {

/// Flushes this thread's trace and waits until its results are computed,
/// on every device (work on device streams included).
void sync();
/// Training-loop boundary: flushes this thread's trace, so that each
/// iteration records one trace whose TraceKey repeats.
void step();

/// Process-wide counters. Read with stats(); reset with reset_stats().
struct Stats {
  uint64_t traces_recorded = 0;    ///< flushed traces (non-empty)
  uint64_t ops_recorded = 0;       ///< nodes of flushed traces, parameters excluded
  uint64_t ops_eliminated = 0;     ///< dead nodes never executed
  uint64_t interpreted_runs = 0;   ///< traces run by the interpreter
  uint64_t interpreted_ops = 0;    ///< nodes run by the interpreter
  uint64_t distinct_trace_keys = 0;
  uint64_t bytes_allocated = 0;    ///< bytes handed out by device allocators
  uint64_t allocator_cache_hits = 0;
  uint64_t allocator_bytes_reserved = 0;  ///< held by caching allocators now
  uint64_t allocator_bytes_peak = 0;
  uint64_t flushes_size_limit = 0;   ///< flushes caused by KILN_MAX_TRACE_OPS
  uint64_t flushes_cross_thread = 0; ///< flushes caused by another thread
  uint64_t compiles = 0;           ///< traces compiled successfully
  uint64_t compile_failures = 0;   ///< traces the compiler rejected (run interpreted)
  /// Background trace compiles given a core of their own because they pay
  /// back soon (TieringPolicy: CompilePriority::Urgent), at once or later.
  uint64_t urgent_compiles = 0;
  /// Of `compiles`, those whose first kernel had LLVM's quick code generator
  /// (large traces compiled in the background, so they tier up sooner);
  /// each is compiled again with full codegen once it runs, which replaces
  /// it and counts in full_recompiles (and compile_ms), not in compiles.
  uint64_t quick_compiles = 0;
  uint64_t full_recompiles = 0;
  double compile_ms = 0;           ///< total compile time
  double compile_import_ms = 0, compile_lower_ms = 0, compile_llvm_ms = 0, compile_jit_ms = 0;
  uint64_t compiled_runs = 0;      ///< traces run as compiled code
  uint64_t kernel_launches = 0;    ///< fused kernels launched by compiled runs
  uint64_t donated_buffers = 0;    ///< outputs computed in place of a dead input's buffer (buffer donation)
  uint64_t cache_memory_hits = 0;  ///< kernels found in this process's kernel cache
  uint64_t cache_disk_hits = 0;    ///< kernels loaded from the disk cache
  uint64_t cache_misses = 0;       ///< disk lookups that found no usable entry
  uint64_t cache_rejected = 0;     ///< disk entries discarded (corrupt, truncated, foreign)
  uint64_t cache_stores = 0;       ///< kernels written to the disk cache
  double cache_load_ms = 0;        ///< total time reading, verifying and linking cached kernels
  uint64_t replay_misses = 0;      ///< KILN_JIT=replay: hot traces with no cached kernel (interpreted)
  // Hot regions: parts of traces compiled alone and reused wherever they
  // recur, for traces that have no kernel of their own.
  uint64_t compiled_ops = 0;           ///< nodes run in compiled code (whole traces and regions)
  uint64_t mixed_runs = 0;             ///< traces run as compiled regions + interpreted nodes
  uint64_t region_launches = 0;        ///< region kernels run by mixed runs
  uint64_t region_compiles = 0;        ///< regions compiled (apart from `compiles`, which counts traces)
  uint64_t region_compile_failures = 0;
  double region_compile_ms = 0;
  uint64_t distinct_region_keys = 0;
  /// Hot regions not compiled (at least once) because a whole-trace kernel
  /// will or may replace them (runtime/exec/TieringPolicy.h).
  uint64_t regions_deferred = 0;
  /// Trace and region keys whose profiles (and, in memory, kernels) were
  /// dropped, least recently used first, beyond KILN_MAX_TRACE_KEYS.
  uint64_t trace_keys_evicted = 0;
  // Tier 2 (KILN_TUNE): GEMM shapes that try blockings on their real calls.
  // The two site counts describe the sites as they are: reset_stats()
  // leaves them.
  uint64_t tune_sites = 0;          ///< tuned call sites seen (a GEMM shape and layout each)
  uint64_t tune_sites_settled = 0;  ///< of those, running their final choice (tried, recorded or fixed)
  uint64_t tune_trials = 0;         ///< calls that ran as a measured trial
  uint64_t tune_records_used = 0;   ///< sites that took their choice from the disk cache's record
  // Warm start (KILN_WARM_START): done on a background thread at the first
  // trace run, from the program's record in the disk cache.
  uint64_t warm_start_kernels = 0;  ///< kernels loaded ahead of the first step
  uint64_t warm_start_bytes = 0;    ///< host memory faulted in ahead of the first step
  // Devices other than the CPU (GPUs, the test device), summed over them;
  // kiln::device_stats gives each device's own figures.
  uint64_t device_bytes_active = 0;     ///< device memory held by tensors now
  uint64_t device_kernel_launches = 0;  ///< kernels launched on devices (tier 0 and compiled)
  /// Compiled traces launched as one CUDA graph (KILN_CUDA_GRAPHS); their
  /// kernels count in device_kernel_launches too.
  uint64_t device_graph_launches = 0;
  uint64_t device_copy_bytes = 0;       ///< bytes copied to, from and within devices
  /// Share of executed ops (compiled_ops + interpreted_ops) that ran compiled, 0..1.
  double compiled_op_share() const {
    const uint64_t total = compiled_ops + interpreted_ops;
    return total ? static_cast<double>(compiled_ops) / static_cast<double>(total) : 0.0;
  }
  /// One line per counter, "name value" (KILN_STATS_FIELDS order), then the
  /// compiled share of executed ops.
  std::string str() const;
};
/// Every Stats field as X(name), in declaration order: the one list that the
/// C ABI's kiln_stats_json and the Python bindings enumerate, so that a new
/// counter reaches both (runtime/support/Stats.cpp checks that it names them all).
#define KILN_STATS_FIELDS(X) \
  X(traces_recorded) X(ops_recorded) X(ops_eliminated) X(interpreted_runs) X(interpreted_ops) \
  X(distinct_trace_keys) X(bytes_allocated) X(allocator_cache_hits) X(allocator_bytes_reserved) \
  X(allocator_bytes_peak) X(flushes_size_limit) X(flushes_cross_thread) X(compiles) \
  X(compile_failures) X(urgent_compiles) X(quick_compiles) X(full_recompiles) X(compile_ms) \
  X(compile_import_ms) X(compile_lower_ms) X(compile_llvm_ms) X(compile_jit_ms) X(compiled_runs) \
  X(kernel_launches) X(donated_buffers) X(cache_memory_hits) X(cache_disk_hits) X(cache_misses) \
  X(cache_rejected) X(cache_stores) X(cache_load_ms) X(replay_misses) X(compiled_ops) X(mixed_runs) \
  X(region_launches) X(region_compiles) X(region_compile_failures) X(region_compile_ms) \
  X(distinct_region_keys) X(regions_deferred) X(trace_keys_evicted) X(tune_sites) \
  X(tune_sites_settled) X(tune_trials) X(tune_records_used) X(warm_start_kernels) \
  X(warm_start_bytes) X(device_bytes_active) X(device_kernel_launches) X(device_graph_launches) \
  X(device_copy_bytes)

Stats stats();
void reset_stats();

/// One device's figures since the process started (not reset by reset_stats).
struct DeviceStats {
  uint64_t bytes_active = 0;       ///< memory in use by tensors (rounded block sizes)
  uint64_t bytes_reserved = 0;     ///< held from the driver by the caching allocator
  uint64_t bytes_peak_active = 0;
  uint64_t allocator_retries = 0;  ///< out-of-memory retries after emptying the cache
  uint64_t kernel_launches = 0;
  /// CUDA devices (KILN_CUDA_GRAPHS): compiled traces launched as one graph,
  /// graphs built (one per compiled trace that ran twice), and graph
  /// launches that first updated kernel parameters (the trace's buffers
  /// had moved).
  uint64_t graph_launches = 0, graphs_built = 0, graph_updates = 0;
  uint64_t copy_bytes_to_device = 0, copy_bytes_to_host = 0, copy_bytes_on_device = 0;
};
/// Throws kiln::Error when no driver provides `device`.
DeviceStats device_stats(Device device);

/// Returns cached, unused device memory to the system.
void empty_cache();

/// How traces that run often are compiled (KILN_JIT).
enum class JitMode : uint8_t {
  Async,   ///< hot traces compile on background threads (the default)
  Sync,    ///< hot traces compile in the thread that runs them
  Off,     ///< everything is interpreted
  Replay,  ///< nothing compiles: kernels come only from the disk cache
};
/// "async", "sync", "off" or "replay": the KILN_JIT spelling of `mode`.
const char* to_string(JitMode mode);

/// Settings read once from the environment (see README): KILN_LOG,
/// KILN_MAX_TRACE_OPS, KILN_NUM_THREADS, KILN_JIT, KILN_JIT_THRESHOLD,
/// KILN_COMPILE_THREADS, KILN_COMPILE_SHARE, KILN_CACHE, KILN_CACHE_DIR, KILN_CACHE_MAX_MB,
/// KILN_REPLAY_STRICT, KILN_TEST_DEVICES, KILN_DEFAULT_DEVICE, KILN_CUDA_LIBRARY.
struct Settings {
  std::string log_level = "warn";
  int64_t max_trace_ops = 4096;
  int num_threads = 0;  ///< 0: TBB's default
  JitMode jit = JitMode::Async;
  int64_t jit_threshold = 2;
  int compile_threads = 1;
  /// Percent of one core that background compiles get while they run, even
  /// when the user's threads keep every core busy (KILN_COMPILE_SHARE, 0-100).
  /// They run at the lowest priority and, in short spells while their share
  /// is below this, at normal priority with the process's TBB parallelism
  /// lowered by their number; 0 leaves them at the lowest priority only (a
  /// compile may then wait as long as the cores stay busy).
  int compile_share = 20;
  /// Shapes of one trace structure that get their own kernel; a structure
  /// seen with more shapes gets one dynamic-shape kernel for further ones
  /// (interpreted where it cannot have one, or a shape does not fit it)
  /// (KILN_MAX_SHAPES).
  int64_t max_shapes = 8;
  std::string cache = "on";  ///< "off": no disk kernel cache
  /// Tier 2: hot GEMM shapes try a few cache blockings on their real calls
  /// and keep the fastest, stored in the disk cache per CPU ("off": every
  /// call runs the default blocking and no record is read) (KILN_TUNE).
  std::string tune = "on";
  /// A process's first compiled CPU run records the memory and kernel it
  /// needed in the disk cache, per program; the program's next process
  /// loads that kernel and faults that memory in on a background thread
  /// at its first trace run, so its first step runs as fast as the next
  /// ("off": no record read or written) (KILN_WARM_START).
  std::string warm_start = "on";
  /// Disk kernel cache; default $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
  std::string cache_dir;
  int64_t cache_max_mb = 1024;  ///< least recently used entries go beyond this
  /// KILN_JIT=replay: a hot trace without a cached kernel is an error.
  bool replay_strict = false;
  /// Trace and region keys the engine remembers (their run counts, tiers and
  /// kernels in memory); the least recently used go beyond this, so a
  /// program that never repeats a trace does not grow without end
  /// (KILN_MAX_TRACE_KEYS). A dropped key's kernel stays in the disk cache.
  int64_t max_trace_keys = 8192;
  /// Test devices to register (Device::test(0..n-1); KILN_TEST_DEVICES).
  int test_devices = 0;
  /// The device creation ops use when none is given ("cpu", "test:0", ...;
  /// KILN_DEFAULT_DEVICE). Read once, at the first default_device() call.
  std::string default_device = "cpu";
  /// Seconds a collective may take before it fails with kiln::Error (a rank
  /// died or hangs; include/kiln/dist.h) (KILN_DIST_TIMEOUT).
  int64_t dist_timeout_s = 300;
  /// The CUDA driver library to open ("": libcuda.so.1; KILN_CUDA_LIBRARY).
  /// Read once, when the backends are first initialised.
  std::string cuda_library;
  /// KILN_LEVEL_ZERO_LIBRARY: the Level Zero loader Kiln opens with dlopen
  /// (default libze_loader.so.1).
  std::string level_zero_library;
  /// A compiled trace's kernels on a CUDA device launch as one CUDA graph
  /// from its second run (false: one by one; KILN_CUDA_GRAPHS). Read when a
  /// compiled trace is loaded.
  bool cuda_graphs = true;
  /// f32, i32 and half reductions along a contiguous axis on a CUDA device
  /// compile into row kernels (a block per row, fused with the element-wise
  /// work on the same rows) instead of running on tier 0's warp kernels
  /// between compiled regions (KILN_CUDA_ROW_KERNELS; not yet measured on a
  /// GPU).
  bool cuda_row_kernels = false;

  bool operator==(const Settings&) const = default;
};
const Settings& settings();
/// Replaces the settings (the C ABI's kiln_set_option uses this). New values
/// apply to traces flushed afterwards; references returned by settings()
/// before stay valid (they keep the old values; settings equal to ones set
/// before reuse that snapshot, so switching among a few configurations, as a
/// scoped override does, takes no more memory each time). A value outside its range
/// (README, "Environment variables") throws kiln::Error and changes nothing;
/// choices are stored in lower case.
void set_settings(const Settings& s);

}  // namespace kiln
