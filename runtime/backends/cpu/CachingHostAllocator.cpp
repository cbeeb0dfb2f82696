#include "runtime/backends/cpu/CachingHostAllocator.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kiln/error.h"

namespace kiln::hal {

namespace {
constexpr std::size_t kAlignment = 64;
/// Blocks this large are aligned to and backed by transparent huge pages
/// (where the kernel allows them on request): a fresh 8 MB buffer then takes
/// 4 page faults instead of 2,048, which is most of a first step's extra
/// time, and the GEMM's packed panels miss the TLB less.
constexpr std::size_t kHugePage = HugePageSlabs::kChunkBytes;

/// Deallocations between two looks at the clock for idle blocks.
constexpr unsigned kIdleCheckInterval = 256;
}  // namespace

CoarseSteadyClock::time_point CoarseSteadyClock::now() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return time_point(duration(static_cast<rep>(ts.tv_sec) * 1000000000 + ts.tv_nsec));
}

void* CachingHostAllocator::systemAllocate(std::size_t size) {
  void* p = HugePageSlabs::serves(size) ? slabs_.allocate(size)
            : size < kHugePage          ? std::aligned_alloc(kAlignment, size)
                                        : allocateHugePageBlock(size);
  if (p) ++blocksHeld_[size];
  return p;
}

void CachingHostAllocator::systemFree(void* ptr, std::size_t size) {
  if (auto it = blocksHeld_.find(size); it != blocksHeld_.end() && --it->second == 0) blocksHeld_.erase(it);
  if (HugePageSlabs::serves(size))
    slabs_.release(ptr);
  else
    std::free(ptr);
}

CachingHostAllocator::CachingHostAllocator(std::size_t maxCachedBytes, std::chrono::milliseconds idleRelease)
    : idleRelease_(idleRelease), maxCachedBytes_(maxCachedBytes) {}

CachingHostAllocator::~CachingHostAllocator() { emptyCache(); }

std::size_t CachingHostAllocator::bucketSize(std::size_t bytes) {
  if (bytes <= kAlignment) return kAlignment;
  std::size_t p = std::size_t{1} << (64 - __builtin_clzll(bytes - 1));  // next power of two
  if (p <= (std::size_t{1} << 20)) return p;
  std::size_t step = p / 8;
  return (bytes + step - 1) / step * step;
}

void* CachingHostAllocator::allocate(std::size_t bytes) {
  // No machine has this much; rounding it to a bucket would overflow.
  if (bytes > static_cast<std::size_t>(INT64_MAX))
    throw Error("allocate: out of host memory for " + std::to_string(bytes) +
                " bytes (more than the address space); reduce tensor sizes");
  std::size_t size = bucketSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (recordingDemand_) {
    auto& [now, peak] = demand_[size];
    peak = std::max(peak, ++now);
  }
  ++stats_.allocations;
  stats_.bytes_requested += bytes;
  void* p = nullptr;
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back().ptr;
    it->second.pop_back();
    cachedBytes_ -= size;
    ++stats_.cache_hits;
  } else {
    p = systemAllocate(size);
    if (!p && cachedBytes_ > 0) {
      // Out of memory: give the cache back to the system and retry once.
      ++stats_.retries;
      emptyCacheLocked();
      p = systemAllocate(size);
    }
    if (!p)
      throw Error("allocate: out of host memory for " + std::to_string(bytes) +
                  " bytes; reduce batch or tensor sizes, or call kiln::empty_cache()");
    ++stats_.system_allocs;
    stats_.bytes_reserved += size;
  }
  stats_.bytes_active += size;
  if (stats_.bytes_active > stats_.bytes_peak_active) stats_.bytes_peak_active = stats_.bytes_active;
  return p;
}

