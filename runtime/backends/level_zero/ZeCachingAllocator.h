// ZeCachingAllocator: the stream-ordered caching allocator
// (gpu/CachingAllocator.h) over zeMemAllocDevice segments (USM device
// memory) and events signaled on the device's default command list.
#pragma once

#include "runtime/backends/gpu/CachingAllocator.h"

namespace kiln::hal::level_zero {

struct ZeDeviceHandle;
class ZeStream;

class ZeCachingAllocator final : public CachingAllocator {
 public:
  /// Frees are ordered on `stream` (the device's default stream).
  ZeCachingAllocator(ZeDeviceHandle& device, ZeStream& stream, uint64_t totalMemory);
  ~ZeCachingAllocator() override;

 protected:
  bool allocateSegment(std::size_t bytes, uintptr_t* ptr) override;
  void freeSegment(uintptr_t ptr) override;
  Fence createFence() override;
  void destroyFence(Fence fence) override;
  bool recordFence(Fence fence) override;
  bool fenceDone(Fence fence, bool wait) override;
  bool insideHostTask() const override;
  std::string memoryInfo() override;

 private:
  ZeDeviceHandle& handle_;
  ZeStream& stream_;
  uint64_t totalMemory_;
};

}  // namespace kiln::hal::level_zero
