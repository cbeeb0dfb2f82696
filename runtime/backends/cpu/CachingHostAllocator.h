// CachingHostAllocator: size-bucketed, 64-byte aligned host memory that is
// reused across steps, so a training loop does not page-fault fresh memory
// every iteration.
#pragma once

#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/backends/Allocator.h"

namespace kiln::hal {

class CachingHostAllocator final : public Allocator {
 public:
  /// `maxCachedBytes`: cached (unused) memory beyond this is freed at once.
  explicit CachingHostAllocator(std::size_t maxCachedBytes);
  ~CachingHostAllocator() override;

  Device device() const override { return Device::cpu(); }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  AllocatorStats stats() const override;
  void emptyCache() override;

  /// The bucket size a request is served from: powers of two up to 1 MiB,
  /// then steps of 1/8 of the next power of two (at most 12.5% waste).
  static std::size_t bucketSize(std::size_t bytes);

 private:
  void emptyCacheLocked();

  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t maxCachedBytes_;
  std::size_t cachedBytes_ = 0;
  AllocatorStats stats_;
};

}  // namespace kiln::hal
