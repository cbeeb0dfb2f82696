// PinnedStaging: page-locked host blocks (cuMemHostAlloc) that host<->device
// copies pass through. A block handed back with a stream is reused only after
// the stream's work up to that point is done (an event recorded at release).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/device.h"

#include "runtime/backends/cuda/CudaApi.h"

namespace kiln::hal::cuda {

struct CudaDeviceHandle;

class PinnedStaging {
 public:
  /// Largest block; bigger copies are split into chunks of this size.
  static constexpr std::size_t kChunkBytes = std::size_t{4} << 20;

  explicit PinnedStaging(const CudaDeviceHandle& device);
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  struct Block {
    char* data = nullptr;
    std::size_t bytes = 0;
    CUevent event = nullptr;  ///< recorded at release; the block is free once it completes
    bool held = false;        ///< acquired and not yet released
  };
  /// A block of at least `bytes` (<= kChunkBytes), free for the caller.
  Block* acquire(std::size_t bytes);
  /// Returns `block`; it is reused once the work enqueued on `stream` so far is done.
  void release(Block* block, CUstream stream);
  /// Pinned bytes held (in use and cached).
  std::size_t reservedBytes() const;

 private:
  const CudaDeviceHandle& device_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

}  // namespace kiln::hal::cuda
