#include "runtime/backends/cuda/CudaBackend.h"

#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "runtime/backends/cuda/CudaApi.h"
#include "runtime/backends/cuda/CudaCachingAllocator.h"
#include "runtime/backends/cuda/CudaKernelLoader.h"
#include "runtime/backends/cuda/CudaOpLibrary.h"
#include "runtime/backends/cuda/CudaStream.h"
#include "runtime/backends/cuda/PinnedStaging.h"

namespace kiln::hal {

namespace {

using cuda::CudaApi;

class CudaDeviceContext final : public DeviceContext {
 public:
  CudaDeviceContext(const CudaApi& api, int index) {
    handle_.api = &api;
    handle_.device = Device::cuda(index);
    handle_.check(api.deviceGet(&handle_.cuDevice, index), "cuDeviceGet");
    handle_.check(api.devicePrimaryCtxRetain(&handle_.context, handle_.cuDevice), "cuDevicePrimaryCtxRetain");
    handle_.makeCurrent();
    char name[256] = {};
    handle_.check(api.deviceGetName(name, sizeof name - 1, handle_.cuDevice), "cuDeviceGetName");
    int major = 0, minor = 0;
    handle_.check(api.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle_.cuDevice),
                  "cuDeviceGetAttribute");
    handle_.check(api.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle_.cuDevice),
                  "cuDeviceGetAttribute");
    handle_.check(api.deviceTotalMem(&totalMemory_, handle_.cuDevice), "cuDeviceTotalMem");
    smVersion_ = major * 10 + minor;
    name_ = std::string(name) + " (sm_" + std::to_string(smVersion_) + ", " +
            std::to_string(totalMemory_ >> 20) + " MiB, driver " + api.path + ")";
    staging_ = std::make_unique<cuda::PinnedStaging>(handle_);
    handle_.staging = staging_.get();
    stream_ = std::make_unique<cuda::CudaStream>(handle_);
    allocator_ = std::make_unique<cuda::CudaCachingAllocator>(handle_, *stream_);
    ops_ = std::make_unique<cuda::CudaOpLibrary>(handle_, *stream_, smVersion_);
    // PTX for the device's SM; the driver JIT-compiles it, so any driver
    // that runs the GPU loads it (the driver version is not in the key).
    target_ = exec::CompileTarget::nvptx(smVersion_, cuda::ptxVersionFor(smVersion_));
    loader_ = std::make_unique<cuda::CudaKernelLoader>(handle_, *stream_, target_.fingerprint());
  }

  Device device() const override { return handle_.device; }
  std::string name() const override { return name_; }
  bool hostAccessible() const override { return false; }
  /// Hot traces compile to PTX for this device's SM (jit/targets/nvptx).
  std::optional<exec::CompileTarget> compileTarget() const override { return target_; }
  exec::KernelLoader* kernelLoader() override { return loader_.get(); }
  Allocator& allocator() override { return *allocator_; }
  interp::OpLibrary& ops() override { return *ops_; }
  std::unique_ptr<Stream> createStream() override { return std::make_unique<cuda::CudaStream>(handle_); }
  Stream& defaultStream() override { return *stream_; }
  void synchronize() override { stream_->synchronize(); }
  DeviceCounters counters() const override {
    DeviceCounters c;
    c.launches = handle_.launches.load();
    c.graph_launches = handle_.graphLaunches.load();
    c.graphs_built = handle_.graphsBuilt.load();
    c.graph_updates = handle_.graphUpdates.load();
    c.copy_bytes_to_device = handle_.copyBytesToDevice.load();
    c.copy_bytes_to_host = handle_.copyBytesToHost.load();
    c.copy_bytes_on_device = handle_.copyBytesOnDevice.load();
    return c;
  }

 private:
  cuda::CudaDeviceHandle handle_;
  std::string name_;
  std::size_t totalMemory_ = 0;
  int smVersion_ = 0;
  std::unique_ptr<cuda::PinnedStaging> staging_;
  std::unique_ptr<cuda::CudaStream> stream_;
  std::unique_ptr<cuda::CudaCachingAllocator> allocator_;
  std::unique_ptr<cuda::CudaOpLibrary> ops_;
  exec::CompileTarget target_;
  std::unique_ptr<cuda::CudaKernelLoader> loader_;
};

class CudaDriver final : public Driver {
 public:
  CudaDriver(const CudaApi& api, int count) : api_(api), devices_(static_cast<size_t>(count)) {}
  std::string name() const override { return "cuda"; }
  Device::Kind kind() const override { return Device::CUDA; }
  int deviceCount() const override { return static_cast<int>(devices_.size()); }
  /// Devices are opened (primary context, streams) on first use.
  DeviceContext& device(int index) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& d = devices_[static_cast<size_t>(index)];
    if (!d) d = std::make_unique<CudaDeviceContext>(api_, index);
    return *d;
  }

 private:
  const CudaApi& api_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<CudaDeviceContext>> devices_;
};

}  // namespace

std::unique_ptr<Driver> createCudaDriver(std::string* why) {
  const CudaApi* api = cuda::loadCudaApi(why);
  if (!api) return nullptr;
  int count = 0;
  if (CUresult r = api->deviceGetCount(&count); r != CUDA_SUCCESS) {
    *why = "cuDeviceGetCount failed in " + api->path + ": " + api->describe(r);
    return nullptr;
  }
  if (count == 0) {
    *why = "the CUDA driver " + api->path + " reports no device";
    return nullptr;
  }
  return std::make_unique<CudaDriver>(*api, count);
}

}  // namespace kiln::hal
