#include "runtime/backends/level_zero/ZeStream.h"

#include <cstdlib>
#include <cstring>

#include "kiln/error.h"

namespace kiln::hal::level_zero {

namespace {
thread_local bool tInsideHostTask = false;
constexpr uint32_t kEventsPerPool = 64;
constexpr uint64_t kForever = UINT64_MAX;
}  // namespace

bool insideHostTask() { return tInsideHostTask; }

ZeDeviceHandle::~ZeDeviceHandle() {
  for (ze_event_handle_t e : idleEvents_) api->eventDestroy(e);
  for (ze_event_pool_handle_t p : pools_) api->eventPoolDestroy(p);
}

void ZeDeviceHandle::check(ze_result_t r, const char* what) const {
  if (r != ZE_RESULT_SUCCESS) throw Error(device.str() + ": " + what + " failed: " + ZeApi::describe(r));
}

ze_module_handle_t ZeDeviceHandle::buildSpirvModule(const void* spirv, std::size_t bytes,
                                                    const std::string& what) const {
  ze_module_desc_t desc = {};
  desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
  desc.format = ZE_MODULE_FORMAT_IL_SPIRV;
  desc.inputSize = bytes;
  desc.pInputModule = static_cast<const uint8_t*>(spirv);
  desc.pBuildFlags = "";
  ze_module_handle_t module = nullptr;
  ze_module_build_log_handle_t log = nullptr;
  const ze_result_t r = api->moduleCreate(context, zeDevice, &desc, &module, &log);
  std::string logText;
  if (log) {
    std::size_t size = 0;
    if (api->moduleBuildLogGetString(log, &size, nullptr) == ZE_RESULT_SUCCESS && size > 1) {
      logText.resize(size);
      api->moduleBuildLogGetString(log, &size, logText.data());
      logText.resize(std::strlen(logText.c_str()));
    }
    api->moduleBuildLogDestroy(log);
  }
  if (r != ZE_RESULT_SUCCESS)
    throw Error(device.str() + ": zeModuleCreate (" + what + ") failed: " + ZeApi::describe(r) +
                (logText.empty() ? std::string() : "; build log: " + logText));
  return module;
}

ze_kernel_handle_t ZeDeviceHandle::createKernel(ze_module_handle_t module, const std::string& name, uint32_t x,
                                                uint32_t y, uint32_t z) const {
  ze_kernel_desc_t kd = {};
  kd.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC;
  kd.pKernelName = name.c_str();
  ze_kernel_handle_t kernel = nullptr;
  check(api->kernelCreate(module, &kd, &kernel), ("zeKernelCreate (" + name + ")").c_str());
  if (ze_result_t r = api->kernelSetGroupSize(kernel, x, y, z); r != ZE_RESULT_SUCCESS) {
    api->kernelDestroy(kernel);
    check(r, ("zeKernelSetGroupSize (" + name + ")").c_str());
  }
  return kernel;
}

bool ZeDeviceHandle::isDevicePointer(const void* p) const {
  ze_memory_allocation_properties_t props = {};
  props.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
  ze_device_handle_t owner = nullptr;
  if (api->memGetAllocProperties(context, p, &props, &owner) != ZE_RESULT_SUCCESS) return false;
  return props.type == ZE_MEMORY_TYPE_DEVICE;
}

ze_event_handle_t ZeDeviceHandle::acquireEvent() {
  std::lock_guard<std::mutex> lock(eventMutex_);
  if (idleEvents_.empty()) {
    ze_event_pool_desc_t desc = {};
    desc.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC;
    desc.flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE;
    desc.count = kEventsPerPool;
    ze_event_pool_handle_t pool = nullptr;
    ze_device_handle_t devices[] = {zeDevice};
    if (api->eventPoolCreate(context, &desc, 1, devices, &pool) != ZE_RESULT_SUCCESS) return nullptr;
    pools_.push_back(pool);
    for (uint32_t i = 0; i < kEventsPerPool; ++i) {
      ze_event_desc_t ed = {};
      ed.stype = ZE_STRUCTURE_TYPE_EVENT_DESC;
      ed.index = i;
      ed.signal = ZE_EVENT_SCOPE_FLAG_HOST;
      ed.wait = ZE_EVENT_SCOPE_FLAG_HOST;
      ze_event_handle_t e = nullptr;
      if (api->eventCreate(pool, &ed, &e) != ZE_RESULT_SUCCESS) break;
      idleEvents_.push_back(e);
    }
    if (idleEvents_.empty()) return nullptr;
  }
  ze_event_handle_t e = idleEvents_.back();
  idleEvents_.pop_back();
  api->eventHostReset(e);
  return e;
}

void ZeDeviceHandle::releaseEvent(ze_event_handle_t e) {
  if (!e) return;
  std::lock_guard<std::mutex> lock(eventMutex_);
  idleEvents_.push_back(e);
}

// ---------------------------------------------------------------------------

ZeEvent::ZeEvent(ZeDeviceHandle& device) : device_(device) {}

void ZeEvent::record(Stream& stream) {
  auto* s = dynamic_cast<ZeStream*>(&stream);
  if (!s) throw Error(device_.device.str() + ": a Level Zero event can only be recorded on a Level Zero stream");
  ze_event_handle_t e = device_.acquireEvent();
  if (!e) throw Error(device_.device.str() + ": zeEventCreate failed (no event could be made)");
  auto slot = std::make_shared<ZeEventSlot>(&device_, e);
  s->hold(slot);
  device_.check(s->signal(e), "zeCommandListAppendSignalEvent");
  slot_ = std::move(slot);
}

bool ZeEvent::query() {
  if (!slot_) return true;
  const ze_result_t r = device_.api->eventQueryStatus(slot_->event);
  if (r == ZE_RESULT_NOT_READY) return false;
  device_.check(r, "zeEventQueryStatus");
  return true;
}

void ZeEvent::synchronize() {
  if (!slot_) return;
  device_.check(device_.api->eventHostSynchronize(slot_->event, kForever),
                "zeEventHostSynchronize (waiting for an event)");
}

// ---------------------------------------------------------------------------

ZeStream::ZeStream(ZeDeviceHandle& device) : device_(device) {
  ze_command_queue_desc_t desc = {};
  desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
  desc.ordinal = 0;
  desc.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  desc.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
  device_.check(device_.api->commandListCreateImmediate(device_.context, device_.zeDevice, &desc, &list_),
                "zeCommandListCreateImmediate");
}

ZeStream::~ZeStream() {
  try {
    synchronize();
  } catch (...) {
    // a failed stream is torn down all the same
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (hostThread_.joinable()) hostThread_.join();
  if (list_) device_.api->commandListDestroy(list_);
  for (ze_event_handle_t e : retired_) device_.releaseEvent(e);
}

void ZeStream::append(const std::function<ze_result_t(ze_command_list_handle_t)>& fn, const std::string& what) {
  ze_result_t r;
  {
    std::lock_guard<std::mutex> lock(appendMutex_);
    r = fn(list_);
  }
  device_.check(r, what.c_str());
}

void ZeStream::hold(std::shared_ptr<ZeEventSlot> slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  held_.push_back(std::move(slot));
}

ze_result_t ZeStream::signal(ze_event_handle_t event) {
  device_.api->eventHostReset(event);
  std::lock_guard<std::mutex> lock(appendMutex_);
  return device_.api->commandListAppendSignalEvent(list_, event);
}

void ZeStream::serveHostTasks() {
  for (;;) {
    HostTask task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::string failure;
    const ze_result_t r = device_.api->eventHostSynchronize(task.ready, kForever);
    if (r != ZE_RESULT_SUCCESS) {
      failure = "the stream failed before a host task: " + ZeApi::describe(r);
    } else {
      tInsideHostTask = true;
      try {
        task.fn();
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "unknown exception";
      }
      tInsideHostTask = false;
    }
    task.fn = nullptr;  // what the task captured is released before the stream moves on
    device_.api->eventHostSignal(task.done);
    std::lock_guard<std::mutex> lock(mutex_);
    retired_.push_back(task.ready);
    retired_.push_back(task.done);
    if (!failure.empty() && hostError_.empty()) hostError_ = failure;
  }
}

void ZeStream::hostCall(std::function<void()> fn) {
  ze_event_handle_t ready = device_.acquireEvent(), done = device_.acquireEvent();
  if (!ready || !done) {
    device_.releaseEvent(ready);
    device_.releaseEvent(done);
    throw Error(device_.device.str() + ": zeEventCreate failed (no event for a host task)");
  }
  {
    std::lock_guard<std::mutex> lock(appendMutex_);
    ze_result_t r = device_.api->commandListAppendSignalEvent(list_, ready);
    if (r == ZE_RESULT_SUCCESS) r = device_.api->commandListAppendWaitOnEvents(list_, 1, &done);
    if (r != ZE_RESULT_SUCCESS) {
      // The list may wait on `done` already: signal it so it never blocks.
      device_.api->eventHostSignal(done);
      device_.check(r, "zeCommandListAppendSignalEvent (a host task)");
    }
    std::lock_guard<std::mutex> queueLock(mutex_);
    tasks_.push_back(HostTask{ready, done, std::move(fn)});
    if (!hostThread_.joinable()) hostThread_ = std::thread([this] { serveHostTasks(); });
  }
  cv_.notify_one();
}

void ZeStream::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const bool toDevice = device_.isDevicePointer(dst), fromDevice = device_.isDevicePointer(src);
  if (!toDevice && !fromDevice) {
    hostCall([dst, src, bytes] { std::memmove(dst, src, bytes); });
    return;
  }
  const void* from = src;
  char* staged = nullptr;
  if (!fromDevice) {
    // The caller's buffer is free once copy() returns: the device reads a copy.
    staged = static_cast<char*>(std::malloc(bytes));
    if (!staged) throw Error(device_.device.str() + ": out of host memory staging a copy of " +
                             std::to_string(bytes) + " bytes");
    std::memcpy(staged, src, bytes);
    from = staged;
  }
  try {
    append([&](ze_command_list_handle_t l) {
      return device_.api->commandListAppendMemoryCopy(l, dst, from, bytes, nullptr, 0, nullptr);
    }, "zeCommandListAppendMemoryCopy");
  } catch (...) {
    std::free(staged);
    throw;
  }
  if (staged) hostCall([staged] { std::free(staged); });
  if (toDevice && fromDevice) device_.copyBytesOnDevice += bytes;
  else if (toDevice) device_.copyBytesToDevice += bytes;
  else device_.copyBytesToHost += bytes;
}

void ZeStream::fill(void* dst, unsigned char value, std::size_t bytes) {
  if (bytes == 0) return;
  if (!device_.isDevicePointer(dst)) {
    hostCall([dst, value, bytes] { std::memset(dst, value, bytes); });
    return;
  }
  append([&](ze_command_list_handle_t l) {
    return device_.api->commandListAppendMemoryFill(l, dst, &value, 1, bytes, nullptr, 0, nullptr);
  }, "zeCommandListAppendMemoryFill");
}

void ZeStream::wait(Event& event) {
  if (auto* ours = dynamic_cast<ZeEvent*>(&event)) {
    std::shared_ptr<ZeEventSlot> slot = ours->slot();
    if (!slot) return;  // never recorded: complete
    ze_event_handle_t e = slot->event;
    append([&](ze_command_list_handle_t l) { return device_.api->commandListAppendWaitOnEvents(l, 1, &e); },
           "zeCommandListAppendWaitOnEvents");
    hold(std::move(slot));
    return;
  }
  // Another device's event: the stream blocks in a host task until it completes.
  Event* e = &event;
  hostCall([e] { e->synchronize(); });
}

std::unique_ptr<Event> ZeStream::createEvent() { return std::make_unique<ZeEvent>(device_); }

void ZeStream::synchronize() {
  ze_event_handle_t e = device_.acquireEvent();
  if (!e) throw Error(device_.device.str() + ": zeEventCreate failed (synchronizing a stream)");
  std::vector<ze_event_handle_t> retired;
  std::vector<std::shared_ptr<ZeEventSlot>> waitedOn;
  {
    // Host tasks retired and events waited on so far: the list passed every
    // wait on them once e completes.
    std::lock_guard<std::mutex> lock(mutex_);
    retired.swap(retired_);
    waitedOn.swap(held_);
  }
  ze_result_t r = signal(e);
  if (r == ZE_RESULT_SUCCESS) r = device_.api->eventHostSynchronize(e, kForever);
  device_.releaseEvent(e);
  for (ze_event_handle_t old : retired) device_.releaseEvent(old);
  waitedOn.clear();
  if (r != ZE_RESULT_SUCCESS)
    throw Error(device_.device.str() + ": work on a Level Zero command list failed: " + ZeApi::describe(r) +
                " (results computed before it are intact; later work on this device may fail too)");
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error.swap(hostError_);
  }
  if (!error.empty()) throw Error(device_.device.str() + ": a task on a device stream failed: " + error);
}

}  // namespace kiln::hal::level_zero
