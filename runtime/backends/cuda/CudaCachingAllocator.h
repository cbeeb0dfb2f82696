// CudaCachingAllocator: the stream-ordered caching allocator
// (gpu/CachingAllocator.h) over cuMemAlloc segments and CUevent fences
// recorded on the device's default stream.
#pragma once

#include <cuda.h>

#include "runtime/backends/gpu/CachingAllocator.h"

namespace kiln::hal::cuda {

struct CudaDeviceHandle;
class CudaStream;

class CudaCachingAllocator final : public CachingAllocator {
 public:
  /// Frees are ordered on `stream` (the device's default stream).
  CudaCachingAllocator(CudaDeviceHandle& device, CudaStream& stream);
  ~CudaCachingAllocator() override;

 protected:
  void enterDriver() override;
  bool allocateSegment(std::size_t bytes, uintptr_t* ptr) override;
  void freeSegment(uintptr_t ptr) override;
  Fence createFence() override;
  void destroyFence(Fence fence) override;
  bool recordFence(Fence fence) override;
  bool fenceDone(Fence fence, bool wait) override;
  bool insideHostTask() const override;
  std::string memoryInfo() override;

 private:
  CudaDeviceHandle& handle_;
  CudaStream& stream_;
};

}  // namespace kiln::hal::cuda
