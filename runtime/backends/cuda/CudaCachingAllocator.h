// CudaCachingAllocator: stream-ordered caching allocator for one CUDA device.
// Memory comes from cuMemAlloc in segments; blocks are carved out of them in
// two size-class pools (small: <= 1 MiB from 2 MiB segments; large: from
// segments of 20 MiB, or the request rounded up to 2 MiB), split on
// allocation and merged with free neighbours when they come back. A freed
// block is reusable only after the work enqueued on the device's stream
// before the free (an event is recorded at deallocate()). On out-of-memory it
// waits for pending frees, returns its cached segments to the driver and
// retries once; then throws kiln::Error with the requested, active and
// reserved sizes.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "runtime/backends/Allocator.h"

namespace kiln::hal::cuda {

struct CudaDeviceHandle;
class CudaStream;

class CudaCachingAllocator final : public Allocator {
 public:
  static constexpr std::size_t kRound = 512;                     ///< block sizes are multiples of this
  static constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  ///< small pool: blocks up to 1 MiB
  static constexpr std::size_t kSmallSegment = std::size_t{2} << 20;
  static constexpr std::size_t kLargeSegment = std::size_t{20} << 20;

  /// Frees are ordered on `stream` (the device's default stream).
  CudaCachingAllocator(CudaDeviceHandle& device, CudaStream& stream);
  ~CudaCachingAllocator() override;

  Device device() const override;
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  AllocatorStats stats() const override;
  /// Waits for pending frees and returns every segment with no block in use.
  void emptyCache() override;

  /// Segments held from the driver (for tests: split/merge and emptyCache).
  std::size_t segmentCount() const;

 private:
  struct Segment;
  struct Block {
    CUdeviceptr ptr = 0;
    std::size_t size = 0;
    Segment* segment = nullptr;
    Block* prev = nullptr;  ///< neighbours inside the segment
    Block* next = nullptr;
    bool allocated = false;
    CUevent pending = nullptr;  ///< freed, waiting for this event
  };
  struct Segment {
    CUdeviceptr ptr = 0;
    std::size_t size = 0;
    bool small = false;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using FreeSet = std::set<Block*, BySize>;

  FreeSet& poolFor(bool small) { return small ? smallFree_ : largeFree_; }
  Block* takeFreeLocked(std::size_t size, bool small);
  Block* newSegmentLocked(std::size_t size, bool small, std::size_t requested);
  void splitLocked(Block* b, std::size_t size, bool small);
  void releaseToPoolLocked(Block* b);
  void freeLocked(Block* b);
  /// Pending frees whose event completed (all, waiting, when `wait`) become free blocks.
  void processPendingLocked(bool wait);
  void drainDeferredLocked();
  void releaseSegmentsLocked();

  CudaDeviceHandle& device_;
  CudaStream& stream_;
  mutable std::mutex mutex_;
  FreeSet smallFree_, largeFree_;
  std::unordered_map<CUdeviceptr, Block*> active_;
  std::vector<Block*> pending_;
  std::mutex deferredMutex_;  ///< host tasks take only this one (they must not wait on mutex_)
  std::vector<CUdeviceptr> deferred_;  ///< freed inside a stream's host task, recorded later
  std::vector<CUevent> events_;   ///< idle events for pending frees
  std::vector<Segment*> segments_;
  AllocatorStats stats_;
};

}  // namespace kiln::hal::cuda
