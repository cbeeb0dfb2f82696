// The CUDA backend on the fake CUDA driver (test/cuda_driver, loaded through
// KILN_CUDA_LIBRARY by ctest): devices, memory, streams, tensors, the tier-0
// op library and injected failures. The fake runs the host reference kernel
// for each tier-0 launch (see FakeCuda.cpp), so results equal the CPU's
// exactly: these tests check the backend (kernel choice, parameters, strides,
// streams, memory, errors), not the PTX, which ptxas checks
// (kiln_cuda_kernel_tests). CudaNoDriver runs in its own process with a
// driver path that does not exist. On a real driver (scripts/gpu-check.sh)
// the tests that need the fake's hooks skip, and float results are compared
// with tolerances instead of exactly.
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln_c.h"
#include "runtime/backends/Hal.h"
#include "runtime/backends/cuda/CudaCachingAllocator.h"
#include "runtime/exec/Executable.h"
#include "test/cuda_driver/FakeNccl.h"
#include "test/unit/exec/JitScope.h"
#include "test/unit/trace/ExpectError.h"

namespace kiln {
namespace {

const Device kCuda = Device::cuda(0);

/// A hook of the fake driver (test/cuda_driver/FakeCuda.h).
template <class F>
F* fakeHook(const char* name) {
  const char* path = std::getenv("KILN_CUDA_LIBRARY");
  void* handle = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  void* symbol = handle ? dlsym(handle, name) : nullptr;
  if (!symbol) throw std::runtime_error(std::string("fake CUDA driver hook missing: ") + name);
  return reinterpret_cast<F*>(symbol);
}
/// Is the driver the fake one (its test hooks are there)?
bool onFakeDriver() {
  const char* path = std::getenv("KILN_CUDA_LIBRARY");
  void* handle = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return handle && dlsym(handle, "kiln_fake_cuda_inject");
}
#define REQUIRE_FAKE_DRIVER() \
  if (!onFakeDriver()) GTEST_SKIP() << "needs the fake CUDA driver's test hooks"
int inject(const char* kind, int skip, int times) { return fakeHook<int(const char*, int, int)>("kiln_fake_cuda_inject")(kind, skip, times); }
void resetFaults() { fakeHook<void()>("kiln_fake_cuda_reset_faults")(); }
size_t calls(const char* name) { return fakeHook<size_t(const char*)>("kiln_fake_cuda_calls")(name); }
size_t rejectedLaunches() { return fakeHook<size_t()>("kiln_fake_cuda_rejected_launches")(); }
size_t compiledLaunches() { return fakeHook<size_t()>("kiln_fake_cuda_compiled_launches")(); }
size_t fakeGraphLaunches() { return fakeHook<size_t()>("kiln_fake_cuda_graph_launches")(); }

/// The fake cuBLASLt (test/cuda_driver/FakeCublasLt.cpp), when Kiln loaded it.
void* fakeCublasLtHook() {
  const char* path = std::getenv("KILN_CUBLASLT_LIBRARY");
  void* handle = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return handle ? dlsym(handle, "kiln_fake_cublaslt_matmuls") : nullptr;
}
bool fakeCublasLtLoaded() { return fakeCublasLtHook() != nullptr; }
size_t fakeCublasLtMatmuls() {
  void* hook = fakeCublasLtHook();
  return hook ? reinterpret_cast<size_t (*)()>(hook)() : 0;
}
/// Does Kiln use the fake cuBLASLt here (it loads it at the first matmul)?
bool cublasLtConfigured() {
  const char* off = std::getenv("KILN_CUBLASLT");
  return std::getenv("KILN_CUBLASLT_LIBRARY") && !(off && std::string(off) == "0");
}
/// Matmuls the fake cuBLASLt ran with a bias epilogue, and with a relu one.
size_t fakeCublasLtCounter(const char* name) {
  const char* path = std::getenv("KILN_CUBLASLT_LIBRARY");
  void* handle = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  void* hook = handle ? dlsym(handle, name) : nullptr;
  return hook ? reinterpret_cast<size_t (*)()>(hook)() : 0;
}
size_t fakeBiasMatmuls() { return fakeCublasLtCounter("kiln_fake_cublaslt_bias_matmuls"); }
size_t fakeReluMatmuls() { return fakeCublasLtCounter("kiln_fake_cublaslt_relu_matmuls"); }
/// Does the fake cuBLASLt's relu keep NaN (kiln_cuda_tests_relu_epilogue)?
bool fakeReluKeepsNaN() {
  const char* relu = std::getenv("KILN_FAKE_CUBLASLT_RELU");
  return relu && std::string(relu) == "keep-nan";
}

/// Holds the device's default stream until open(): work enqueued meanwhile
/// has demonstrably not run.
class StreamGate {
 public:
  StreamGate() {
    std::shared_future<void> f = gate_.get_future().share();
    hal::deviceContext(kCuda).defaultStream().hostCall([f] { f.wait(); });
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

std::vector<float> ramp(size_t n, float start = -3.0f, float step = 0.37f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(device_count(Device::CUDA), 1) << "ctest runs this with KILN_CUDA_LIBRARY=libkiln_fake_cuda.so";
    if (onFakeDriver()) {
      ASSERT_EQ(device_count(Device::CUDA), 1);
    }
  }
  JitScope jit_{JitMode::Off};  // tier 0 only (CudaCompiled and the tier-1 tests compile)
};

TEST_F(CudaTest, DeviceIsTheFakeDriversAndNamed) {
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  if (onFakeDriver()) {
    EXPECT_NE(ctx.name().find("fake CUDA device 0"), std::string::npos) << ctx.name();
    EXPECT_NE(ctx.name().find("sm_90"), std::string::npos) << ctx.name();
  }
  EXPECT_FALSE(ctx.hostAccessible());
  // Hot traces compile to PTX for the device's SM.
  ASSERT_TRUE(ctx.compileTarget().has_value());
  EXPECT_EQ(ctx.compileTarget()->kind, exec::CompileTarget::Kind::Nvptx);
  if (onFakeDriver()) {
    EXPECT_EQ(ctx.compileTarget()->str(), "nvptx sm_90 ptx80");
  }
  ASSERT_NE(ctx.kernelLoader(), nullptr);
  EXPECT_EQ(ctx.kernelLoader()->fingerprint(), ctx.compileTarget()->fingerprint());
  if (onFakeDriver()) expectError([] { hal::deviceContext(Device::cuda(1)); }, {"cuda:1", "1 device"});
}

using CudaDeathTest = CudaTest;
TEST_F(CudaDeathTest, HostAccessToDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  hal::Allocator& a = hal::deviceContext(kCuda).allocator();
  auto* p = static_cast<volatile char*>(a.allocate(4096));
  EXPECT_DEATH({ p[0] = 1; }, "");
  hal::Stream& s = hal::deviceContext(kCuda).defaultStream();
  s.fill(const_cast<char*>(p), 7, 4096);
  char back[4] = {};
  s.copy(back, const_cast<char*>(p) + 100, 4);
  s.synchronize();
  EXPECT_EQ(back[3], 7);
  a.deallocate(const_cast<char*>(p), 4096);
}

TEST_F(CudaTest, FreedBlockIsReusedOnlyAfterTheStreamWorkBeforeTheFree) {
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  hal::Allocator& a = ctx.allocator();
  ctx.synchronize();
  void* first = nullptr;
  {
    StreamGate gate;  // work before the free has not run
    first = a.allocate(1000);
    a.deallocate(first, 1000);
    void* second = a.allocate(1000);
    EXPECT_NE(second, first) << "a block was handed out again while stream work before its free was pending";
    a.deallocate(second, 1000);
  }
  ctx.synchronize();
  void* third = a.allocate(1000);
  EXPECT_TRUE(third == first || a.stats().cache_hits > 0);
  a.deallocate(third, 1000);
}

TEST_F(CudaTest, BlocksSplitAndMergeInsideSegmentsAndEmptyCacheReturnsThem) {
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  auto& a = dynamic_cast<hal::cuda::CudaCachingAllocator&>(ctx.allocator());
  a.emptyCache();
  ASSERT_EQ(a.segmentCount(), 0u) << "a test before this one left device memory in use";
  std::vector<void*> quarter;
  for (int i = 0; i < 4; ++i) quarter.push_back(a.allocate(256 << 10));
  EXPECT_EQ(a.segmentCount(), 1u) << "four 256 KiB blocks are split out of one 2 MiB segment";
  for (void* p : quarter) a.deallocate(p, 256 << 10);
  ctx.synchronize();
  const uint64_t systemBefore = a.stats().system_allocs;
  void* whole = a.allocate(1 << 20);  // needs the four merged back together
  EXPECT_EQ(a.stats().system_allocs, systemBefore) << "freed neighbours were not merged";
  EXPECT_EQ(a.segmentCount(), 1u);
  void* large = a.allocate(24 << 20);  // the large pool: a segment of its own
  EXPECT_EQ(a.segmentCount(), 2u);
  a.deallocate(whole, 1 << 20);
  a.deallocate(large, 24 << 20);
  a.emptyCache();
  EXPECT_EQ(a.segmentCount(), 0u);
  EXPECT_EQ(a.stats().bytes_reserved, 0u);
}

TEST_F(CudaTest, OutOfMemoryEmptiesTheCacheRetriesOnceThenSaysWhatItNeeded) {
  REQUIRE_FAKE_DRIVER();
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  hal::Allocator& a = ctx.allocator();
  const uint64_t retries = a.stats().retries;
  ASSERT_EQ(inject("oom", 0, 1), 0);
  void* p = a.allocate(32 << 20);  // the first cuMemAlloc fails, the retry succeeds
  EXPECT_EQ(a.stats().retries, retries + 1);
  a.deallocate(p, 32 << 20);
  ASSERT_EQ(inject("oom", 0, 2), 0);
  expectError([&] { a.allocate(40 << 20); },
              {"cuda:0", "out of memory allocating 41943040 bytes", "active", "reserved", "empty_cache"});
  resetFaults();
  // More than the fake device has (1 GiB).
  expectError([&] { a.allocate(std::size_t{3} << 30); }, {"cuda:0", "out of memory", "free of 1024.0 MiB"});
}

TEST_F(CudaTest, TensorsRoundTripThroughPinnedStaging) {
  const auto before = device_stats(kCuda);
  const size_t n = (5u << 20) / 4 + 3;  // more than one 4 MiB staging chunk
  std::vector<float> v = ramp(n);
  Tensor d = from_vector(v, {static_cast<int64_t>(n)}).to(kCuda);
  EXPECT_EQ(d.device(), kCuda);
  Tensor back = d.to(Device::cpu());
  EXPECT_EQ(back.to_vector<float>(), v);
  const auto after = device_stats(kCuda);
  EXPECT_GE(after.copy_bytes_to_device - before.copy_bytes_to_device, n * 4);
  EXPECT_GE(after.copy_bytes_to_host - before.copy_bytes_to_host, n * 4);
  EXPECT_GT(stats().device_copy_bytes, 0u);
  if (onFakeDriver()) {
    EXPECT_GT(calls("cuMemHostAlloc"), 0u) << "host copies go through pinned staging";
  }
  expectError([&] { d.data(); }, {"cuda:0", "to(Device::cpu())"});
}

TEST_F(CudaTest, ElementwiseOpsMatchTheCpu) {
  const std::vector<float> v = ramp(1000, -2.5f, 0.0071f);
  Tensor xc = from_vector(v, {10, 100});
  Tensor xg = xc.to(kCuda);
  const auto before = device_stats(kCuda).kernel_launches;
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"add", [](const Tensor& x) { return add(x, x); }},
      {"mul scalar", [](const Tensor& x) { return mul(x, 3.0); }},
      {"maximum", [](const Tensor& x) { return maximum(x, 0.25); }},
      {"where", [](const Tensor& x) { return where(lt(x, 0.0), x, neg(x)); }},
      {"cast i32", [](const Tensor& x) { return cast(mul(x, 10.0), DType::i32); }},
      {"f16 relu", [](const Tensor& x) { return relu(cast(x, DType::f16)); }},
      {"bf16 square", [](const Tensor& x) { return square(cast(x, DType::bf16)); }},
      {"i64 remainder", [](const Tensor& x) { return remainder(cast(mul(x, 100.0), DType::i64), 7); }},
  };
  for (auto& [name, op] : ops) {
    Tensor want = op(xc), got = op(xg);
    EXPECT_EQ(got.device(), kCuda) << name;
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    const std::vector<double> g = got.to(Device::cpu()).to_vector<double>(), w = want.to_vector<double>();
    if (onFakeDriver()) {
      EXPECT_EQ(g, w) << name;  // the fake runs the same reference kernels
      continue;
    }
    // A GPU's libdevice differs from the host's libm by a few ULP; half
    // types round that to their own precision.
    const bool half = want.dtype() == DType::f16 || want.dtype() == DType::bf16;
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_NEAR(g[i], w[i], (half ? 1e-2 : 1e-5) * (1 + std::abs(w[i]))) << name << " " << i;
  }
  EXPECT_GT(device_stats(kCuda).kernel_launches, before + ops.size());
  if (onFakeDriver()) {
    EXPECT_EQ(rejectedLaunches(), 0u);
  }
}

TEST_F(CudaTest, BroadcastingStridedViewsAndConcat) {
  Tensor ac = from_vector(ramp(24), {2, 3, 4}), bc = from_vector(ramp(4, 1.0f, 0.5f), {4});
  Tensor ag = ac.to(kCuda), bg = bc.to(kCuda);
  auto same = [](const Tensor& got, const Tensor& want, const char* what) {
    EXPECT_EQ(got.shape(), want.shape()) << what;
    const std::vector<float> g = got.to(Device::cpu()).to_vector<float>(), w = want.to_vector<float>();
    if (onFakeDriver()) {
      EXPECT_EQ(g, w) << what;  // the fake runs the same reference kernels
      return;
    }
    // A GPU's exp (libdevice) may differ from the host's by an ULP; the rest is exact.
    ASSERT_EQ(g.size(), w.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 2e-7f * std::abs(w[i])) << what << " " << i;
  };
  same(add(ag, bg), add(ac, bc), "broadcast add");
  same(mul(permute(ag, {2, 0, 1}), 2.0), mul(permute(ac, {2, 0, 1}), 2.0), "permuted");
  same(exp(slice(ag, 2, 1, 4, 2)), exp(slice(ac, 2, 1, 4, 2)), "stepped slice");
  same(permute(ag, {1, 2, 0}).contiguous(), permute(ac, {1, 2, 0}).contiguous(), "strided copy");
  same(concat({ag, mul(ag, 3.0)}, 1), concat({ac, mul(ac, 3.0)}, 1), "concat (copy into strided)");
  same(zeros({3, 5}, DType::f32, kCuda), zeros({3, 5}), "fill");
  same(full({7}, 2.5, DType::f32, kCuda), full({7}, 2.5), "fill value");
  EXPECT_EQ(full({3}, int64_t{-5}, DType::i64, kCuda).to_vector<int64_t>(), (std::vector<int64_t>{-5, -5, -5}));
}

TEST_F(CudaTest, ReductionsIndexingArangeAndRandomMatchTheCpu) {
  Tensor xc = from_vector(ramp(60, -1.0f, 0.05f), {3, 4, 5});
  Tensor xg = xc.to(kCuda);
  auto near = [](const Tensor& got, const Tensor& want, const char* what) {
    EXPECT_EQ(got.shape(), want.shape()) << what;
    std::vector<double> g = got.to(Device::cpu()).to_vector<double>(), w = want.to_vector<double>();
    ASSERT_EQ(g.size(), w.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5 * (1 + std::abs(w[i]))) << what << " " << i;
  };
  near(sum(xg, {1}), sum(xc, {1}), "sum over the middle axis");
  near(sum(xg, {0, 2}, true), sum(xc, {0, 2}, true), "sum keepdim over strided axes");
  near(max(permute(xg, {2, 0, 1}), {0}), max(permute(xc, {2, 0, 1}), {0}), "max of a permuted view");
  near(min(xg), min(xc), "min of everything");
  near(prod(slice(xg, 2, 0, 2), {2}), prod(slice(xc, 2, 0, 2), {2}), "prod");
  near(mean(xg, {2}), mean(xc, {2}), "mean (sum and divide)");
  near(softmax(xg, -1), softmax(xc, -1), "softmax (max, sub, exp, sum, div)");
  near(sum(cast(xg, DType::i64), {1}), sum(cast(xc, DType::i64), {1}), "i64 sum");
  Tensor idx = from_vector<int64_t>({2, 0, 3, 3}, {2, 2});
  near(index_select(xg, 2, idx.to(kCuda)), index_select(xc, 2, idx), "index_select with a 2-D index");
  Tensor gidx = from_vector<int64_t>({1, 0, 2, 3, 3, 1, 0, 0, 2, 1, 1, 3}, {3, 4, 1});
  near(gather(xg, 2, gidx.to(kCuda)), gather(xc, 2, gidx), "gather");
  near(slice(xg, 2, 3, 0, -2), slice(xc, 2, 3, 0, -2), "negative-step slice (index_select)");
  // index_add, scatter_add and cumsum: one launch each (IndexAddRows, or
  // IndexAdd for cumsum), repeated indices added in order; a strided source.
  Tensor aidx = from_vector<int64_t>({3, 0, 3, 1, 3}, {5});
  Tensor src = from_vector(ramp(3 * 5 * 5, 0.25f, 0.01f), {3, 5, 5});
  near(index_add(xg, 1, aidx.to(kCuda), src.to(kCuda)), index_add(xc, 1, aidx, src), "index_add");
  auto strided = [](const Tensor& t) { return permute(slice(t, 2, 0, 4), {0, 2, 1}); };  // [3, 4, 5]
  near(index_add(xg, 2, aidx.to(kCuda), strided(src.to(kCuda))), index_add(xc, 2, aidx, strided(src)),
       "index_add of a permuted source along the last axis");
  const Tensor isrc = cast(slice(slice(src, 1, 0, 4), 0, 0, 2), DType::i32);
  const Tensor twice = from_vector<int64_t>({2, 2}, {2});
  near(index_add(cast(xg, DType::i32), 0, twice.to(kCuda), isrc.to(kCuda)), index_add(cast(xc, DType::i32), 0, twice, isrc),
       "i32 index_add");
  near(index_add(cast(xg, DType::f16), 1, aidx.to(kCuda), cast(src.to(kCuda), DType::f16)),
       index_add(cast(xc, DType::f16), 1, aidx, cast(src, DType::f16)), "f16 index_add (each sum rounded from f32)");
  near(index_add(cast(xg, DType::bf16), 2, aidx.to(kCuda), strided(cast(src.to(kCuda), DType::bf16))),
       index_add(cast(xc, DType::bf16), 2, aidx, strided(cast(src, DType::bf16))), "bf16 index_add, strided source");
  const Tensor ssrc = slice(slice(src, 1, 0, 4), 2, 0, 1);
  near(scatter_add(xg, 2, gidx.to(kCuda), ssrc.to(kCuda)), scatter_add(xc, 2, gidx, ssrc), "scatter_add");
  near(cumsum(xg, 2), cumsum(xc, 2), "cumsum along the last axis");
  near(cumsum(permute(xg, {1, 0, 2}), 1), cumsum(permute(xc, {1, 0, 2}), 1), "cumsum of a permuted view");
  near(cumsum(cast(xg, DType::i64), 0), cumsum(cast(xc, DType::i64), 0), "i64 cumsum");
  near(argmax(xg, 1), argmax(xc, 1), "argmax");
  near(argmin(permute(xg, {2, 1, 0}), 2, true, true), argmin(permute(xc, {2, 1, 0}), 2, true, true),
       "argmin keepdim, last index, strided");
  Tensor wc = from_vector(ramp(5 * 6, 0.5f, -0.03f), {5, 6});
  near(matmul(xg, wc.to(kCuda)), matmul(xc, wc), "batched matmul [3,4,5] x [5,6]");
  near(matmul(transpose(wc.to(kCuda)), transpose(slice(xg, 0, 0, 1))), matmul(transpose(wc), transpose(slice(xc, 0, 0, 1))),
       "matmul of transposed views with batch broadcast");
  near(matmul(cast(xg, DType::i32), cast(wc.to(kCuda), DType::i32)), matmul(cast(xc, DType::i32), cast(wc, DType::i32)),
       "i32 matmul");
  near(arange(2.0, 9.0, 0.5, DType::f32, kCuda), arange(2.0, 9.0, 0.5), "arange f32");
  near(arange(int64_t{17}, DType::i64, kCuda), arange(int64_t{17}), "arange i64");
  near(rand({100}, 7, DType::f32, 0, 1, kCuda), rand({100}, 7), "rand");
  near(randn({4, 25}, 9, DType::f64, 0, 1, kCuda), randn({4, 25}, 9, DType::f64), "randn f64");
  if (onFakeDriver()) {
    EXPECT_EQ(rejectedLaunches(), 0u);
  }
}

/// The fake driver's log since it was last cleared: its lines that start
/// with `prefix`, in order.
std::vector<std::string> fakeLogLines(const std::string& prefix) {
  const std::string log = fakeHook<const char*()>("kiln_fake_cuda_log")();
  std::vector<std::string> lines;
  for (size_t at = 0; at < log.size();) {
    const size_t end = std::min(log.find('\n', at), log.size());
    if (log.compare(at, prefix.size(), prefix) == 0) lines.push_back(log.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

/// The tier-0 kernels the fake driver was asked to launch since its log was
/// last cleared, in order.
std::vector<std::string> launchedKernels() {
  const std::string tag = "cuLaunchKernel ";
  std::vector<std::string> names = fakeLogLines(tag);
  for (std::string& n : names) n.erase(0, tag.size());
  return names;
}

/// index_add (an embedding's gradient: many indices, rows of 16) is one
/// IndexAddRows launch after the copy of x (its dense i64 index is read back
/// and checked without a launch), whatever the index's length: a thread per position of each
/// distinct target row, adding its source rows in index order (before, tier
/// 0 launched an add and a copy per index, then one thread per position
/// walked the whole index). scatter_add is the same kernel over single
/// elements; cumsum, whose rows add the row before them, keeps the walk.
TEST_F(CudaTest, IndexAddIsOneLaunchWhateverTheIndexLength) {
  REQUIRE_FAKE_DRIVER();
  std::vector<int64_t> rows(300);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>((i * 7) % 10);
  const Tensor index = from_vector(rows, {300}), source = rand({300, 16}, 5, DType::f32, -1, 1);
  const Tensor x = rand({10, 16}, 6);
  const Tensor want = index_add(x, 0, index, source);
  const Tensor xg = x.to(kCuda), ig = index.to(kCuda), sg = source.to(kCuda);
  kiln::sync();
  const size_t launches = calls("cuLaunchKernel");
  fakeHook<void()>("kiln_fake_cuda_clear_log")();
  const Tensor got = index_add(xg, 0, ig, sg);
  kiln::sync();
  EXPECT_EQ(calls("cuLaunchKernel") - launches, 2u)
      << "the copy of x and one IndexAddRows launch (the dense i64 index is read back as it is)";
  const std::vector<std::string> kernels = launchedKernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.back(), "kiln_t0_indexaddrows_f32_rn");
  // The additions in the host's order: the same bits.
  EXPECT_EQ(got.to(Device::cpu()).to_vector<float>(), want.to_vector<float>());

  // scatter_add: every element of a [6, 40] source into 5 rows (repeats).
  std::vector<int64_t> targets(6 * 40);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int64_t>((i * 3) % 5);
  const Tensor sindex = from_vector(targets, {6, 40}), ssource = rand({6, 40}, 7, DType::f32, -1, 1);
  const Tensor sx = rand({5, 40}, 8);
  fakeHook<void()>("kiln_fake_cuda_clear_log")();
  const Tensor scattered = scatter_add(sx.to(kCuda), 0, sindex.to(kCuda), ssource.to(kCuda));
  kiln::sync();
  EXPECT_EQ(launchedKernels().back(), "kiln_t0_indexaddrows_f32_rn");
  EXPECT_EQ(scattered.to(Device::cpu()).to_vector<float>(), scatter_add(sx, 0, sindex, ssource).to_vector<float>());

  fakeHook<void()>("kiln_fake_cuda_clear_log")();
  const Tensor summed = cumsum(xg, 0);
  kiln::sync();
  EXPECT_EQ(launchedKernels().back(), "kiln_t0_indexadd_f32_rn");
  EXPECT_EQ(summed.to(Device::cpu()).to_vector<float>(), cumsum(x, 0).to_vector<float>());
  EXPECT_EQ(rejectedLaunches(), 0u);
}

/// A linear layer's bias add and relu run in cuBLASLt's epilogue, in the
/// matmul's call (OpLibrary::matmulWithEpilogue): no add kernel, and no
/// relu kernel where cuBLASLt's relu keeps NaN, as Kiln's does. Kiln probes
/// that once: the fake maps NaN to 0 unless KILN_FAKE_CUBLASLT_RELU=keep-nan
/// (kiln_cuda_tests_relu_epilogue runs this test so). Either way the
/// results are the bits of the separate ops, NaN included, which a product
/// that stays live (so unfused) shows; batched products and a [1, N] bias
/// too. A bias with a stride cuBLASLt does not take runs unfused.
TEST_F(CudaTest, MatmulEpiloguesRunInTheCublasLtCall) {
  REQUIRE_FAKE_DRIVER();
  if (!cublasLtConfigured()) GTEST_SKIP() << "cuBLASLt is off (kiln_cuda_tests_no_cublaslt)";
  std::vector<float> xs = ramp(2 * 8 * 32, -2.0f, 0.01f);
  xs[5 * 32 + 3] = std::nanf("");  // row 5's products are NaN
  const Tensor x = from_vector(xs, {2, 8, 32}).to(kCuda), w = randn({32, 24}, 1).to(kCuda);
  const Tensor b = randn({24}, 2).to(kCuda), rowBias = randn({1, 24}, 3).to(kCuda);
  const Tensor wide = randn({48}, 4).to(kCuda);
  kiln::sync();
  auto bits = [](const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); };
  auto sameBits = [&](const Tensor& got, const Tensor& want, const char* what) {
    const std::vector<float> g = bits(got), e = bits(want);
    ASSERT_EQ(g.size(), e.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::isnan(e[i])) EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i;
      else EXPECT_EQ(g[i], e[i]) << what << " at " << i;
    }
  };
  // Unfused: the product (and the sum) stay live, so each op runs alone.
  Tensor product = matmul(x, w);
  Tensor sum = product + b;
  const Tensor separate = relu(sum), separateRow = relu(product + rowBias);
  kiln::sync();
  const Tensor probe = relu(matmul(x, w) + b);  // the relu probe, if this is the process's first relu epilogue
  kiln::sync();

  fakeHook<void()>("kiln_fake_cuda_clear_log")();
  const size_t matmuls = fakeCublasLtMatmuls(), biased = fakeBiasMatmuls(), relus = fakeReluMatmuls();
  const Tensor fused = relu(matmul(x, w) + b);
  const Tensor fusedRow = relu(matmul(x, w) + rowBias);
  const Tensor biasOnly = matmul(x, w) + b;
  kiln::sync();
  EXPECT_EQ(fakeCublasLtMatmuls() - matmuls, 3u);
  EXPECT_EQ(fakeBiasMatmuls() - biased, 3u);
  const std::vector<std::string> kernels = launchedKernels();
  for (const std::string& k : kernels) EXPECT_EQ(k.find("add"), std::string::npos) << k;
  const auto reluKernels = std::count_if(kernels.begin(), kernels.end(),
                                         [](const std::string& k) { return k.find("relu") != std::string::npos; });
  if (fakeReluKeepsNaN()) {
    EXPECT_EQ(fakeReluMatmuls() - relus, 2u);
    EXPECT_EQ(reluKernels, 0);
  } else {
    EXPECT_EQ(fakeReluMatmuls() - relus, 0u);
    EXPECT_EQ(reluKernels, 2);
  }
  sameBits(fused, separate, "relu(x @ w + b)");
  sameBits(fusedRow, separateRow, "relu(x @ w + b[1, N])");
  sameBits(biasOnly, sum, "x @ w + b");
  EXPECT_TRUE(std::isnan(bits(fused)[5 * 24])) << "relu(NaN) stays NaN";

  // Every other element of a wider vector: not a bias cuBLASLt takes.
  const Tensor strided = slice(wide, 0, 0, 48, 2);
  const size_t before = fakeBiasMatmuls(), matmulsBefore = fakeCublasLtMatmuls();
  const Tensor stridedSum = matmul(x, w) + strided;
  sameBits(stridedSum, product + strided, "x @ w + a strided bias");
  EXPECT_EQ(fakeBiasMatmuls(), before);
  EXPECT_EQ(fakeCublasLtMatmuls() - matmulsBefore, 1u) << "one plain matmul, then the add";

  // Other operands cuBLASLt's epilogue declines: each op then runs on its
  // own, none skipped (the add's reader is not always a relu).
  const Tensor constant = full({24}, 0.25f, DType::f32, kCuda);  // one element, stride 0
  const Tensor noDepthX = slice(x, 2, 0, 0), noDepthW = slice(w, 0, 0, 0);
  const Tensor noDepth = matmul(noDepthX, noDepthW);  // held
  kiln::sync();
  const Tensor declinedSigmoid = sigmoid(matmul(x, w) + strided);
  const Tensor declinedConstant = relu(matmul(x, w) + constant);
  const Tensor declinedDepth = relu(matmul(noDepthX, noDepthW) + b);
  sameBits(declinedSigmoid, sigmoid(product + strided), "sigmoid(x @ w + a strided bias)");
  sameBits(declinedConstant, relu(product + constant), "relu(x @ w + a constant)");
  sameBits(declinedDepth, relu(noDepth + b), "relu(x[.., 0] @ w[0, ..] + b)");
  EXPECT_EQ(fakeBiasMatmuls(), before);
  EXPECT_EQ(rejectedLaunches(), 0u);
}

/// An embedding's gradient (index_select) and a gather of several indices
/// per row add g's rows where they were read from (IndexAddRows), as on the
/// CPU, instead of a product with a one-hot matrix of the whole table: no
/// matmul is launched, and the gradients equal the CPU's bit for bit. Each
/// index is read back to the host once in the step, for the forward's check
/// and the gradient's table (NodeResults::indexReads).
TEST_F(CudaTest, EmbeddingAndGatherGradientsAddRowsInsteadOfOneHotProducts) {
  REQUIRE_FAKE_DRIVER();
  std::vector<int64_t> tokens(24), picks(6 * 3);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 5) % 40);
  for (size_t i = 0; i < picks.size(); ++i) picks[i] = static_cast<int64_t>((i * 7) % 9);
  const Tensor index = from_vector(tokens, {4, 6}), pick = from_vector(picks, {6, 3});
  const Tensor table = randn({40, 8}, 3), rows = randn({6, 9}, 4);
  const Tensor weights = randn({4, 6, 8}, 5), pickWeights = randn({6, 3}, 6);
  // The inputs go to the device first; then forward and backward are one
  // trace, as in a training step.
  size_t readsBefore = 0;
  auto gradients = [&](Device d) {
    Tensor t = table.to(d), r = rows.to(d);
    const Tensor i = index.to(d), w = weights.to(d), p = pick.to(d), pw = pickWeights.to(d);
    kiln::sync();
    t.requires_grad();
    r.requires_grad();
    const Tensor loss = sum(mul(index_select(t, 0, i), w)) + sum(mul(gather(r, 1, p), pw));
    std::vector<Tensor> g = grad(loss, {t, r});
    readsBefore = calls("cuMemcpyDtoHAsync_v2");  // (the calls checked the indices they were given)
    kiln::sync();                                  // the trace runs
    return g;
  };
  const std::vector<Tensor> want = gradients(Device::cpu());
  fakeHook<void()>("kiln_fake_cuda_clear_log")();
  const size_t blasBefore = fakeCublasLtMatmuls();
  const std::vector<Tensor> got = gradients(kCuda);
  EXPECT_EQ(calls("cuMemcpyDtoHAsync_v2") - readsBefore, 2u)
      << "the run reads the tokens and the picks back once each, for the forward's checks and the tables";
  const std::vector<std::string> kernels = launchedKernels();
  EXPECT_EQ(std::count(kernels.begin(), kernels.end(), "kiln_t0_indexaddrows_f32_rn"), 2);
  for (const std::string& k : kernels) EXPECT_EQ(k.find("contract"), std::string::npos) << k;
  EXPECT_EQ(fakeCublasLtMatmuls(), blasBefore);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].to(Device::cpu()).to_vector<float>(), want[0].to_vector<float>());
  EXPECT_EQ(got[1].to(Device::cpu()).to_vector<float>(), want[1].to_vector<float>());
  EXPECT_EQ(rejectedLaunches(), 0u);
}

