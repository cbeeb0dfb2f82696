#include "runtime/backends/cuda/PinnedStaging.h"

#include <bit>

#include "kiln/error.h"
#include "runtime/backends/cuda/CudaStream.h"

namespace kiln::hal::cuda {

namespace {
/// Blocks kept at most; past this the host waits for one to come free.
constexpr std::size_t kMaxBlocks = 16;
constexpr std::size_t kMinBlockBytes = std::size_t{64} << 10;
}  // namespace

PinnedStaging::PinnedStaging(const CudaDeviceHandle& device) : device_(device) {}

PinnedStaging::~PinnedStaging() {
  device_.makeCurrent();
  for (auto& b : blocks_) {
    device_.api->eventSynchronize(b->event);
    device_.api->eventDestroy(b->event);
    device_.api->memFreeHost(b->data);
  }
}

PinnedStaging::Block* PinnedStaging::acquire(std::size_t bytes) {
  const std::size_t size = std::max(kMinBlockBytes, std::bit_ceil(bytes));
  std::lock_guard<std::mutex> lock(mutex_);
  const CudaApi& api = *device_.api;
  device_.makeCurrent();
  for (auto& b : blocks_) {
    if (b->held || b->bytes < size) continue;
    if (api.eventQuery(b->event) != CUDA_SUCCESS) continue;
    b->held = true;
    return b.get();
  }
  if (blocks_.size() >= kMaxBlocks) {
    // Full: wait for the oldest idle block and replace it by one of this size.
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      Block& b = **it;
      if (b.held) continue;
      device_.check(api.eventSynchronize(b.event), "waiting for a pinned staging block");
      device_.check(api.eventDestroy(b.event), "cuEventDestroy");
      device_.check(api.memFreeHost(b.data), "cuMemFreeHost");
      blocks_.erase(it);
      break;
    }
  }
  auto block = std::make_unique<Block>();
  void* p = nullptr;
  device_.check(api.memHostAlloc(&p, size, 0), "cuMemHostAlloc (pinned staging for a host copy)");
  block->data = static_cast<char*>(p);
  block->bytes = size;
  device_.check(api.eventCreate(&block->event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  block->held = true;
  blocks_.push_back(std::move(block));
  return blocks_.back().get();
}

void PinnedStaging::release(Block* block, CUstream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_.makeCurrent();
  const CUresult r = device_.api->eventRecord(block->event, stream);
  if (r != CUDA_SUCCESS) device_.api->streamSynchronize(stream);  // cannot mark it: wait instead
  block->held = false;
}

std::size_t PinnedStaging::reservedBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (auto& b : blocks_) n += b->bytes;
  return n;
}

}  // namespace kiln::hal::cuda
