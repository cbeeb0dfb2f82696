#include "runtime/backends/test/TestBackend.h"

#include <mutex>
#include <vector>

#include "runtime/backends/WorkerStream.h"
#include "runtime/backends/test/DeviceArena.h"
#include "runtime/exec/Executable.h"
#include "runtime/interp/OpLibrary.h"

namespace kiln::hal {

namespace {

/// Address space reserved per test device (nothing is committed up front).
constexpr std::size_t kReserveBytes = std::size_t{64} << 30;

/// Hands out arena blocks; a free goes back to the arena only after the work
/// enqueued on the default stream before it (stream-ordered, as on a GPU).
class TestAllocator final : public Allocator {
 public:
  TestAllocator(Device device, DeviceArena& arena, Stream& stream) : device_(device), arena_(arena), stream_(stream) {}
  Device device() const override { return device_; }
  void* allocate(std::size_t bytes) override { return arena_.allocate(bytes); }
  void deallocate(void* ptr, std::size_t bytes) override {
    if (!ptr) return;
    DeviceArena* arena = &arena_;
    stream_.hostCall([arena, ptr, bytes] { arena->release(ptr, bytes); });
  }
  AllocatorStats stats() const override { return arena_.stats(); }
  void emptyCache() override {
    stream_.synchronize();  // frees still queued become cached blocks first
    arena_.emptyCache();
  }

 private:
  Device device_;
  DeviceArena& arena_;
  Stream& stream_;
};

class TestDeviceContext final : public DeviceContext {
 public:
  explicit TestDeviceContext(int index)
      : device_(Device::test(index)),
        arena_(device_, kReserveBytes),
        stream_(&arena_),
        allocator_(device_, arena_, stream_),
        ops_([this](std::function<void()> task) { stream_.hostCall(std::move(task)); }) {}

  Device device() const override { return device_; }
  std::string name() const override {
    return "Kiln test device " + std::to_string(device_.index) + " (CPU-backed, memory not host-accessible)";
  }
  bool hostAccessible() const override { return false; }
  std::optional<exec::CompileTarget> compileTarget() const override { return exec::CompileTarget::hostCpu(); }
  exec::KernelLoader* kernelLoader() override { return exec::loadKernelLoader(); }
  Allocator& allocator() override { return allocator_; }
  interp::OpLibrary& ops() override { return ops_; }
  std::unique_ptr<Stream> createStream() override { return std::make_unique<WorkerStream>(&arena_); }
  Stream& defaultStream() override { return stream_; }
  void synchronize() override { stream_.synchronize(); }

 private:
  using Enqueue = std::function<void(std::function<void()>)>;
  Device device_;
  DeviceArena arena_;
  WorkerStream stream_;
  TestAllocator allocator_;
  interp::HostKernelLibrary<Enqueue> ops_;
};

class TestDriver final : public Driver {
 public:
  explicit TestDriver(int count) {
    for (int i = 0; i < count; ++i) devices_.push_back(std::make_unique<TestDeviceContext>(i));
  }
  std::string name() const override { return "test"; }
  Device::Kind kind() const override { return Device::Test; }
  int deviceCount() const override { return static_cast<int>(devices_.size()); }
  DeviceContext& device(int index) override { return *devices_[static_cast<size_t>(index)]; }

 private:
  std::vector<std::unique_ptr<TestDeviceContext>> devices_;
};

}  // namespace

std::unique_ptr<Driver> createTestDriver(int count) { return std::make_unique<TestDriver>(count); }

}  // namespace kiln::hal
