// hal::Allocator: device memory for one device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/device.h"

namespace kiln::hal {

struct AllocatorStats {
  uint64_t allocations = 0;   ///< allocate() calls
  uint64_t cache_hits = 0;    ///< served from the cache without a system call
  uint64_t system_allocs = 0; ///< fresh memory from the system/driver
  uint64_t retries = 0;       ///< out-of-memory retries after emptying the cache
  uint64_t bytes_requested = 0;
  uint64_t bytes_active = 0;   ///< handed out and not yet returned (rounded sizes)
  uint64_t bytes_reserved = 0; ///< active + cached
  uint64_t bytes_peak_active = 0;
};

/// Allocates device memory. Implementations are thread-safe. Memory is
/// aligned to at least 64 bytes. allocate() throws kiln::Error when the
/// device is out of memory even after emptying caches.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  /// `bytes` must be the value passed to allocate().
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  /// Returns cached, unused memory to the system.
  virtual void emptyCache() = 0;
};

}  // namespace kiln::hal