void CachingHostAllocator::deallocate(void* ptr, std::size_t bytes) {
  if (!ptr) return;
  std::size_t size = bucketSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (recordingDemand_) --demand_[size].first;
  stats_.bytes_active -= size;
  if (cachedBytes_ + size > maxCachedBytes_) {
    systemFree(ptr, size);
    stats_.bytes_reserved -= size;
    return;
  }
  const Clock::time_point now = Clock::now();
  free_[size].push_back({ptr, now});
  cachedBytes_ += size;
  if (++deallocationsSinceCheck_ >= kIdleCheckInterval) {
    deallocationsSinceCheck_ = 0;
    releaseIdleLocked(now);
  }
}

std::size_t CachingHostAllocator::releaseIdle(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  return releaseIdleLocked(now);
}

std::size_t CachingHostAllocator::releaseIdleLocked(Clock::time_point now) {
  const Clock::time_point cutoff = now - idleRelease_;
  std::size_t freed = 0;
  for (auto it = free_.begin(); it != free_.end();) {
    std::vector<CachedBlock>& list = it->second;
    std::size_t idle = 0;
    while (idle < list.size() && list[idle].since < cutoff) systemFree(list[idle++].ptr, it->first);
    list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(idle));
    freed += idle * it->first;
    // A size that is gone leaves no empty bucket behind.
    it = list.empty() ? free_.erase(it) : std::next(it);
  }
  cachedBytes_ -= freed;
  stats_.bytes_reserved -= freed;
  return freed;
}

void CachingHostAllocator::startDemandRecord() {
  std::lock_guard<std::mutex> lock(mutex_);
  recordingDemand_ = true;
  demand_.clear();
}

std::vector<BlockDemand> CachingHostAllocator::stopDemandRecord() {
  std::lock_guard<std::mutex> lock(mutex_);
  recordingDemand_ = false;
  std::vector<BlockDemand> out;
  for (const auto& [size, counts] : demand_)
    if (counts.second > 0) out.push_back({size, static_cast<uint32_t>(std::min<int64_t>(counts.second, UINT32_MAX))});
  demand_.clear();
  std::sort(out.begin(), out.end(), [](const BlockDemand& a, const BlockDemand& b) { return a.bucket > b.bucket; });
  return out;
}

std::size_t CachingHostAllocator::prefault(std::span<const BlockDemand> demand, std::size_t maxBytes) {
  std::size_t faulted = 0;
  for (const BlockDemand& d : demand) {
    // Only sizes this allocator would hand out (a record is data from disk).
    if (d.bucket == 0 || bucketSize(d.bucket) != d.bucket) continue;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        // Blocks held already, in use or cached, count towards the demand.
        if (auto it = blocksHeld_.find(d.bucket); it != blocksHeld_.end() && it->second >= d.count) break;
        if (faulted + d.bucket > maxBytes) return faulted;
      }
      if (!cacheFaultedInBlock(d.bucket)) return faulted;
      faulted += d.bucket;
    }
  }
  return faulted;
}

std::size_t CachingHostAllocator::prefaultOne(std::size_t bytes) {
  const std::size_t bucket = bucketSize(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = free_.find(bucket); it != free_.end() && !it->second.empty()) return 0;
  }
  return cacheFaultedInBlock(bucket) ? bucket : 0;
}

bool CachingHostAllocator::cacheFaultedInBlock(std::size_t bucket) {
  static const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cachedBytes_ + bucket > maxCachedBytes_) return false;
    p = systemAllocate(bucket);
    if (!p) return false;
    ++stats_.system_allocs;
    stats_.bytes_reserved += bucket;
  }
  // The system backs a page when it is first written: here, not in the
  // step. Written before it is cached, while no other thread can have it.
  for (std::size_t off = 0; off < bucket; off += kPage) static_cast<volatile char*>(p)[off] = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  free_[bucket].push_back({p, Clock::now()});
  cachedBytes_ += bucket;
  return true;
}

AllocatorStats CachingHostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingHostAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  emptyCacheLocked();
}

void CachingHostAllocator::emptyCacheLocked() {
  for (auto& [size, list] : free_) {
    for (const CachedBlock& b : list) systemFree(b.ptr, size);
    stats_.bytes_reserved -= size * list.size();
  }
  free_.clear();
  cachedBytes_ = 0;
}

}  // namespace kiln::hal
