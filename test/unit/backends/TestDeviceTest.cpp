// The test device (KILN_TEST_DEVICES=1, set by ctest): a device whose memory
// the host must not touch and whose work runs asynchronously on its streams.
// These check the device paths themselves; the op, differential and fuzz
// suites run again on it (ctest: *_test_device).
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <chrono>
#include <cmath>
#include <future>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln_c.h"
#include "runtime/backends/Hal.h"
#include "runtime/exec/Engine.h"
#include "test/unit/exec/JitScope.h"
#include "test/unit/trace/ExpectError.h"

namespace kiln {
namespace {

const Device kTest = Device::test(0);

/// Holds the test device's default stream until open() (or destruction):
/// work enqueued meanwhile has demonstrably not run yet.
class StreamGate {
 public:
  StreamGate() {
    std::shared_future<void> f = gate_.get_future().share();
    hal::deviceContext(kTest).defaultStream().hostCall([f] { f.wait(); });
  }
  ~StreamGate() { open(); }
  void open() {
    if (!opened_) gate_.set_value();
    opened_ = true;
  }

 private:
  std::promise<void> gate_;
  bool opened_ = false;
};

TEST(TestDevice, IsRegisteredAndNamed) {
  ASSERT_EQ(device_count(Device::Test), 1) << "ctest runs this with KILN_TEST_DEVICES=1";
  EXPECT_EQ(kTest.str(), "test:0");
  EXPECT_EQ(Device::parse("test:0"), kTest);
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  expectError([] { Device::parse("gpu"); }, {"not a device name", "cpu, cuda, level_zero or test"});
  expectError([] { Device::parse("test:x"); }, {"index"});
  expectError([] { set_default_device(Device::test(5)); }, {"test:5", "1 device"});
  expectError([] { zeros({2}, DType::f32, Device::cuda(0)); }, {"cuda:0", "no driver"});
  EXPECT_FALSE(hal::deviceContext(kTest).hostAccessible());
}

TEST(TestDeviceDeathTest, HostAccessToDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  hal::Allocator& a = hal::deviceContext(kTest).allocator();
  auto* p = static_cast<volatile char*>(a.allocate(4096));
  EXPECT_DEATH({ p[0] = 1; }, "");
  EXPECT_DEATH({ (void)p[100]; }, "");
  // The device's own stream work may use it.
  hal::Stream& s = hal::deviceContext(kTest).defaultStream();
  s.hostCall([p] { p[7] = 42; });
  char back = 0;
  s.copy(&back, const_cast<char*>(p) + 7, 1);
  s.synchronize();
  EXPECT_EQ(back, 42);
  a.deallocate(const_cast<char*>(p), 4096);
}

TEST(TestDevice, OpsRunAsynchronouslyAndReadsWait) {
  JitScope off(JitMode::Off);
  Tensor x = arange(0, 8, 1, DType::f32, kTest);
  std::vector<float> result;
  {
    StreamGate gate;
    Tensor y = (x * 2 + 1).sum();
    kiln::step();
    // Interpreted and materialized, yet nothing ran: the stream is held.
    EXPECT_TRUE(y.is_materialized());
    EXPECT_EQ(y.device(), kTest);
    std::thread opener([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gate.open();
    });
    result = y.to_vector<float>();  // waits for the stream
    opener.join();
  }
  EXPECT_EQ(result, std::vector<float>{64});
}

TEST(TestDevice, FreesAreStreamOrdered) {
  hal::DeviceContext& ctx = hal::deviceContext(kTest);
  hal::Allocator& a = ctx.allocator();
  ctx.synchronize();
  void* first = a.allocate(1 << 16);
  void* second = nullptr;
  {
    StreamGate gate;
    a.deallocate(first, 1 << 16);
    // Work enqueued before the free may still use `first`: not handed out.
    second = a.allocate(1 << 16);
    EXPECT_NE(second, first);
  }
  ctx.synchronize();
  void* third = a.allocate(1 << 16);
  EXPECT_EQ(third, first) << "a block is reused once the work before its free is done";
  a.deallocate(second, 1 << 16);
  a.deallocate(third, 1 << 16);
}

TEST(TestDevice, CopiesKeepLayoutAndRoundTrip) {
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  Tensor host = from_vector(v, {4, 6}, Device::cpu());
  Tensor t = host.transpose().to(kTest);  // a strided view stays one
  EXPECT_EQ(t.device(), kTest);
  EXPECT_FALSE(t.is_contiguous());
  Tensor back = t.to(Device::cpu());
  EXPECT_EQ(back.device(), Device::cpu());
  EXPECT_EQ(back.to_vector<float>(), host.transpose().to_vector<float>());
  // A few rows of a large buffer: only they travel.
  Tensor big = zeros({1000, 100}, DType::f32, Device::cpu());
  Tensor rows = slice(big, 0, 10, 12).to(kTest);
  EXPECT_EQ(rows.shape(), (Shape{2, 100}));
  EXPECT_EQ(rows.to(Device::cpu()).to_vector<float>(), std::vector<float>(200, 0.f));
  // from_vector straight onto the device; reads copy back.
  Tensor d = from_vector(v, {24}, kTest);
  EXPECT_EQ(d.to_vector<float>(), v);
  EXPECT_FLOAT_EQ(d.sum().item<float>(), 138.f);  // 0.5 * (0 + ... + 23)
}

// Gradients flow through copies between devices, each arriving on its
// tensor's device: through a strided view's copy too, and both ways.
TEST(TestDevice, GradientsFlowThroughDeviceCopies) {
  Tensor x = from_vector(std::vector<float>{1, -2, 3, 4, 5, -6}, {2, 3}, Device::cpu());
  x.requires_grad();
  Tensor w = from_vector(std::vector<float>{0.5f, 2, -1}, {3}, kTest);
  w.requires_grad();
  // loss = sum((x^T on the device) * w broadcast) + sum(w back on the host)^2
  Tensor onDevice = x.transpose().to(kTest);  // [3, 2], strided
  Tensor loss = sum(onDevice * reshape(w, {3, 1})).to(Device::cpu()) + square(sum(w.to(Device::cpu())));
  std::vector<Tensor> g = grad(loss, {x, w});
  ASSERT_TRUE(g[0].defined() && g[1].defined());
  EXPECT_EQ(g[0].device(), Device::cpu());
  EXPECT_EQ(g[1].device(), kTest);
  // d/dx[i][j] = w[j]; d/dw[j] = sum_i x[i][j] + 2 * sum(w) (sum(w) = 1.5).
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{0.5f, 2, -1, 0.5f, 2, -1}));
  EXPECT_EQ(g[1].to_vector<float>(), (std::vector<float>{5 + 3, 3 + 3, -3 + 3}));
}

