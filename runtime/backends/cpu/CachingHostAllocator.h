// CachingHostAllocator: size-bucketed, 64-byte aligned host memory that is
// reused across steps, so a training loop does not page-fault fresh memory
// every iteration. A cached block nobody reused for a while (a batch size
// that never came back) goes back to the system, so a loop whose sizes keep
// changing does not hold every size it ever saw.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/backends/Allocator.h"
#include "runtime/backends/cpu/HugePageSlabs.h"

namespace kiln::hal {

/// A steady clock read from the kernel's coarse timer (CLOCK_MONOTONIC_COARSE:
/// a few milliseconds' resolution, a memory read through the vDSO). Every
/// deallocation stamps its block; on these VMs the precise clock cost about
/// 4 % of recording and running tiny ops, and the idle release counts seconds.
struct CoarseSteadyClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<CoarseSteadyClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept;
};

/// How many blocks of one bucket size a stretch of work needed at once
/// (CachingHostAllocator::stopDemandRecord).
struct BlockDemand {
  std::size_t bucket = 0;
  uint32_t count = 0;
  bool operator==(const BlockDemand&) const = default;
};

class CachingHostAllocator final : public Allocator {
 public:
  using Clock = CoarseSteadyClock;
  /// The default of `idleRelease`.
  static constexpr std::chrono::milliseconds kIdleRelease{2000};

  /// `maxCachedBytes`: cached (unused) memory beyond this is freed at once.
  /// `idleRelease`: a cached block not reused for this long is freed.
  explicit CachingHostAllocator(std::size_t maxCachedBytes, std::chrono::milliseconds idleRelease = kIdleRelease);
  ~CachingHostAllocator() override;

  Device device() const override { return Device::cpu(); }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  AllocatorStats stats() const override;
  void emptyCache() override;

  /// The bucket size a request is served from: powers of two up to 1 MiB,
  /// then steps of 1/8 of the next power of two (at most 12.5% waste).
  static std::size_t bucketSize(std::size_t bytes);

  /// Frees the cached blocks last returned before `now` - idleRelease; the
  /// allocator calls it itself every few hundred deallocations. Returns the
  /// bytes freed.
  std::size_t releaseIdle(Clock::time_point now);

  // Warm starts (runtime/exec/WarmStart.h): what a process's start needed
  // is recorded, and the program's next process faults it in ahead.

  /// Starts counting, per bucket size, blocks handed out minus blocks given
  /// back (whenever they were allocated), and the peak of that count.
  void startDemandRecord();
  /// The peaks since startDemandRecord(), largest blocks first: the fresh
  /// blocks the recorded work needs when the cache starts empty. Stops.
  std::vector<BlockDemand> stopDemandRecord();
  /// Puts fresh blocks into the cache, each page written once so that the
  /// system has backed it, until the allocator holds `demand`'s counts
  /// (blocks in use or cached count), within `maxBytes` and the cache's
  /// own limit. Pages are touched outside the lock: other threads allocate
  /// meanwhile. Returns the bytes faulted in.
  std::size_t prefault(std::span<const BlockDemand> demand, std::size_t maxBytes);
  /// Makes the next allocation of `bytes` a cached block whose pages the
  /// system already backs: unless one of its bucket is cached, one is
  /// faulted in (as prefault does) and cached. A kernel that has just been
  /// compiled gets its scratch this way on the compile thread, not in its
  /// first step. Returns the bytes faulted in.
  std::size_t prefaultOne(std::size_t bytes);

 private:
  struct CachedBlock {
    void* ptr;
    Clock::time_point since;  ///< when it was returned
  };
  /// Memory from the system: medium blocks from huge-page slabs, large ones
  /// huge-page aligned, small ones from malloc. systemFree takes the size
  /// the block was allocated with (its bucket size) to find its source.
  void* systemAllocate(std::size_t size);
  void systemFree(void* ptr, std::size_t size);
  /// One fresh block of `bucket` bytes, each page written, into the cache
  /// (within its limit); false when there is no room or memory.
  bool cacheFaultedInBlock(std::size_t bucket);
  void emptyCacheLocked();
  std::size_t releaseIdleLocked(Clock::time_point now);

  mutable std::mutex mutex_;
  /// Per bucket size, oldest first (reuse takes the newest: warm in cache).
  std::unordered_map<std::size_t, std::vector<CachedBlock>> free_;
  std::chrono::milliseconds idleRelease_;
  unsigned deallocationsSinceCheck_ = 0;
  std::size_t maxCachedBytes_;
  std::size_t cachedBytes_ = 0;
  AllocatorStats stats_;
  HugePageSlabs slabs_;
  /// Blocks from the system per bucket size, in use or cached.
  std::unordered_map<std::size_t, uint32_t> blocksHeld_;
  /// Per bucket size while a demand record runs: (now, peak).
  bool recordingDemand_ = false;
  std::unordered_map<std::size_t, std::pair<int64_t, int64_t>> demand_;
};

}  // namespace kiln::hal