/// A run keeps the index values it read apart by view: two rows of one
/// index buffer (as many elements, another offset) and a transposed copy of
/// it are three reads, each used where it belongs.
TEST_F(CudaTest, OneRunsIndexReadsKeepDifferentViewsApart) {
  REQUIRE_FAKE_DRIVER();
  const Tensor table = randn({10, 4}, 7);
  const Tensor idx = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 9, 8, 7, 6, 5, 0}, {2, 6});
  size_t readsBefore = 0;
  auto run = [&](Device d) {
    const Tensor t = table.to(d), i = idx.to(d);
    kiln::sync();
    const Tensor first = index_select(t, 0, slice(i, 0, 0, 1)), second = index_select(t, 0, slice(i, 0, 1, 2));
    const Tensor crossed = index_select(t, 0, reshape(transpose(i), {12}));
    const Tensor all = concat({reshape(first, {24}), reshape(second, {24}), reshape(crossed, {48})}, 0);
    readsBefore = calls("cuMemcpyDtoHAsync_v2");
    kiln::sync();
    return all;
  };
  const Tensor want = run(Device::cpu());
  const Tensor got = run(kCuda);
  EXPECT_EQ(calls("cuMemcpyDtoHAsync_v2") - readsBefore, 3u);
  EXPECT_EQ(got.to(Device::cpu()).to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(rejectedLaunches(), 0u);
}

