// ZeStream and ZeEvent: hal::Stream / hal::Event over Level Zero in-order
// immediate command lists and events of one device. Events come from
// host-visible event pools owned by the device (ZeDeviceHandle). Level Zero
// has no host callbacks: hostCall() signals an event the stream's host
// thread waits for, and makes the command list wait for a second event the
// host thread signals once the function ran.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/device.h"
#include "runtime/backends/Stream.h"
#include "runtime/backends/level_zero/ZeApi.h"

namespace kiln::hal::level_zero {

/// What streams, the allocator and the op library need of their device: the
/// driver table, the handles, an event pool and the device's counters.
struct ZeDeviceHandle {
  const ZeApi* api = nullptr;
  Device device;
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t zeDevice = nullptr;
  ze_context_handle_t context = nullptr;
  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> copyBytesToDevice{0}, copyBytesToHost{0}, copyBytesOnDevice{0};

  ~ZeDeviceHandle();
  /// Throws kiln::Error "<device>: <what> failed: <result>" unless r is ZE_RESULT_SUCCESS.
  void check(ze_result_t r, const char* what) const;
  /// Does `p` point into this context's device memory?
  bool isDevicePointer(const void* p) const;
  /// Builds a module from SPIR-V; throws kiln::Error with the driver's build
  /// log when it refuses (`what` names the module in the message).
  ze_module_handle_t buildSpirvModule(const void* spirv, std::size_t bytes, const std::string& what) const;
  /// A kernel of `module` with a fixed group size; throws like check().
  ze_kernel_handle_t createKernel(ze_module_handle_t module, const std::string& name, uint32_t x, uint32_t y,
                                  uint32_t z) const;
  /// A host-visible event, reset (unsignaled); null when the driver refuses.
  ze_event_handle_t acquireEvent();
  void releaseEvent(ze_event_handle_t e);

 private:
  std::mutex eventMutex_;
  std::vector<ze_event_pool_handle_t> pools_;
  std::vector<ze_event_handle_t> idleEvents_;
};

/// Is the calling thread running a host task of a Level Zero stream? (The
/// allocator defers frees made there.)
bool insideHostTask();

class ZeStream;

/// One recording of a ZeEvent: a pool event that goes back to the pool when
/// neither the ZeEvent nor a stream that waits on it holds it any more.
struct ZeEventSlot {
  ZeEventSlot(ZeDeviceHandle* d, ze_event_handle_t e) : device(d), event(e) {}
  ~ZeEventSlot() { device->releaseEvent(event); }
  ZeEventSlot(const ZeEventSlot&) = delete;
  ZeEventSlot& operator=(const ZeEventSlot&) = delete;
  ZeDeviceHandle* device;
  ze_event_handle_t event;
};

/// Each record() takes a fresh pool event, so a wait appended earlier stays
/// a wait for the record() before it however often the event is recorded
/// again or destroyed (the recording and the waiting streams hold that
/// recording until their next synchronize()).
class ZeEvent final : public Event {
 public:
  explicit ZeEvent(ZeDeviceHandle& device);
  void record(Stream& stream) override;
  bool query() override;
  void synchronize() override;
  /// The latest recording (null: never recorded).
  const std::shared_ptr<ZeEventSlot>& slot() const { return slot_; }

 private:
  ZeDeviceHandle& device_;
  std::shared_ptr<ZeEventSlot> slot_;
};

class ZeStream final : public Stream {
 public:
  explicit ZeStream(ZeDeviceHandle& device);
  ~ZeStream() override;

  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill(void* dst, unsigned char value, std::size_t bytes) override;
  void hostCall(std::function<void()> fn) override;
  void wait(Event& event) override;
  std::unique_ptr<Event> createEvent() override;
  /// Waits for the stream; throws kiln::Error naming the device and the
  /// driver's error when work on it failed, or when a host task failed.
  void synchronize() override;

  /// Appends to the command list (command lists are not thread-safe: every
  /// append goes through here); throws kiln::Error naming `what` on failure.
  void append(const std::function<ze_result_t(ze_command_list_handle_t)>& fn, const std::string& what);
  /// Marks the current end of the stream with `event` (reset first).
  ze_result_t signal(ze_event_handle_t event);
  /// Keeps a recording alive until the stream's next synchronize() (the
  /// list has passed every signal of and wait on it by then).
  void hold(std::shared_ptr<ZeEventSlot> slot);
  ZeDeviceHandle& device() { return device_; }

 private:
  struct HostTask {
    ze_event_handle_t ready;  ///< signaled by the command list: earlier work is done
    ze_event_handle_t done;   ///< signaled by the host thread: the command list may go on
    std::function<void()> fn;
  };
  void serveHostTasks();

  ZeDeviceHandle& device_;
  ze_command_list_handle_t list_ = nullptr;
  std::mutex appendMutex_;
  std::mutex mutex_;  ///< the host-task queue, retired events and the error
  std::condition_variable cv_;
  std::deque<HostTask> tasks_;
  std::vector<ze_event_handle_t> retired_;  ///< reusable once the list passed a later point
  std::vector<std::shared_ptr<ZeEventSlot>> held_;  ///< recordings signaled or waited on since the last synchronize
  bool stopping_ = false;
  std::thread hostThread_;
  std::string hostError_;  ///< the first failed host task since the last synchronize()
};

}  // namespace kiln::hal::level_zero
