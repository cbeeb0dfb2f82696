#include "runtime/backends/level_zero/ZeCachingAllocator.h"

#include <cstdio>

#include "runtime/backends/level_zero/ZeStream.h"

namespace kiln::hal::level_zero {

namespace {
ze_event_handle_t asEvent(void* fence) { return static_cast<ze_event_handle_t>(fence); }
}  // namespace

ZeCachingAllocator::ZeCachingAllocator(ZeDeviceHandle& device, ZeStream& stream, uint64_t totalMemory)
    : CachingAllocator(device.device), handle_(device), stream_(stream), totalMemory_(totalMemory) {}

ZeCachingAllocator::~ZeCachingAllocator() { releaseAll(); }

bool ZeCachingAllocator::allocateSegment(std::size_t bytes, uintptr_t* ptr) {
  ze_device_mem_alloc_desc_t desc = {};
  desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
  desc.ordinal = 0;
  void* p = nullptr;
  const ze_result_t r = handle_.api->memAllocDevice(handle_.context, &desc, bytes, 64, handle_.zeDevice, &p);
  if (r == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY || r == ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY) return false;
  handle_.check(r, "zeMemAllocDevice");
  *ptr = reinterpret_cast<uintptr_t>(p);
  return true;
}

void ZeCachingAllocator::freeSegment(uintptr_t ptr) {
  handle_.api->memFree(handle_.context, reinterpret_cast<void*>(ptr));
}

CachingAllocator::Fence ZeCachingAllocator::createFence() { return handle_.acquireEvent(); }

void ZeCachingAllocator::destroyFence(Fence fence) { handle_.releaseEvent(asEvent(fence)); }

bool ZeCachingAllocator::recordFence(Fence fence) { return stream_.signal(asEvent(fence)) == ZE_RESULT_SUCCESS; }

bool ZeCachingAllocator::fenceDone(Fence fence, bool wait) {
  if (wait) handle_.api->eventHostSynchronize(asEvent(fence), UINT64_MAX);
  return handle_.api->eventQueryStatus(asEvent(fence)) == ZE_RESULT_SUCCESS;
}

bool ZeCachingAllocator::insideHostTask() const { return level_zero::insideHostTask(); }

std::string ZeCachingAllocator::memoryInfo() {
  if (totalMemory_ == 0) return {};
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB on the device", static_cast<double>(totalMemory_) / (1 << 20));
  return text;
}

}  // namespace kiln::hal::level_zero