/// Reductions whose innermost reduced axis is contiguous and holds a warp's
/// worth (on a GPU: a warp per output, lanes folding in another order than
/// the CPU, then shuffles) against the CPU.
TEST_F(CudaTest, WarpWideRowReductionsMatchTheCpu) {
  const Tensor x = rand({37, 5, 300}, 3, DType::f32, -2, 2), xg = x.to(kCuda);
  auto near = [](const Tensor& got, const Tensor& want, double tol, const std::string& what) {
    EXPECT_EQ(got.shape(), want.shape()) << what;
    std::vector<double> g = got.to(Device::cpu()).to_vector<double>(), w = want.to_vector<double>();
    ASSERT_EQ(g.size(), w.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol * (1 + std::abs(w[i]))) << what << " " << i;
  };
  near(sum(xg, {2}), sum(x, {2}), 1e-5, "sum of rows");
  near(max(xg, {2}), max(x, {2}), 0, "max of rows");
  near(min(xg, {1, 2}), min(x, {1, 2}), 0, "min over two axes, the inner contiguous");
  near(prod(slice(xg, 2, 0, 40) * 0.5 + 1.0, {2}), prod(slice(x, 2, 0, 40) * 0.5 + 1.0, {2}), 1e-5, "prod");
  near(sum(xg), sum(x), 1e-5, "sum of everything (one output)");
  near(softmax(xg, -1), softmax(x, -1), 1e-6, "softmax");
  near(layer_norm(xg), layer_norm(x), 1e-4, "layer_norm");
  const Tensor xi = cast(x * 100.0, DType::i32);
  near(sum(xi.to(kCuda), {2}), sum(xi, {2}), 0, "i32 sum (exact in any order)");
  near(max(xi.to(kCuda), {0, 2}), max(xi, {0, 2}), 0, "i32 max, the outer axis strided");
  Tensor nan = from_vector(std::vector<float>(64, 1.0f), {2, 32});
  nan = where(arange(int64_t{64}).reshape({2, 32}) == 37, full({2, 32}, NAN), nan);
  const std::vector<float> m = max(nan.to(kCuda), {1}).to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(m[0], 1.0f);
  EXPECT_TRUE(std::isnan(m[1])) << "a NaN in a lane is the maximum";
}

