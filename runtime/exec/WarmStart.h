// WarmStart: a process's first step, run from the kernel cache, as fast as
// its next ones. That first step writes all of its memory for the first
// time, and the system zeroes every page on its first write (on these VMs
// about 8 ms of CPU for the MLP benchmark's step, as much as the step's
// own work), and it loads its kernels from disk. So a process records what
// its start needed in the cache directory, under the program's name: the
// host allocator's peak demand per block size and the CPU kernels it ran,
// from its first trace run until a trace runs for the second time (the
// loop has begun). The next process of that program reads the record at
// its first trace run and, on a background thread, loads those kernels,
// starts the thread pool and faults those blocks into the allocator's
// cache while its own set-up (reading weights, building its model) goes
// on. The memory is what its start takes anyway (the allocator is filled
// up to the recorded peak, not beyond); a block nobody takes goes back to
// the system after the allocator's idle time.
//
// On while the disk cache is (KILN_CACHE) unless KILN_WARM_START=off.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/device.h"
#include "runtime/backends/cpu/CachingHostAllocator.h"

namespace kiln::exec {

/// What a program's start needed (WarmStart records it).
struct WarmStartRecord {
  std::vector<hal::BlockDemand> blocks;  ///< largest first
  std::vector<uint64_t> kernels;         ///< cache entry hashes (TraceKey::hash), at most kMaxKernels
  bool operator==(const WarmStartRecord&) const = default;
};

class WarmStart {
 public:
  static constexpr size_t kMaxKernels = 16;

  static WarmStart& instance();

  /// Called by every trace run: the first starts the record of the
  /// process's start and, when the program has a record, the background
  /// warm-up. Cheap after the first call.
  void begin() {
    if (!begun_.load(std::memory_order_relaxed)) beginOnce();
  }
  /// A CPU kernel cached under `hash` (TraceKey::hash) ran.
  void noteKernel(uint64_t hash) {
    if (recording_.load(std::memory_order_relaxed)) addKernel(hash);
  }
  /// A trace key is about to run for the second time: the start is over,
  /// and its record is stored (on a background thread).
  void noteRepeat() {
    if (recording_.load(std::memory_order_relaxed)) endRecord();
  }

  /// Waits for the background threads (tests).
  void join();
  /// Test hook: stops a record in progress and joins; the next trace run
  /// starts a warm-up and a record again (a process as if fresh).
  void resetForTesting();

  /// The record's file in the cache directory: "warmstart-<digest>.txt",
  /// the digest of this program's executable and, for an interpreter
  /// running a script (its first argument names a file), that script.
  static std::string recordFileName();
  /// Record files: a "kiln-warm-start 1" line, then "block <bytes> <count>"
  /// and "kernel <16 hex digits>" lines. parse rejects anything else, and
  /// sizes an allocator would not hand out.
  static std::string format(const WarmStartRecord& record);
  static std::optional<WarmStartRecord> parse(const std::string& text);
  /// Stores `record` in `dir` unless the file there holds it already (a
  /// program's runs mostly agree; threads' timing may change a count).
  static void store(const std::string& dir, const WarmStartRecord& record);

 private:
  WarmStart() = default;
  void beginOnce();
  void addKernel(uint64_t hash);
  void endRecord();
  /// The exit handler: joins and starts no more threads.
  static void shutdown();
  /// Joins the threads started so far; `exiting`: and starts no more.
  void joinThreads(bool exiting);
  /// The background warm-up: reads the record, loads its kernels, starts
  /// the thread pool and faults its blocks in.
  void warmUp();

  std::atomic<bool> begun_{false};
  std::atomic<bool> recording_{false};  ///< the start is being recorded
  std::mutex mutex_;                    ///< guards the threads, kernels_ and exiting_
  std::vector<uint64_t> kernels_;       ///< ran during the start, first first
  /// A thread and the process that started it (a forked child has none).
  struct Worker {
    std::thread thread;
    pid_t pid = 0;
  };
  Worker warmer_, writer_;
  bool exiting_ = false;  ///< the exit handler ran: no more threads
  /// Set by beginOnce() when warm starts are on; read by any thread.
  std::atomic<hal::CachingHostAllocator*> allocator_{nullptr};
};

}  // namespace kiln::exec
