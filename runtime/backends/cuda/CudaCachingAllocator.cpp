#include "runtime/backends/cuda/CudaCachingAllocator.h"

#include <cstdio>

#include "runtime/backends/cuda/CudaStream.h"

namespace kiln::hal::cuda {

namespace {
CUevent asEvent(void* fence) { return static_cast<CUevent>(fence); }
}  // namespace

CudaCachingAllocator::CudaCachingAllocator(CudaDeviceHandle& device, CudaStream& stream)
    : CachingAllocator(device.device), handle_(device), stream_(stream) {}

CudaCachingAllocator::~CudaCachingAllocator() {
  handle_.api->ctxSetCurrent(handle_.context);
  releaseAll();
}

void CudaCachingAllocator::enterDriver() { handle_.makeCurrent(); }

bool CudaCachingAllocator::allocateSegment(std::size_t bytes, uintptr_t* ptr) {
  CUdeviceptr p = 0;
  const CUresult r = handle_.api->memAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
  handle_.check(r, "cuMemAlloc");
  *ptr = static_cast<uintptr_t>(p);
  return true;
}

void CudaCachingAllocator::freeSegment(uintptr_t ptr) { handle_.api->memFree(static_cast<CUdeviceptr>(ptr)); }

CachingAllocator::Fence CudaCachingAllocator::createFence() {
  handle_.api->ctxSetCurrent(handle_.context);
  CUevent e = nullptr;
  if (handle_.api->eventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return nullptr;
  return e;
}

void CudaCachingAllocator::destroyFence(Fence fence) { handle_.api->eventDestroy(asEvent(fence)); }

bool CudaCachingAllocator::recordFence(Fence fence) {
  handle_.api->ctxSetCurrent(handle_.context);
  return handle_.api->eventRecord(asEvent(fence), stream_.handle()) == CUDA_SUCCESS;
}

bool CudaCachingAllocator::fenceDone(Fence fence, bool wait) {
  if (wait) handle_.api->eventSynchronize(asEvent(fence));
  return handle_.api->eventQuery(asEvent(fence)) == CUDA_SUCCESS;
}

bool CudaCachingAllocator::insideHostTask() const { return cuda::insideHostTask(); }

std::string CudaCachingAllocator::memoryInfo() {
  std::size_t freeBytes = 0, totalBytes = 0;
  if (handle_.api->memGetInfo(&freeBytes, &totalBytes) != CUDA_SUCCESS) return {};
  char text[96];
  std::snprintf(text, sizeof text, "%.1f MiB free of %.1f MiB on the device",
                static_cast<double>(freeBytes) / (1 << 20), static_cast<double>(totalBytes) / (1 << 20));
  return text;
}

}  // namespace kiln::hal::cuda