/// Matmuls in every layout cuBLASLt takes (and some it does not): on a GPU
/// they run through cuBLASLt, on the fake driver through the tier-0 kernel;
/// both must match the CPU.
TEST_F(CudaTest, MatmulLayoutsBatchesAndTypesMatchTheCpu) {
  auto near = [](const Tensor& got, const Tensor& want, double tol, const std::string& what) {
    EXPECT_EQ(got.shape(), want.shape()) << what;
    EXPECT_EQ(got.device(), kCuda) << what;
    std::vector<double> g = got.to(Device::cpu()).to_vector<double>(), w = want.to_vector<double>();
    ASSERT_EQ(g.size(), w.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol * (1 + std::abs(w[i]))) << what << " " << i;
  };
  const Tensor a = rand({2, 3, 37, 19}, 1, DType::f32, -1, 1), b = rand({2, 3, 19, 23}, 2, DType::f32, -1, 1);
  const Tensor ag = a.to(kCuda), bg = b.to(kCuda);
  // x[i] along `axis`, the axis dropped; a transpose stored densely.
  auto sel = [](const Tensor& x, int axis, int64_t i) { return squeeze(slice(x, axis, i, i + 1), {axis}); };
  auto storedTransposed = [](const Tensor& x) { return transpose(transpose(x).contiguous()); };
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
  };
  const std::vector<Case> cases = {
      {"rank-4 batch", [](const Tensor& x, const Tensor& y) { return matmul(x, y); }},
      {"2-D", [&](const Tensor& x, const Tensor& y) { return matmul(sel(sel(x, 0, 1), 0, 2), sel(sel(y, 0, 0), 0, 1)); }},
      {"a transposed", [&](const Tensor& x, const Tensor& y) { return matmul(storedTransposed(x), y); }},
      {"b transposed", [&](const Tensor& x, const Tensor& y) { return matmul(x, storedTransposed(y)); }},
      {"both transposed", [&](const Tensor& x, const Tensor& y) { return matmul(storedTransposed(x), storedTransposed(y)); }},
      {"shared b (batch folds into M)", [&](const Tensor& x, const Tensor& y) { return matmul(x, sel(sel(y, 0, 1), 0, 0)); }},
      {"shared a (stride-0 batch)", [&](const Tensor& x, const Tensor& y) { return matmul(sel(sel(x, 0, 0), 0, 2), y); }},
      {"permuted batch (outer loop)", [](const Tensor& x, const Tensor& y) { return matmul(permute(x, {1, 0, 2, 3}), permute(y, {1, 0, 2, 3})); }},
      {"column slice (unaligned)", [](const Tensor& x, const Tensor& y) { return matmul(slice(x, 3, 1, 18), slice(y, 2, 2, 19)); }},
      {"row vector", [](const Tensor& x, const Tensor& y) { return matmul(slice(x, 2, 5, 6), y); }},
      {"matrix times vector", [&](const Tensor& x, const Tensor& y) { return matmul(x, sel(sel(sel(y, 0, 0), 0, 0), 1, 3)); }},
      {"K = 0", [](const Tensor& x, const Tensor& y) { return matmul(slice(x, 3, 0, 0), slice(y, 2, 0, 0)); }},
      {"stepped rows", [](const Tensor& x, const Tensor& y) { return matmul(slice(x, 2, 0, 37, 3), y); }},
  };
  const size_t blasBefore = fakeCublasLtMatmuls();
  for (const Case& c : cases) near(c.f(ag, bg), c.f(a, b), 1e-5, c.name);
  // Half types accumulate in f32 on both sides; f64 is exact to its own precision.
  for (DType t : {DType::f64, DType::bf16, DType::f16}) {
    const Tensor at = cast(a, t), bt = cast(b, t);
    const double tol = t == DType::f64 ? 1e-12 : 1e-2;
    near(matmul(at.to(kCuda), bt.to(kCuda)), matmul(at, bt), tol, std::string(dtype_name(t)) + " rank-4 batch");
    near(matmul(transpose(bt.to(kCuda)), transpose(at.to(kCuda))), matmul(transpose(bt), transpose(at)), tol,
         std::string(dtype_name(t)) + " transposed views");
  }
  // With the fake cuBLASLt loaded (ctest's kiln_cuda_tests), the BLAS
  // layouts went through it: 2 calls per case but K = 0, "permuted batch"
  // one per outer index, 2 per dtype; KILN_CUBLASLT=0 runs them all on tier 0.
  const char* off = std::getenv("KILN_CUBLASLT");
  if (fakeCublasLtLoaded()) {
    if (off && std::string(off) == "0") EXPECT_EQ(fakeCublasLtMatmuls(), blasBefore);
    else EXPECT_GE(fakeCublasLtMatmuls() - blasBefore, cases.size() + 4);
  }
}

