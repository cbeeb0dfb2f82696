// CudaStream and CudaEvent: hal::Stream / hal::Event over CUstream and
// CUevent of one device's primary context. Host<->device copies go through
// pinned staging (PinnedStaging), so the caller's host buffer may be pageable
// and a copy into the device returns before the device has read it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "kiln/device.h"
#include "runtime/backends/Stream.h"
#include "runtime/backends/cuda/CudaApi.h"

namespace kiln::hal::cuda {

class PinnedStaging;

/// What a stream needs of its device: the driver table, the context, the
/// staging pool and the device's counters.
struct CudaDeviceHandle {
  const CudaApi* api = nullptr;
  Device device;
  CUdevice cuDevice = 0;
  CUcontext context = nullptr;
  PinnedStaging* staging = nullptr;
  std::atomic<uint64_t> launches{0};
  /// Compiled traces' CUDA graphs: built, launched, and launches that first
  /// updated some kernel's parameters (the trace's buffers had moved).
  std::atomic<uint64_t> graphsBuilt{0}, graphLaunches{0}, graphUpdates{0};
  std::atomic<uint64_t> copyBytesToDevice{0}, copyBytesToHost{0}, copyBytesOnDevice{0};

  /// Makes the primary context current on the calling thread (cached per thread).
  void makeCurrent() const;
  /// api->check with "<device>: <what>" as the context of the message.
  void check(CUresult r, const char* what) const;
  /// Does `p` point into this process's CUDA device memory?
  bool isDevicePointer(const void* p) const;
};

/// Is the calling thread running a host task of a CUDA stream? (The driver
/// must not be called there: frees are deferred.)
bool insideHostTask();

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(const CudaDeviceHandle& device);
  ~CudaEvent() override;
  void record(Stream& stream) override;
  bool query() override;
  void synchronize() override;
  CUevent handle() const { return event_; }

 private:
  const CudaDeviceHandle& device_;
  CUevent event_ = nullptr;
};

class CudaStream final : public Stream {
 public:
  explicit CudaStream(CudaDeviceHandle& device);
  ~CudaStream() override;

  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill(void* dst, unsigned char value, std::size_t bytes) override;
  void hostCall(std::function<void()> fn) override;
  void wait(Event& event) override;
  std::unique_ptr<Event> createEvent() override;
  /// Waits for the stream; throws kiln::Error naming the device and the
  /// driver's error when work on it failed, or when a host task failed.
  void synchronize() override;

  CUstream handle() const { return stream_; }
  void* nativeHandle() override { return stream_; }
  CudaDeviceHandle& device() { return device_; }

 private:
  struct HostTask;
  static void CUDA_CB runHostTask(void* task);
  void copyToDevice(CUdeviceptr dst, const char* src, std::size_t bytes);
  void copyToHost(char* dst, CUdeviceptr src, std::size_t bytes);

  CudaDeviceHandle& device_;
  CUstream stream_ = nullptr;
  std::mutex mutex_;
  std::string hostError_;  ///< the first failed host task since the last synchronize()
};

}  // namespace kiln::hal::cuda
