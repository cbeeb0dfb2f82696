#include "runtime/backends/cuda/CudaStream.h"

#include <algorithm>
#include <cstring>

#include "kiln/error.h"
#include "runtime/backends/cuda/PinnedStaging.h"

namespace kiln::hal::cuda {

namespace {
thread_local bool tInsideHostTask = false;
}  // namespace

bool insideHostTask() { return tInsideHostTask; }

void CudaDeviceHandle::makeCurrent() const {
  // Always set: another library in the process (a framework handing us
  // tensors) may have made its own context current on this thread.
  check(api->ctxSetCurrent(context), "cuCtxSetCurrent");
}

void CudaDeviceHandle::check(CUresult r, const char* what) const {
  if (r != CUDA_SUCCESS) throw Error(device.str() + ": " + what + " failed: " + api->describe(r));
}

bool CudaDeviceHandle::isDevicePointer(const void* p) const {
  unsigned int type = 0;
  const CUresult r = api->pointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)));
  return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE;
}

// ---------------------------------------------------------------------------

CudaEvent::CudaEvent(const CudaDeviceHandle& device) : device_(device) {
  device_.makeCurrent();
  device_.check(device_.api->eventCreate(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
}

CudaEvent::~CudaEvent() {
  if (!event_) return;
  device_.api->ctxSetCurrent(device_.context);
  device_.api->eventDestroy(event_);
}

void CudaEvent::record(Stream& stream) {
  auto* s = dynamic_cast<CudaStream*>(&stream);
  if (!s) throw Error(device_.device.str() + ": a CUDA event can only be recorded on a stream of a CUDA device");
  device_.makeCurrent();
  device_.check(device_.api->eventRecord(event_, s->handle()), "cuEventRecord");
}

bool CudaEvent::query() {
  device_.makeCurrent();
  const CUresult r = device_.api->eventQuery(event_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  device_.check(r, "cuEventQuery");
  return true;
}

void CudaEvent::synchronize() {
  device_.makeCurrent();
  device_.check(device_.api->eventSynchronize(event_), "cuEventSynchronize (waiting for an event)");
}

// ---------------------------------------------------------------------------

struct CudaStream::HostTask {
  CudaStream* stream;
  std::function<void()> fn;
};

CudaStream::CudaStream(CudaDeviceHandle& device) : device_(device) {
  device_.makeCurrent();
  device_.check(device_.api->streamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

CudaStream::~CudaStream() {
  if (!stream_) return;
  // Work still queued (host tasks point at this object) finishes first.
  device_.api->ctxSetCurrent(device_.context);
  device_.api->streamSynchronize(stream_);
  device_.api->streamDestroy(stream_);
}

void CUDA_CB CudaStream::runHostTask(void* data) {
  std::unique_ptr<HostTask> task(static_cast<HostTask*>(data));
  std::string failure;
  tInsideHostTask = true;
  try {
    task->fn();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  // What the task captured is released before the stream moves on (before
  // synchronize() returns).
  task->fn = nullptr;
  tInsideHostTask = false;
  if (!failure.empty()) {
    std::lock_guard<std::mutex> lock(task->stream->mutex_);
    if (task->stream->hostError_.empty()) task->stream->hostError_ = failure;
  }
}

void CudaStream::hostCall(std::function<void()> fn) {
  device_.makeCurrent();
  auto task = std::make_unique<HostTask>(HostTask{this, std::move(fn)});
  device_.check(device_.api->launchHostFunc(stream_, &CudaStream::runHostTask, task.get()), "cuLaunchHostFunc");
  task.release();  // runHostTask owns it now
}

void CudaStream::copyToDevice(CUdeviceptr dst, const char* src, std::size_t bytes) {
  PinnedStaging& staging = *device_.staging;
  for (std::size_t off = 0; off < bytes; off += PinnedStaging::kChunkBytes) {
    const std::size_t n = std::min(PinnedStaging::kChunkBytes, bytes - off);
    PinnedStaging::Block* block = staging.acquire(n);
    std::memcpy(block->data, src + off, n);  // the caller's buffer is free once copy() returns
    const CUresult r = device_.api->memcpyHtoDAsync(dst + off, block->data, n, stream_);
    staging.release(block, stream_);
    device_.check(r, "cuMemcpyHtoDAsync (copy to the device)");
  }
  device_.copyBytesToDevice += bytes;
}

void CudaStream::copyToHost(char* dst, CUdeviceptr src, std::size_t bytes) {
  PinnedStaging& staging = *device_.staging;
  for (std::size_t off = 0; off < bytes; off += PinnedStaging::kChunkBytes) {
    const std::size_t n = std::min(PinnedStaging::kChunkBytes, bytes - off);
    PinnedStaging::Block* block = staging.acquire(n);
    CUresult r = device_.api->memcpyDtoHAsync(block->data, src + off, n, stream_);
    if (r == CUDA_SUCCESS) {
      char* out = dst + off;
      const char* in = block->data;
      auto task = std::make_unique<HostTask>(HostTask{this, [out, in, n] { std::memcpy(out, in, n); }});
      r = device_.api->launchHostFunc(stream_, &CudaStream::runHostTask, task.get());
      if (r == CUDA_SUCCESS) task.release();
    }
    staging.release(block, stream_);
    device_.check(r, "cuMemcpyDtoHAsync (copy to the host)");
  }
  device_.copyBytesToHost += bytes;
}

void CudaStream::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  device_.makeCurrent();
  const bool toDevice = device_.isDevicePointer(dst), fromDevice = device_.isDevicePointer(src);
  const auto dptr = [](const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); };
  if (toDevice && fromDevice) {
    device_.check(device_.api->memcpyDtoDAsync(dptr(dst), dptr(src), bytes, stream_), "cuMemcpyDtoDAsync");
    device_.copyBytesOnDevice += bytes;
  } else if (toDevice) {
    copyToDevice(dptr(dst), static_cast<const char*>(src), bytes);
  } else if (fromDevice) {
    copyToHost(static_cast<char*>(dst), dptr(src), bytes);
  } else {
    hostCall([dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
}

void CudaStream::fill(void* dst, unsigned char value, std::size_t bytes) {
  if (bytes == 0) return;
  device_.makeCurrent();
  if (!device_.isDevicePointer(dst)) {
    hostCall([dst, value, bytes] { std::memset(dst, value, bytes); });
    return;
  }
  device_.check(device_.api->memsetD8Async(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst)), value, bytes,
                                           stream_),
                "cuMemsetD8Async");
}

void CudaStream::wait(Event& event) {
  if (auto* ours = dynamic_cast<CudaEvent*>(&event)) {
    device_.makeCurrent();
    device_.check(device_.api->streamWaitEvent(stream_, ours->handle(), 0), "cuStreamWaitEvent");
    return;
  }
  // Another device's event: the stream blocks in a host task until it completes.
  Event* e = &event;
  hostCall([e] { e->synchronize(); });
}

std::unique_ptr<Event> CudaStream::createEvent() { return std::make_unique<CudaEvent>(device_); }

void CudaStream::synchronize() {
  device_.makeCurrent();
  const CUresult r = device_.api->streamSynchronize(stream_);
  if (r != CUDA_SUCCESS)
    throw Error(device_.device.str() + ": work on a CUDA stream failed: " + device_.api->describe(r) +
                " (results computed before it are intact; later work on this device may fail too)");
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error.swap(hostError_);
  }
  if (!error.empty()) throw Error(device_.device.str() + ": a task on a device stream failed: " + error);
}

}  // namespace kiln::hal::cuda