TEST_F(CudaTest, EveryLaunchMatchesItsPtxAndIsCounted) {
  REQUIRE_FAKE_DRIVER();
  const size_t launchesBefore = calls("cuLaunchKernel");
  const uint64_t countedBefore = device_stats(kCuda).kernel_launches;
  Tensor x = from_vector(ramp(64), {8, 8}).to(kCuda);
  Tensor y = add(exp(x), permute(x, {1, 0}));
  sync();
  EXPECT_EQ(calls("cuLaunchKernel") - launchesBefore, device_stats(kCuda).kernel_launches - countedBefore);
  EXPECT_GE(calls("cuModuleLoadData"), 2u) << "each kernel's PTX module is loaded on first use";
  EXPECT_EQ(rejectedLaunches(), 0u) << "the fake rejected a launch (parameters, pointers or launch shape)";
}

TEST_F(CudaTest, MixedDevicesAreAnErrorNamingBothAndTheFix) {
  Tensor c = from_vector(ramp(4), {4});
  Tensor g = c.to(kCuda);
  expectError([&] { add(c, g); }, {"cpu:0", "cuda:0", "to("});
  expectError([&] { where(gt(g, 0.0), c, g); }, {"cpu:0", "cuda:0", "to("});
}

TEST_F(CudaTest, Conv2dRunsOnTheDevice) {
  // Padding, im2col and a batched matmul of the tier-0 kernels (checked
  // against the SPIR-V kernels in the Level Zero tests; here the launches).
  Tensor img = from_vector(ramp(2 * 4 * 5 * 5), {2, 4, 5, 5});
  Tensor w = from_vector(ramp(6 * 2 * 3 * 3, 0.5f, -0.02f), {6, 2, 3, 3});
  const Conv2dOptions options{{2, 1}, {1, 1}, {1, 1}, 2};
  const uint64_t launches = device_stats(kCuda).kernel_launches;
  Tensor got = conv2d(img.to(kCuda), w.to(kCuda), {}, options);
  EXPECT_EQ(got.device(), kCuda);
  std::vector<float> g = got.to(Device::cpu()).to_vector<float>(), r = conv2d(img, w, {}, options).to_vector<float>();
  ASSERT_EQ(g.size(), r.size());
  for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(g[i], r[i], 1e-4f * (1 + std::abs(r[i]))) << i;
  EXPECT_GE(device_stats(kCuda).kernel_launches, launches + 4);  // fill, pad copy, im2col, matmul
}

TEST_F(CudaTest, RefusedLaunchFailsItsOpAndKeepsEarlierResults) {
  REQUIRE_FAKE_DRIVER();
  Tensor x = from_vector(ramp(32), {32}).to(kCuda);
  Tensor before = exp(x);
  sync();
  ASSERT_EQ(inject("launch", 0, 1), 0);
  Tensor failed = tanh(x);
  expectError([&] { failed.to(Device::cpu()).to_vector<float>(); },
              {"cuLaunchKernel", "kiln_t0_unary_tanh_f32", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"});
  EXPECT_EQ(before.to(Device::cpu()).to_vector<float>(), exp(from_vector(ramp(32), {32})).to_vector<float>());
  EXPECT_EQ(tanh(x).to(Device::cpu()).to_vector<float>(), tanh(from_vector(ramp(32), {32})).to_vector<float>());
}

TEST_F(CudaTest, OutOfMemoryInAnOpFailsThatOpAndKeepsEarlierResults) {
  REQUIRE_FAKE_DRIVER();
  Tensor x = from_vector(ramp(16), {16}).to(kCuda);
  Tensor kept = mul(x, 2.0);
  sync();
  const std::vector<float> keptHost = kept.to(Device::cpu()).to_vector<float>();
  ASSERT_EQ(inject("oom", 0, 2), 0);
  Tensor big = add(zeros({64 << 20}, DType::f32, kCuda), 1.0);  // 256 MiB: a new segment
  expectError([&] { big.to(Device::cpu()).to_vector<float>(); }, {"cuda:0", "out of memory", "empty_cache"});
  resetFaults();
  EXPECT_EQ(kept.to(Device::cpu()).to_vector<float>(), keptHost);
}

TEST_F(CudaTest, DLPackCarriesCudaTensorsBothWaysWithoutCopies) {
  const float values[6] = {1, -2, 3, -4, 5, -6};
  const int64_t dims[2] = {2, 3};
  kiln_tensor host = nullptr, onGpu = nullptr, back = nullptr, doubled = nullptr;
  ASSERT_EQ(kiln_tensor_from_host(values, sizeof values, KILN_DTYPE_F32, dims, 2, &host), KILN_OK);
  ASSERT_EQ(kiln_tensor_to_device(host, kiln_device{KILN_DEVICE_CUDA, 0}, &onGpu), KILN_OK) << kiln_last_error();
  DLManagedTensor* dl = nullptr;
  ASSERT_EQ(kiln_tensor_to_dlpack(onGpu, &dl), KILN_OK) << kiln_last_error();
  EXPECT_EQ(dl->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(dl->dl_tensor.device.device_id, 0);
  void* exported = dl->dl_tensor.data;
  EXPECT_TRUE(hal::deviceContext(kCuda).allocator().stats().bytes_active > 0);
  // In again: the same device memory, no copy.
  ASSERT_EQ(kiln_tensor_from_dlpack(dl, &back), KILN_OK) << kiln_last_error();
  kiln_device where{};
  ASSERT_EQ(kiln_tensor_device(back, &where), KILN_OK);
  EXPECT_EQ(where.kind, KILN_DEVICE_CUDA);
  DLManagedTensor* again = nullptr;
  ASSERT_EQ(kiln_tensor_to_dlpack(back, &again), KILN_OK);
  EXPECT_EQ(again->dl_tensor.data, exported);
  again->deleter(again);
  float out[6] = {};
  ASSERT_EQ(kiln_tensor_copy_to_host(back, out, sizeof out, KILN_DTYPE_F32), KILN_OK) << kiln_last_error();
  EXPECT_EQ(std::vector<float>(out, out + 6), std::vector<float>(values, values + 6));
  // CUDA memory of a device this process does not have is refused.
  DLManagedTensor foreign{};
  int64_t shape[1] = {2};
  foreign.dl_tensor.data = exported;
  foreign.dl_tensor.device = DLDevice{kDLCUDA, 7};
  foreign.dl_tensor.ndim = 1;
  foreign.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  foreign.dl_tensor.shape = shape;
  EXPECT_EQ(kiln_tensor_from_dlpack(&foreign, &doubled), KILN_ERROR_DEVICE);
  EXPECT_NE(std::string(kiln_last_error()).find("CUDA device 7"), std::string::npos) << kiln_last_error();
  kiln_tensor_release(back);
  kiln_tensor_release(onGpu);
  kiln_tensor_release(host);
}

// Sticky failures (a faulting kernel, a lost device) leave the fake driver
// failing every call until reset: each runs in its own process (ctest).
/// One process (no mpirun): the collectives of CUDA tensors are copies on
/// the device, without NCCL, so a script runs unchanged without a launcher.
TEST_F(CudaTest, CollectivesOfOneProcessAreCopiesOnTheDevice) {
  dist::init();
  ASSERT_EQ(dist::size(), 1);
  const std::vector<float> v = ramp(12);
  Tensor x = from_vector(v, {3, 4}).to(kCuda);
  Tensor t = permute(x, {1, 0});  // strided: made dense first
  std::vector<float> transposed;
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 3; ++i) transposed.push_back(v[static_cast<size_t>(i * 4 + j)]);
  for (const Tensor& r : {dist::all_reduce(t, dist::ReduceOp::mean), dist::broadcast(t, 0), dist::all_gather(t),
                          dist::reduce_scatter(t, dist::ReduceOp::max)}) {
    EXPECT_EQ(r.device(), kCuda);
    EXPECT_EQ(r.shape(), (Shape{4, 3}));
    EXPECT_EQ(r.to_vector<float>(), transposed);
  }
}

/// The fake NCCL's count of its collectives; kNoFakeNccl with the real one.
constexpr size_t kNoFakeNccl = ~size_t{0};
size_t fakeNcclCollectives() {
  const KilnFakeNcclCount count = kilnFakeNcclCollectives();
  return count ? count() : kNoFakeNccl;
}

/// kiln::dist::nccl_communicator on one rank, on device buffers: the fake
/// NCCL in CI (KILN_NCCL_LIBRARY), the real libnccl.so.2 on a GPU.
TEST_F(CudaTest, NcclCommunicatorOfOneRankRunsOnDeviceBuffers) {
  const char* path = std::getenv("KILN_NCCL_LIBRARY");
  void* lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) GTEST_SKIP() << "no NCCL library here (set KILN_NCCL_LIBRARY)";
  dlclose(lib);
  dist::init();
  std::unique_ptr<dist::Communicator> nccl = dist::nccl_communicator(dist::world(), 0);
  EXPECT_EQ(nccl->backend(), "nccl");
  EXPECT_EQ(nccl->size(), 1);
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  hal::Allocator& a = ctx.allocator();
  const std::vector<float> v = ramp(1000);
  const size_t bytes = v.size() * sizeof(float);
  void* in = a.allocate(bytes);
  void* out = a.allocate(bytes);
  hal::Stream& stream = ctx.defaultStream();
  stream.copy(in, v.data(), bytes);
  // `out` starts as all-ones bits (NaN) before each call: a call that does
  // nothing leaves them.
  auto clearOut = [&] {
    stream.fill(out, 0xFF, bytes);
    ctx.synchronize();  // the communicator runs on a stream of its own
  };
  auto result = [&] {
    std::vector<float> r(v.size());
    stream.copy(r.data(), out, bytes);
    ctx.synchronize();
    return r;
  };
  clearOut();
  nccl->all_reduce(in, out, 1000, DType::f32, dist::ReduceOp::mean);
  EXPECT_EQ(result(), v);
  clearOut();
  nccl->all_gather(in, out, 1000, DType::f32);
  EXPECT_EQ(result(), v);
  clearOut();
  nccl->reduce_scatter(in, out, 1000, DType::f32, dist::ReduceOp::max);
  EXPECT_EQ(result(), v);
  // In place, as the API takes it (with one rank the root's buffer is
  // already the result: this checks that the call reaches NCCL and leaves it).
  stream.copy(out, in, bytes);
  ctx.synchronize();
  const size_t before = fakeNcclCollectives();
  nccl->broadcast(out, 1000, DType::f32, 0);
  EXPECT_EQ(result(), v);
  if (fakeNcclCollectives() != kNoFakeNccl) {
    EXPECT_EQ(fakeNcclCollectives() - before, 1u);
  }
  // The first 999 elements as i32 (one rank's sum keeps their bits), and
  // nothing written past the count.
  clearOut();
  nccl->all_reduce(in, out, 999, DType::i32, dist::ReduceOp::sum);
  std::vector<float> partial = result();
  EXPECT_TRUE(std::equal(v.begin(), v.begin() + 999, partial.begin()));
  EXPECT_TRUE(std::isnan(partial[999])) << "wrote past the count";
  nccl.reset();
  a.deallocate(in, bytes);
  a.deallocate(out, bytes);
}

TEST_F(CudaTest, KernelFaultSurfacesAtSyncNamingTheDriverError) {
  REQUIRE_FAKE_DRIVER();
  Tensor x = from_vector(ramp(16), {16}).to(kCuda);
  const std::vector<float> computed = exp(x).to(Device::cpu()).to_vector<float>();
  ASSERT_EQ(inject("fault", 0, 1), 0);
  Tensor y = sin(x);
  expectError([] { sync(); }, {"cuda:0", "CUDA_ERROR_LAUNCH_FAILED"});
  EXPECT_EQ(computed, exp(from_vector(ramp(16), {16})).to_vector<float>());
  resetFaults();
}

TEST_F(CudaTest, LostDeviceIsAnErrorAtTheNextCall) {
  REQUIRE_FAKE_DRIVER();
  Tensor x = from_vector(ramp(8), {8}).to(kCuda);
  const std::vector<float> host = x.to(Device::cpu()).to_vector<float>();
  ASSERT_EQ(inject("lost", 0, 1), 0);
  expectError([&] { exp(x).to(Device::cpu()).to_vector<float>(); }, {"cuda:0", "CUDA_ERROR_DEVICE_UNAVAILABLE"});
  EXPECT_EQ(host, ramp(8));
  resetFaults();
}

// Run with KILN_CUDA_LIBRARY naming a library that does not exist.
// ---------------------------------------------------------------------------
// Tier 1: hot traces compiled to PTX (jit/targets/nvptx), loaded and launched
// by the device's kernel loader. The fake refuses compiled modules unless
// KILN_FAKE_CUDA_COMPILED=launch (kiln_cuda_tests_compiled), and then checks
// each launch against the PTX's signature without computing it.

/// A training-like step: matmul, bias, tanh, softmax, a loss reduced to a
/// scalar that later kernels read, and a learning rate that varies between
/// steps (a kernel argument).
struct CudaStep {
  Device device;
  Tensor x, w, b;
  explicit CudaStep(Device d)
      : device(d), x(from_vector(ramp(8 * 12, -1.0f, 0.021f), {8, 12}).to(d)),
        w(from_vector(ramp(12 * 5, 0.4f, -0.013f), {12, 5}).to(d)), b(from_vector(ramp(5, 0.1f, 0.05f), {5}).to(d)) {}
  std::vector<float> run(float lr) {
    Tensor h = tanh(matmul(x, w) + b);
    Tensor loss = mean(sum(softmax(h, 1) * h, {1}));
    w = w - (h.sum() * lr) * loss;
    std::vector<float> r = w.to(Device::cpu()).to_vector<float>();
    step();
    return r;
  }
};

std::vector<std::vector<float>> runCudaSteps(Device d, int n) {
  CudaStep s(d);
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) out.push_back(s.run(0.01f * static_cast<float>(i + 1)));
  return out;
}

