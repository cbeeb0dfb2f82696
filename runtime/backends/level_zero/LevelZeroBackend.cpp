#include "runtime/backends/level_zero/LevelZeroBackend.h"

#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "runtime/backends/level_zero/ZeApi.h"
#include "runtime/backends/level_zero/ZeCachingAllocator.h"
#include "runtime/backends/level_zero/ZeKernelLoader.h"
#include "runtime/backends/level_zero/ZeOpLibrary.h"
#include "runtime/backends/level_zero/ZeStream.h"

namespace kiln::hal {

namespace {

using level_zero::ZeApi;

/// A device found at discovery: its driver and handle.
struct Found {
  ze_driver_handle_t driver;
  ze_device_handle_t device;
};

class LevelZeroDeviceContext final : public DeviceContext {
 public:
  LevelZeroDeviceContext(const ZeApi& api, const Found& found, int index) {
    handle_.api = &api;
    handle_.device = Device::level_zero(index);
    handle_.driver = found.driver;
    handle_.zeDevice = found.device;
    ze_device_properties_t props = {};
    props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    handle_.check(api.deviceGetProperties(found.device, &props), "zeDeviceGetProperties");
    uint32_t memCount = 1;
    ze_device_memory_properties_t mem = {};
    mem.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    if (api.deviceGetMemoryProperties(found.device, &memCount, &mem) == ZE_RESULT_SUCCESS && memCount > 0)
      totalMemory_ = mem.totalSize;
    ze_context_desc_t cd = {};
    cd.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC;
    handle_.check(api.contextCreate(found.driver, &cd, &handle_.context), "zeContextCreate");
    name_ = std::string(props.name) + " (Level Zero device 0x" + hex(props.deviceId) + ", " +
            std::to_string(totalMemory_ >> 20) + " MiB, loader " + api.path + ")";
    ze_driver_properties_t driverProps = {};
    driverProps.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    const uint32_t driverVersion =
        api.driverGetProperties(found.driver, &driverProps) == ZE_RESULT_SUCCESS ? driverProps.driverVersion : 0;
    // What compiled kernels are cached under: the device and its driver
    // (which turns SPIR-V into the device's code).
    std::string identity = std::string(props.name) + " 0x" + hex(props.deviceId) + " driver " +
                           std::to_string(driverVersion);
    for (char& c : identity)
      if (c == '\n' || c == '\r') c = ' ';
    // Compiled kernels use f16 and f64 where the device has them (many
    // Intel GPUs have no f64: such traces then stay in tier 0).
    ze_device_module_properties_t moduleProps = {};
    moduleProps.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
    std::vector<std::string> capabilities;
    if (api.deviceGetModuleProperties(found.device, &moduleProps) == ZE_RESULT_SUCCESS) {
      if (moduleProps.flags & ZE_DEVICE_MODULE_FLAG_FP16) capabilities.push_back("Float16");
      if (moduleProps.flags & ZE_DEVICE_MODULE_FLAG_FP64) capabilities.push_back("Float64");
    }
    target_ = exec::CompileTarget::spirv(std::move(capabilities), identity);
    stream_ = std::make_unique<level_zero::ZeStream>(handle_);
    allocator_ = std::make_unique<level_zero::ZeCachingAllocator>(handle_, *stream_, totalMemory_);
    ops_ = std::make_unique<level_zero::ZeOpLibrary>(handle_, *stream_);
    loader_ = std::make_unique<level_zero::ZeKernelLoader>(handle_, *stream_, target_.fingerprint());
  }