TEST(TestDevice, HostOnlyAccessIsRefused) {
  Tensor t = ones({3}, DType::f32, kTest);
  expectError([&] { t.data(); }, {"test:0", "to(Device::cpu())"});
  Tensor c = ones({3}, DType::f32, Device::cpu());
  expectError([&] { (void)(t + c); }, {"different devices", "test:0", "cpu:0"});
  expectError([&] { matmul(ones({2, 2}, DType::f32, kTest), ones({2, 2})); }, {"different devices"});
  // The C ABI: no host pointer and no DLPack export of device memory, but a
  // copy to the host works.
  kiln_tensor h = nullptr, onDevice = nullptr;
  const float values[3] = {1, 2, 3};
  const int64_t dims[1] = {3};
  ASSERT_EQ(kiln_tensor_from_host(values, sizeof values, KILN_DTYPE_F32, dims, 1, &h), KILN_OK);
  ASSERT_EQ(kiln_tensor_to_device(h, kiln_device{KILN_DEVICE_TEST, 0}, &onDevice), KILN_OK) << kiln_last_error();
  kiln_device where{};
  ASSERT_EQ(kiln_tensor_device(onDevice, &where), KILN_OK);
  EXPECT_EQ(where.kind, KILN_DEVICE_TEST);
  const void* ptr = nullptr;
  EXPECT_EQ(kiln_tensor_data_pointer(onDevice, &ptr), KILN_ERROR_DEVICE);
  DLManagedTensor* dl = nullptr;
  EXPECT_EQ(kiln_tensor_to_dlpack(onDevice, &dl), KILN_ERROR_DEVICE);
  float out[3] = {};
  EXPECT_EQ(kiln_tensor_copy_to_host(onDevice, out, sizeof out, KILN_DTYPE_F32), KILN_OK) << kiln_last_error();
  EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(values, values + 3));
  EXPECT_EQ(kiln_tensor_to_device(onDevice, kiln_device{9, 0}, &h), KILN_ERROR_INVALID_ARGUMENT);
  kiln_tensor_release(onDevice);
  kiln_tensor_release(h);
}

TEST(TestDevice, BadIndexFailsItsNodeOnly) {
  JitScope off(JitMode::Off);
  Tensor x = arange(0, 5, 1, DType::f32, kTest);
  Tensor idx = from_vector<int64_t>({0, 4, 1}, {3}, kTest) * 2;  // pending: 0, 8, 2
  Tensor picked = index_select(x, 0, idx);
  Tensor fine = x + 1;
  expectError([&] { picked.to_vector<float>(); }, {"index_select", "index 8", "extent 5"});
  EXPECT_EQ(fine.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(TestDevice, CompiledKernelsRunOnItsStream) {
  JitScope sync(JitMode::Sync, 1);
  reset_stats();
  Tensor w = from_vector<float>({1, 2, 3, 4}, {2, 2}, kTest);
  Tensor x = from_vector<float>({0.5f, -1, 2, 0}, {2, 2}, kTest);
  std::vector<float> first, compiled;
  for (int i = 0; i < 3; ++i) {
    Tensor y = relu(matmul(x, w) + 1).sum(std::vector<int>{1});
    kiln::step();
    if (i == 0) first = y.to_vector<float>();
    else compiled = y.to_vector<float>();
  }
  EXPECT_GE(stats().compiled_runs, 1u);
  EXPECT_EQ(first, compiled);
  Tensor xc = x.to(Device::cpu()), wc = w.to(Device::cpu());
  EXPECT_EQ(compiled, relu(matmul(xc, wc) + 1).sum(std::vector<int>{1}).to_vector<float>());
}

TEST(TestDevice, DefaultDeviceMovesCreation) {
  const Device saved = default_device();
  set_default_device(kTest);
  EXPECT_EQ(zeros({2}).device(), kTest);
  EXPECT_EQ(from_vector<float>({1, 2}, {2}).device(), kTest);
  EXPECT_EQ(rand({2}, 1).device(), kTest);
  set_default_device(saved);
  EXPECT_EQ(zeros({2}).device(), saved);
}

}  // namespace
}  // namespace kiln