TEST_F(CudaTest, CompiledModulesTheDriverRefusesLeaveTheirTracesInTierZero) {
  REQUIRE_FAKE_DRIVER();
  if (std::getenv("KILN_FAKE_CUDA_COMPILED")) GTEST_SKIP() << "the fake loads compiled modules in this run";
  if (!exec::loadCompiler()) GTEST_SKIP() << "no compiler in this process (scripts/gpu-check.sh ships none)";
  const auto want = runCudaSteps(Device::cpu(), 4);
  const size_t refusedBefore = calls("refused-module");
  JitScope sync(JitMode::Sync, 1);
  reset_stats();
  const auto got = runCudaSteps(kCuda, 4);
  const Stats s = stats();
  // The compile worked; cuModuleLoadData refused the PTX: counted as a
  // failed compile (of the regions around the matmul, which runs between
  // them on cuBLASLt or tier 0), and every step ran (right) in tier 0.
  EXPECT_GE(s.region_compile_failures, 1u) << s.str();
  EXPECT_EQ(s.compiled_runs + s.mixed_runs, 0u) << s.str();
  EXPECT_GT(calls("refused-module"), refusedBefore);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    for (size_t k = 0; k < got[i].size(); ++k) EXPECT_NEAR(got[i][k], want[i][k], 1e-5) << i << " " << k;
}

class CudaCompiled : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(device_count(Device::CUDA), 1) << "ctest runs this with KILN_CUDA_LIBRARY=libkiln_fake_cuda.so";
    if (!onFakeDriver() || !std::getenv("KILN_FAKE_CUDA_COMPILED"))
      GTEST_SKIP() << "run by kiln_cuda_tests_compiled (the fake with KILN_FAKE_CUDA_COMPILED=launch)";
    if (!exec::loadCompiler()) GTEST_SKIP() << "no compiler in this process";
  }
};

/// A softmax over rows of 1000 on cuda:0: by default its row reductions run
/// between compiled regions on tier 0's warp kernels; with
/// KILN_CUDA_ROW_KERNELS=1 (kiln_cuda_tests_row_kernels) the whole trace
/// compiles into one row kernel, one launch a run.
TEST_F(CudaCompiled, RowReductionsRunOnTierZeroUnlessRowKernelsAreAskedFor) {
  const bool rowKernels = settings().cuda_row_kernels;
  if (const char* env = std::getenv("KILN_CUDA_ROW_KERNELS")) {
    EXPECT_EQ(rowKernels, std::string(env) == "1") << "Settings::cuda_row_kernels comes from the environment";
  }
  JitScope sync(JitMode::Sync, 1);
  const Tensor x = from_vector(ramp(64 * 1000, -2.0f, 1e-4f), {64, 1000}).to(kCuda);
  reset_stats();
  constexpr int kRuns = 3;
  for (int i = 0; i < kRuns; ++i) {
    Tensor y = softmax(x, 1);
    step();
  }
  hal::deviceContext(kCuda).synchronize();
  const Stats s = stats();
  EXPECT_EQ(s.compile_failures + s.region_compile_failures, 0u) << s.str();
  if (rowKernels) {
    EXPECT_EQ(s.compiles, 1u) << s.str();
    EXPECT_EQ(s.compiled_runs, static_cast<uint64_t>(kRuns)) << s.str();
    EXPECT_EQ(s.kernel_launches, static_cast<uint64_t>(kRuns)) << "one row kernel a run; " << s.str();
  } else {
    EXPECT_EQ(s.compiled_runs, 0u) << s.str();
    EXPECT_GE(s.mixed_runs, static_cast<uint64_t>(kRuns - 1)) << s.str();
  }
}

/// A compiled embedding step on cuda:0 runs as regions around index_add,
/// which tier 0 runs between them (RegionBoundaries), and reads the tokens
/// back once a run: the region's index check and index_add's table share the
/// read (NodeResults::indexReads).
TEST_F(CudaCompiled, AnEmbeddingStepReadsItsTokensBackOnceARun) {
  JitScope sync(JitMode::Sync, 1);
  std::vector<int64_t> tokens(32);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 11) % 50);
  const Tensor ids = from_vector(tokens, {4, 8}).to(kCuda), w = randn({4, 8, 16}, 2).to(kCuda);
  Tensor table = randn({50, 16}, 1).to(kCuda);
  kiln::sync();
  reset_stats();
  constexpr int kRuns = 3;
  for (int r = 0; r < kRuns; ++r) {
    Tensor t = table;
    t.requires_grad();
    const std::vector<Tensor> g = grad(sum(mul(index_select(t, 0, ids), w)), {t});
    const size_t before = calls("cuMemcpyDtoHAsync_v2");  // (the calls checked the tokens they were given)
    kiln::sync();                                         // the trace runs
    EXPECT_EQ(calls("cuMemcpyDtoHAsync_v2") - before, 1u) << "run " << r;
  }
  const Stats s = stats();
  EXPECT_EQ(s.compile_failures + s.region_compile_failures, 0u) << s.str();
  EXPECT_EQ(s.compiled_runs, 0u) << "index_add keeps the step from compiling whole; " << s.str();
  EXPECT_GE(s.mixed_runs, static_cast<uint64_t>(kRuns - 1)) << s.str();
  EXPECT_GT(s.region_launches, 0u) << s.str();
}

/// A compiled step's linear layers: each matmul runs between compiled
/// regions with its bias add in cuBLASLt's epilogue; the relu after it and
/// the rest compile, whatever the relu probe says (KILN_FAKE_CUBLASLT_RELU=
/// keep-nan in kiln_cuda_tests_relu_epilogue): a plan, so its regions' keys,
/// must not depend on it. The fake computes cuBLASLt's calls (not compiled
/// kernels), so their results are checked against the CPU's.
TEST_F(CudaCompiled, LinearLayersRunTheirBiasAndReluInTheMatmulEpilogue) {
  if (!cublasLtConfigured()) GTEST_SKIP() << "cuBLASLt is off";
  JitScope sync(JitMode::Sync, 1);
  const Tensor x = randn({16, 32}, 1), w = randn({32, 24}, 2), b = randn({24}, 3);
  const Tensor w2 = randn({32, 8}, 4), b2 = randn({8}, 5);
  const Tensor xg = x.to(kCuda), wg = w.to(kCuda), bg = b.to(kCuda), w2g = w2.to(kCuda), b2g = b2.to(kCuda);
  kiln::sync();
  auto near = [](const Tensor& got, const Tensor& want, const std::string& what) {
    const std::vector<float> g = got.to(Device::cpu()).to_vector<float>(), e = want.to_vector<float>();
    ASSERT_EQ(g.size(), e.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-4 * (1 + std::abs(e[i]))) << what << " at " << i;
  };
  reset_stats();
  constexpr int kRuns = 3;
  for (int r = 0; r < kRuns; ++r) {
    const size_t biased = fakeBiasMatmuls(), relus = fakeReluMatmuls();
    fakeHook<void()>("kiln_fake_cuda_clear_log")();
    const Tensor z = matmul(xg, wg) + bg;            // held
    const Tensor h = relu(matmul(xg, w2g) + b2g);    // the relu compiles
    const Tensor y = tanh(relu(z)) * 0.5f + sum(h);  // compiled
    kiln::sync();
    const std::string run = "run " + std::to_string(r);
    EXPECT_EQ(fakeBiasMatmuls() - biased, 2u) << run;
    EXPECT_EQ(fakeReluMatmuls() - relus, 0u) << run;
    for (const std::string& k : launchedKernels()) EXPECT_EQ(k.find("add"), std::string::npos) << run << ": " << k;
    near(z, matmul(x, w) + b, "x @ w + b, " + run);
  }
  hal::deviceContext(kCuda).synchronize();
  const Stats s = stats();
  EXPECT_EQ(s.compile_failures + s.region_compile_failures, 0u) << s.str();
  EXPECT_GE(s.mixed_runs, static_cast<uint64_t>(kRuns - 1)) << s.str();
  EXPECT_GT(s.region_launches, 0u) << s.str();
  EXPECT_EQ(rejectedLaunches(), 0u);
}