  Device device() const override { return handle_.device; }
  std::string name() const override { return name_; }
  bool hostAccessible() const override { return false; }
  /// Hot traces compile to SPIR-V for this device (jit/targets/spirv).
  std::optional<exec::CompileTarget> compileTarget() const override { return target_; }
  exec::KernelLoader* kernelLoader() override { return loader_.get(); }
  Allocator& allocator() override { return *allocator_; }
  interp::OpLibrary& ops() override { return *ops_; }
  std::unique_ptr<Stream> createStream() override { return std::make_unique<level_zero::ZeStream>(handle_); }
  Stream& defaultStream() override { return *stream_; }
  void synchronize() override { stream_->synchronize(); }
  DeviceCounters counters() const override {
    DeviceCounters c;
    c.launches = handle_.launches.load();
    c.copy_bytes_to_device = handle_.copyBytesToDevice.load();
    c.copy_bytes_to_host = handle_.copyBytesToHost.load();
    c.copy_bytes_on_device = handle_.copyBytesOnDevice.load();
    return c;
  }

 private:
  static std::string hex(uint32_t v) {
    char text[16];
    std::snprintf(text, sizeof text, "%04x", v);
    return text;
  }

  level_zero::ZeDeviceHandle handle_;
  std::string name_;
  uint64_t totalMemory_ = 0;
  exec::CompileTarget target_;
  std::unique_ptr<level_zero::ZeStream> stream_;
  std::unique_ptr<level_zero::ZeCachingAllocator> allocator_;
  std::unique_ptr<level_zero::ZeOpLibrary> ops_;
  std::unique_ptr<level_zero::ZeKernelLoader> loader_;
};

class LevelZeroDriver final : public Driver {
 public:
  LevelZeroDriver(const ZeApi& api, std::vector<Found> found)
      : api_(api), found_(std::move(found)), devices_(found_.size()) {}
  std::string name() const override { return "level_zero"; }
  Device::Kind kind() const override { return Device::LevelZero; }
  int deviceCount() const override { return static_cast<int>(devices_.size()); }
  /// Devices are opened (context, command list) on first use.
  DeviceContext& device(int index) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& d = devices_[static_cast<size_t>(index)];
    if (!d) d = std::make_unique<LevelZeroDeviceContext>(api_, found_[static_cast<size_t>(index)], index);
    return *d;
  }

 private:
  const ZeApi& api_;
  std::vector<Found> found_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<LevelZeroDeviceContext>> devices_;
};

}  // namespace

std::unique_ptr<Driver> createLevelZeroDriver(std::string* why) {
  const ZeApi* api = level_zero::loadZeApi(why);
  if (!api) return nullptr;
  uint32_t driverCount = 0;
  if (ze_result_t r = api->driverGet(&driverCount, nullptr); r != ZE_RESULT_SUCCESS) {
    *why = "zeDriverGet failed in " + api->path + ": " + ZeApi::describe(r);
    return nullptr;
  }
  std::vector<ze_driver_handle_t> drivers(driverCount);
  if (driverCount > 0) {
    if (ze_result_t r = api->driverGet(&driverCount, drivers.data()); r != ZE_RESULT_SUCCESS) {
      *why = "zeDriverGet failed in " + api->path + ": " + ZeApi::describe(r);
      return nullptr;
    }
    drivers.resize(driverCount);
  }
  // Every device of every driver, in the loader's order: level_zero:0, 1, ...
  std::vector<Found> found;
  for (ze_driver_handle_t d : drivers) {
    uint32_t count = 0;
    if (ze_result_t r = api->deviceGet(d, &count, nullptr); r != ZE_RESULT_SUCCESS) {
      *why = "zeDeviceGet failed in " + api->path + ": " + ZeApi::describe(r);
      return nullptr;
    }
    std::vector<ze_device_handle_t> devices(count);
    if (count > 0 && api->deviceGet(d, &count, devices.data()) != ZE_RESULT_SUCCESS) continue;
    devices.resize(count);
    for (ze_device_handle_t dev : devices) found.push_back({d, dev});
  }
  if (found.empty()) {
    *why = "the Level Zero loader " + api->path + " reports " +
           (driverCount == 0 ? std::string("no driver") : std::string("no device"));
    return nullptr;
  }
  return std::make_unique<LevelZeroDriver>(*api, std::move(found));
}

}  // namespace kiln::hal
