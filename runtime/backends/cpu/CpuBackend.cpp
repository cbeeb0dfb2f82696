#include "runtime/backends/cpu/CpuBackend.h"

#include <atomic>
#include <fstream>
#include <mutex>

#include "runtime/backends/WorkerStream.h"
#include "runtime/backends/cpu/CachingHostAllocator.h"
#include "runtime/exec/Executable.h"
#include "runtime/interp/OpLibrary.h"

namespace kiln::hal {

namespace {

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "host CPU";
}

class CpuDeviceContext final : public DeviceContext {
 public:
  CpuDeviceContext() : allocator_(std::size_t{4} << 30) {}
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return cpuModelName(); }
  bool hostAccessible() const override { return true; }
  std::optional<exec::CompileTarget> compileTarget() const override { return exec::CompileTarget::hostCpu(); }
  exec::KernelLoader* kernelLoader() override { return exec::loadKernelLoader(); }
  Allocator& allocator() override { return allocator_; }
  interp::OpLibrary& ops() override { return interp::hostOpLibrary(); }
  std::unique_ptr<Stream> createStream() override { return std::make_unique<WorkerStream>(); }
  Stream& defaultStream() override {
    std::call_once(streamOnce_, [this] {
      stream_ = std::make_unique<WorkerStream>();
      hasStream_.store(true, std::memory_order_release);
    });
    return *stream_;
  }
  // The runtime's work on the CPU runs in the calling thread: only user
  // streams can hold work. (sync() calls this from any thread, maybe while
  // another creates the default stream: the flag, not stream_, is read.)
  void synchronize() override {
    if (hasStream_.load(std::memory_order_acquire)) stream_->synchronize();
  }

 private:
  CachingHostAllocator allocator_;
  std::once_flag streamOnce_;
  std::unique_ptr<WorkerStream> stream_;
  std::atomic<bool> hasStream_{false};
};

class CpuDriver final : public Driver {
 public:
  std::string name() const override { return "cpu"; }
  Device::Kind kind() const override { return Device::CPU; }
  int deviceCount() const override { return 1; }
  DeviceContext& device(int) override { return device_; }

 private:
  CpuDeviceContext device_;
};

}  // namespace

std::unique_ptr<Driver> createCpuDriver() { return std::make_unique<CpuDriver>(); }

}  // namespace kiln::hal