TEST_F(CudaCompiled, CompiledStepsLaunchTheirKernelsAsThePtxDeclaresThem) {
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  const size_t launchesBefore = compiledLaunches(), rejectedBefore = rejectedLaunches();
  const uint64_t deviceLaunchesBefore = hal::deviceContext(kCuda).counters().launches;
  runCudaSteps(kCuda, 5);  // the fake computes no compiled kernel: values are not checked here
  hal::deviceContext(kCuda).synchronize();
  const Stats s = stats();
  EXPECT_EQ(s.compile_failures + s.region_compile_failures, 0u) << s.str();
  // The step's matmul runs between compiled regions (cuBLASLt's), so the
  // steps run as mixed runs: compiled regions around it.
  EXPECT_GE(s.mixed_runs, 3u) << s.str();
  // Every kernel of every compiled run reached the driver, with parameters
  // of the PTX's sizes and pointers into live device memory.
  EXPECT_EQ(rejectedLaunches(), rejectedBefore);
  EXPECT_GT(compiledLaunches() - launchesBefore, s.region_launches) << "several kernels a region";
  EXPECT_GE(hal::deviceContext(kCuda).counters().launches - deviceLaunchesBefore, s.kernel_launches);
}

/// A matmul (cuBLASLt's, between compiled regions) and the element-wise
/// work around it at batch sizes that keep changing, with trip counts that
/// never repeat (no trace recurs, so its recurring body's regions are what
/// compiles): past KILN_MAX_SHAPES (2) batch sizes the body's regions get
/// dynamic-shape PTX kernels, which launch for the later sizes; the fake
/// checks each launch's parameters against the PTX and live memory.
TEST_F(CudaCompiled, RegionsAtManyBatchSizesLaunchDynamicShapeKernels) {
  JitScope sync(JitMode::Sync, 2);
  Settings saved = settings(), few = saved;
  few.max_shapes = 2;
  set_settings(few);
  const Tensor w = from_vector(ramp(16 * 16, -1.0f, 0.01f), {16, 16}).to(kCuda);
  const Tensor bias = from_vector(ramp(16, 0.1f, 0.02f), {16}).to(kCuda);
  const size_t rejectedBefore = rejectedLaunches();
  reset_stats();
  const std::vector<std::pair<int, int64_t>> runs = {{5, 4}, {7, 1}, {6, 3}, {9, 2}, {4, 5}, {8, 3}};
  uint64_t launchesLater = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const uint64_t before = stats().region_launches;
    Tensor h = from_vector(ramp(static_cast<size_t>(runs[i].second) * 16, -0.5f, 0.03f), {runs[i].second, 16}).to(kCuda);
    for (int t = 0; t < runs[i].first; ++t) h = tanh(matmul(h, w) + bias) * 0.5f;
    h.to(Device::cpu()).to_vector<float>();
    step();
    if (i >= 3) launchesLater += stats().region_launches - before;
  }
  hal::deviceContext(kCuda).synchronize();
  const Stats s = stats();
  set_settings(saved);
  EXPECT_EQ(s.compile_failures + s.region_compile_failures, 0u) << s.str();
  EXPECT_GE(s.compiles, 1u) << "the dynamic-shape region kernel: " << s.str();
  EXPECT_GT(launchesLater, 0u) << "batch sizes past the second ran the dynamic kernel: " << s.str();
  EXPECT_EQ(rejectedLaunches(), rejectedBefore);
}

/// Settings::cuda_graphs (KILN_CUDA_GRAPHS) for the scope: read when a
/// compiled trace is loaded.
class ScopedGraphs {
 public:
  explicit ScopedGraphs(bool on) : saved_(settings().cuda_graphs) { set(on); }
  ~ScopedGraphs() { set(saved_); }

 private:
  static void set(bool on) {
    Settings s = settings();
    s.cuda_graphs = on;
    set_settings(s);
  }
  bool saved_;
};

/// Runs one elementwise trace (a whole-trace kernel of several launches:
/// the softmax's row reductions and the elementwise work around them) on
/// `runs` fresh [rows, 12] inputs, all kept alive until the end, so each
/// run's input is at another address and the kernel's buffers move.
void runMovingBuffers(int rows, int runs) {
  std::vector<Tensor> keep;
  for (int i = 0; i < runs; ++i) {
    Tensor x = from_vector(ramp(static_cast<size_t>(rows) * 12, -1.0f + 0.1f * static_cast<float>(i), 0.03f),
                           {rows, 12})
                   .to(kCuda);
    keep.push_back(x);
    Tensor y = softmax(tanh(x * 2.0f + 1.0f), 1) + x;
    y.to(Device::cpu()).to_vector<float>();
  }
}

TEST_F(CudaCompiled, RepeatedRunsOfACompiledTraceLaunchOneGraphUpdatedWhenBuffersMove) {
  JitScope sync(JitMode::Sync, 1);
  ScopedGraphs graphs(true);
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  ctx.synchronize();
  const hal::DeviceCounters before = ctx.counters();
  const size_t kernelCalls = calls("cuLaunchKernel"), graphCalls = fakeGraphLaunches(),
               nodeCalls = calls("cuGraphAddKernelNode_v2"), setCalls = calls("cuGraphExecKernelNodeSetParams_v2"),
               launchesBefore = compiledLaunches(), rejectedBefore = rejectedLaunches();
  reset_stats();  // (device counters are not reset: they count since the process started)
  const uint64_t graphLaunchesBefore = stats().device_graph_launches;
  constexpr int kRuns = 5;
  runMovingBuffers(7, kRuns);
  ctx.synchronize();
  const Stats s = stats();
  ASSERT_EQ(s.compiles, 1u) << s.str();
  ASSERT_EQ(s.compiled_runs, static_cast<uint64_t>(kRuns)) << s.str();
  const size_t kernels = s.kernel_launches / kRuns;
  ASSERT_GE(kernels, 2u) << s.str();
  const hal::DeviceCounters after = ctx.counters();
  // The first run launches kernel by kernel; the second builds the graph
  // (one node a kernel) and every later run is one graph launch.
  EXPECT_EQ(after.graphs_built - before.graphs_built, 1u);
  EXPECT_EQ(after.graph_launches - before.graph_launches, static_cast<uint64_t>(kRuns - 1));
  EXPECT_EQ(calls("cuGraphAddKernelNode_v2") - nodeCalls, kernels);
  EXPECT_EQ(fakeGraphLaunches() - graphCalls, static_cast<size_t>(kRuns - 1)) << "graph launches the fake ran";
  // Tier-0 copies launch kernels too; the compiled trace's own launches
  // went through the graph after the first run.
  EXPECT_EQ(compiledLaunches() - launchesBefore, kernels * kRuns);
  EXPECT_LE(calls("cuLaunchKernel") - kernelCalls, kernels + (after.launches - before.launches - kernels * kRuns));
  // Each run's input is elsewhere, so each graph launch first updated the
  // nodes that read it; the fake checked every node's pointers at each
  // launch against the live allocations. (The inputs all stay alive, so a
  // stale pointer would pass that check: that the updated parameters are
  // the right ones is GraphLaunchesPassTheParametersKernelLaunchesDo's.)
  EXPECT_EQ(after.graph_updates - before.graph_updates, static_cast<uint64_t>(kRuns - 2));
  EXPECT_GE(calls("cuGraphExecKernelNodeSetParams_v2") - setCalls, static_cast<size_t>(kRuns - 2));
  EXPECT_EQ(rejectedLaunches(), rejectedBefore);
  EXPECT_EQ(s.device_graph_launches - graphLaunchesBefore, static_cast<uint64_t>(kRuns - 1)) << s.str();
  EXPECT_EQ(device_stats(kCuda).graph_launches, after.graph_launches);
}

TEST_F(CudaCompiled, GraphsOffLaunchKernelByKernel) {
  JitScope sync(JitMode::Sync, 1);
  ScopedGraphs graphs(false);
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  ctx.synchronize();
  const hal::DeviceCounters before = ctx.counters();
  const size_t graphCalls = calls("cuGraphLaunch"), launchesBefore = compiledLaunches(),
               rejectedBefore = rejectedLaunches();
  reset_stats();
  const uint64_t graphLaunchesBefore = stats().device_graph_launches;
  runMovingBuffers(9, 4);  // another shape: another trace, loaded with graphs off
  ctx.synchronize();
  const Stats s = stats();
  ASSERT_EQ(s.compiled_runs, 4u) << s.str();
  EXPECT_EQ(ctx.counters().graphs_built, before.graphs_built);
  EXPECT_EQ(calls("cuGraphLaunch"), graphCalls);
  EXPECT_EQ(compiledLaunches() - launchesBefore, s.kernel_launches);
  EXPECT_EQ(rejectedLaunches(), rejectedBefore);
  EXPECT_EQ(s.device_graph_launches, graphLaunchesBefore) << s.str();
}

/// Two kernels of a compiled trace (names no tier-0 kernel has), declared
/// as the nvptx pipeline declares them; their bodies do nothing (the fake
/// computes no compiled kernel).
constexpr char kTwoKernelsPtx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry kiln_test_first(.param .u64 .ptr .global .align 16 in, .param .u64 .ptr .global .align 16 out)
{ ret; }
.visible .entry kiln_test_second(.param .u64 .ptr .global .align 16 out, .param .u64 .ptr .global .align 16 tmp,
                                 .param .u64 n)
{ ret; }
)";

/// The compiled launches one launch of `exe` with `args` makes on `ctx`.
std::vector<std::string> launchLines(hal::DeviceContext& ctx, const exec::Executable& exe, void** args) {
  fakeHook<void()>("kiln_fake_cuda_clear_log")();
  exe.launch(args);
  ctx.synchronize();
  return fakeLogLines("compiled-launch ");  // "compiled-launch <entry> grid <x> <y> <z> <parameter values>"
}

