// CachingAllocator: the stream-ordered caching allocator shared by the GPU
// backends (CUDA, Level Zero). Memory comes from the driver in segments;
// blocks are carved out of them in two size-class pools (small: <= 1 MiB
// from 2 MiB segments; large: from segments of 20 MiB, or the request
// rounded up to 2 MiB), split on allocation and merged with free neighbours
// when they come back. A freed block is reusable only after the work
// enqueued on the device's stream before the free (a fence, the backend's
// event, is recorded at deallocate()). On out-of-memory it waits for
// pending frees, returns its cached segments to the driver and retries
// once; then throws kiln::Error with the requested, active and reserved
// sizes. A backend supplies the driver calls (segments and fences).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/backends/Allocator.h"

namespace kiln::hal {

class CachingAllocator : public Allocator {
 public:
  static constexpr std::size_t kRound = 512;                        ///< block sizes are multiples of this
  static constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  ///< small pool: blocks up to 1 MiB
  static constexpr std::size_t kSmallSegment = std::size_t{2} << 20;
  static constexpr std::size_t kLargeSegment = std::size_t{20} << 20;

  Device device() const override { return device_; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  AllocatorStats stats() const override;
  /// Waits for pending frees and returns every segment with no block in use.
  void emptyCache() override;
  /// Segments held from the driver (for tests: split/merge and emptyCache).
  std::size_t segmentCount() const;

 protected:
  /// A backend's marker in its stream (an event).
  using Fence = void*;

  explicit CachingAllocator(Device device) : device_(device) {}
  /// Returns every segment and fence to the driver; a backend's destructor
  /// calls it (devices live for the whole process: this runs only for a
  /// device torn down early, after its stream finished).
  void releaseAll();

  /// Makes the device's context current where the driver needs one (may throw).
  virtual void enterDriver() {}
  /// Fresh device memory of `bytes`; false when the device is out of
  /// memory; throws kiln::Error on any other failure.
  virtual bool allocateSegment(std::size_t bytes, uintptr_t* ptr) = 0;
  virtual void freeSegment(uintptr_t ptr) = 0;
  /// A new fence, or null when the driver cannot make one. Never throws.
  virtual Fence createFence() = 0;
  virtual void destroyFence(Fence fence) = 0;
  /// Marks the current end of the device's default stream; false when the
  /// stream cannot be marked (the device failed). Never throws.
  virtual bool recordFence(Fence fence) = 0;
  /// Has the work before the fence completed (waiting first when `wait`)?
  /// A failed device answers true for `wait` only after it stopped.
  virtual bool fenceDone(Fence fence, bool wait) = 0;
  /// Is the calling thread running a host task of one of the device's
  /// streams (where the driver must not be called: frees are deferred)?
  virtual bool insideHostTask() const = 0;
  /// "<free> free of <total> on the device", for the out-of-memory message
  /// ("" when the driver does not tell).
  virtual std::string memoryInfo() = 0;

 private:
  struct Segment;
  struct Block {
    uintptr_t ptr = 0;
    std::size_t size = 0;
    Segment* segment = nullptr;
    Block* prev = nullptr;  ///< neighbours inside the segment
    Block* next = nullptr;
    bool allocated = false;
    Fence pending = nullptr;  ///< freed, waiting for this fence
  };
  struct Segment {
    uintptr_t ptr = 0;
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
  /// Pending frees whose fence completed (all, waiting, when `wait`) become free blocks.
  void processPendingLocked(bool wait);
  void drainDeferredLocked();
  void releaseSegmentsLocked();

  Device device_;
  mutable std::mutex mutex_;
  FreeSet smallFree_, largeFree_;
  std::unordered_map<uintptr_t, Block*> active_;
  std::vector<Block*> pending_;
  std::mutex deferredMutex_;        ///< host tasks take only this one (they must not wait on mutex_)
  std::vector<uintptr_t> deferred_;  ///< freed inside a stream's host task, recorded later
  std::vector<Fence> fences_;       ///< idle fences for pending frees
  std::vector<Segment*> segments_;
  AllocatorStats stats_;
};

}  // namespace kiln::hal