/// `image` loaded twice on `ctx`: launching as a CUDA graph (from its
/// second launch) and kernel by kernel (KILN_CUDA_GRAPHS=0).
std::pair<std::shared_ptr<exec::Executable>, std::shared_ptr<exec::Executable>> loadWithAndWithoutGraphs(
    hal::DeviceContext& ctx, const exec::KernelImage& image) {
  std::string error;
  std::shared_ptr<exec::Executable> graphed, direct;
  {
    ScopedGraphs on(true);
    graphed = ctx.kernelLoader()->load(image, &error);
  }
  EXPECT_TRUE(graphed) << error;
  {
    ScopedGraphs off(false);
    direct = ctx.kernelLoader()->load(image, &error);
  }
  EXPECT_TRUE(direct) << error;
  return {graphed, direct};
}

TEST_F(CudaCompiled, GraphLaunchesPassTheParametersKernelLaunchesDo) {
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  exec::KernelImage image;
  image.format = exec::BinaryFormat::Ptx;
  image.object = kTwoKernelsPtx;
  image.inputs = 1;
  image.outputs = 1;
  image.scratchBytes = 256;
  image.kernelCount = 2;
  using Arg = exec::DispatchArg;
  image.dispatches = {{"kiln_test_first", {2, 1, 1}, {64, 1, 1}, {{Arg::Kind::Input, 0}, {Arg::Kind::Output, 0}}},
                      {"kiln_test_second",
                       {1, 1, 1},
                       {32, 1, 1},
                       {{Arg::Kind::Output, 0}, {Arg::Kind::Scratch, 128}, {Arg::Kind::Index, 7}}}};
  auto [graphed, direct] = loadWithAndWithoutGraphs(ctx, image);
  ASSERT_TRUE(graphed && direct);
  hal::Allocator& memory = ctx.allocator();
  std::vector<void*> blocks;
  auto block = [&] { return blocks.emplace_back(memory.allocate(256)); };
  void* a[3] = {block(), block(), block()};  // input, output, scratch
  void* b[3] = {block(), block(), block()};
  void* c[3] = {a[0], block(), a[2]};  // only the output elsewhere
  const hal::DeviceCounters before = ctx.counters();
  const size_t rejectedBefore = rejectedLaunches();
  // First launch kernel by kernel, then the graph: built, launched as it
  // is, updated when the buffers move, updated back.
  for (void** args : {a, a, a, b, b, a, c}) {
    const std::vector<std::string> viaGraph = launchLines(ctx, *graphed, args),
                                   oneByOne = launchLines(ctx, *direct, args);
    ASSERT_EQ(oneByOne.size(), 2u);
    EXPECT_EQ(viaGraph, oneByOne);
  }
  const hal::DeviceCounters after = ctx.counters();
  EXPECT_EQ(after.graphs_built - before.graphs_built, 1u);
  EXPECT_EQ(after.graph_launches - before.graph_launches, 6u);
  EXPECT_EQ(after.graph_updates - before.graph_updates, 3u);  // to b, back to a, to c
  EXPECT_EQ(after.launches - before.launches, 2u * 14);       // two kernels, fourteen launches
  EXPECT_EQ(rejectedLaunches(), rejectedBefore);
  graphed.reset();
  direct.reset();
  for (void* p : blocks) memory.deallocate(p, 256);
}

/// A dynamic-shape kernel's launch as the nvptx pipeline declares it: its
/// output, a size and a pointer into the scratch buffer.
constexpr char kRowsKernelPtx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry kiln_test_rows(.param .u64 .ptr .global .align 16 out, .param .u64 n,
                               .param .u64 .ptr .global .align 16 tmp)
{ ret; }
)";

/// A dynamic-shape kernel's grid, size argument and scratch offset come
/// from its launch program at each launch, through a graph (its nodes
/// updated when they change) as kernel by kernel; a launch whose grid is
/// empty (size 0) is skipped.
TEST_F(CudaCompiled, DynamicShapeLaunchesComputeTheirGridsAndArgumentsFromTheSizes) {
  hal::DeviceContext& ctx = hal::deviceContext(kCuda);
  exec::KernelImage image;
  image.format = exec::BinaryFormat::Ptx;
  image.object = kRowsKernelPtx;
  image.inputs = 1;
  image.outputs = 1;
  image.kernelCount = 1;
  image.dynamicSizes = 1;
  using Arg = exec::DispatchArg;
  using Op = exec::LaunchExpr::Op;
  // grid = (n + 255) / 256, the scratch at 4 n bytes.
  image.launchProgram = {{Op::Size, 0}, {Op::Constant, 255}, {Op::Add, 0, 1}, {Op::Constant, 256},
                         {Op::DivS, 2, 3},  {Op::Constant, 4},   {Op::Mul, 0, 5}};
  exec::KernelDispatch d{"kiln_test_rows", {1, 1, 1}, {256, 1, 1},
                         {{Arg::Kind::Output, 0}, {Arg::Kind::Value, 0}, {Arg::Kind::ScratchAt, 6}}};
  d.gridSteps = {4, -1, -1};
  image.dispatches = {d};
  auto [graphed, direct] = loadWithAndWithoutGraphs(ctx, image);
  ASSERT_TRUE(graphed && direct);
  // 4 bytes of scratch per row (the kernel cache sets this from the entry).
  graphed->dynamicScratch = direct->dynamicScratch = {4, 1, 0};
  hal::Allocator& memory = ctx.allocator();
  void* in = memory.allocate(256);
  void* out = memory.allocate(256);
  void* scratch = memory.allocate(8192);
  const hal::DeviceCounters before = ctx.counters();
  const size_t rejectedBefore = rejectedLaunches();
  for (int64_t n : {1000, 1000, 5, 0, 300, 1000}) {
    SCOPED_TRACE(n);
    void* args[4] = {in, out, scratch, &n};
    const std::vector<std::vector<std::string>> lines = {launchLines(ctx, *graphed, args),
                                                         launchLines(ctx, *direct, args)};
    EXPECT_EQ(lines[0], lines[1]) << "a graph launches what kernel-by-kernel launches do";
    if (n == 0) {
      EXPECT_TRUE(lines[1].empty());
      continue;
    }
    const std::string want = "compiled-launch kiln_test_rows grid " + std::to_string((n + 255) / 256) + " 1 1 " +
                             std::to_string(reinterpret_cast<uint64_t>(out)) + " " + std::to_string(n) + " " +
                             std::to_string(reinterpret_cast<uint64_t>(scratch) + 4 * static_cast<uint64_t>(n));
    ASSERT_EQ(lines[1].size(), 1u);
    EXPECT_EQ(lines[1][0], want);
  }
  const hal::DeviceCounters after = ctx.counters();
  // A program that points past the scratch its sizes give (a damaged
  // entry) fails the launch before any kernel runs.
  direct->dynamicScratch.clear();
  int64_t n = 10;
  void* args[4] = {in, out, scratch, &n};
  expectError([&] { direct->launch(args); }, {"kiln_test_rows", "40 bytes into 0 bytes of scratch"});
  EXPECT_EQ(ctx.counters().launches, after.launches);
  EXPECT_EQ(after.graphs_built - before.graphs_built, 1u);
  EXPECT_EQ(after.graph_launches - before.graph_launches, 4u);  // the second run on, but the empty one
  EXPECT_EQ(after.graph_updates - before.graph_updates, 3u);   // to 5, to 300, back to 1000
  EXPECT_EQ(rejectedLaunches(), rejectedBefore);
  graphed.reset();
  direct.reset();
  for (void* p : {in, out, scratch}) memory.deallocate(p, p == scratch ? 8192 : 256);
}

TEST_F(CudaCompiled, ASecondProcessReplaysThePtxFromTheDiskCache) {
  char tmpl[] = "/tmp/kiln-cuda-cache-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  auto child = [&](const std::string& role, const std::string& env) {
    const std::string cmd = "KILN_TEST_CUDA_ROLE=" + role + " KILN_CACHE=on KILN_CACHE_DIR=" + dir +
                            " KILN_JIT_THRESHOLD=2 " + env + " '" +
                            std::filesystem::read_symlink("/proc/self/exe").string() +
                            "' --gtest_filter=CudaCompiledChild.Main >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  };
  EXPECT_EQ(child("compile", "KILN_JIT=sync"), 0);
  EXPECT_EQ(child("replay", "KILN_JIT=replay KILN_REPLAY_STRICT=1"), 0);
  std::filesystem::remove_all(dir);
}

/// The child side of ASecondProcessReplaysThePtxFromTheDiskCache.
TEST(CudaCompiledChild, Main) {
  const char* role = std::getenv("KILN_TEST_CUDA_ROLE");
  if (!role) GTEST_SKIP() << "run by CudaCompiled.ASecondProcessReplaysThePtxFromTheDiskCache";
  reset_stats();
  const size_t launchesBefore = compiledLaunches();
  runCudaSteps(kCuda, 4);
  hal::deviceContext(kCuda).synchronize();
  const Stats s = stats();
  if (std::string(role) == "compile") {
    EXPECT_EQ(s.compile_failures + s.region_compile_failures, 0u) << s.str();
    EXPECT_GE(s.cache_stores, 1u) << s.str();
  } else {
    EXPECT_EQ(s.compiles + s.region_compiles, 0u) << s.str();
    EXPECT_GE(s.cache_disk_hits, 1u) << s.str();
    EXPECT_GE(s.mixed_runs, 3u) << s.str();  // compiled regions around the matmul
    EXPECT_FALSE(exec::compilerLoaded()) << "replay loaded the compiler";
  }
  EXPECT_GT(compiledLaunches() - launchesBefore, s.region_launches) << s.str();
}

TEST(CudaNoDriver, DeviceCountIsZeroAndUseSaysWhatIsMissing) {
  EXPECT_EQ(device_count(Device::CUDA), 0);
  expectError([] { zeros({2}, DType::f32, Device::cuda(0)); },
              {"cuda:0", "no driver", "not found", "KILN_CUDA_LIBRARY", "libcuda.so.1"});
  expectError([] { from_vector(std::vector<float>{1, 2}, {2}).to(Device::cuda(0)); }, {"cuda:0", "KILN_CUDA_LIBRARY"});
  expectError([] { set_default_device(Device::parse("cuda:0")); }, {"cuda:0", "KILN_CUDA_LIBRARY"});
}

}  // namespace
}  // namespace kiln
