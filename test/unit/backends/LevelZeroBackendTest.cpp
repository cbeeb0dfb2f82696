// The Level Zero backend on the test driver over OpenCL
// (test/level_zero_driver, loaded through KILN_LEVEL_ZERO_LIBRARY by ctest,
// with OCL_ICD_VENDORS naming Intel's OpenCL CPU runtime from
// scripts/setup-opencl.sh): devices, memory, streams, tensors, DLPack, and
// the tier-0 op library whose embedded SPIR-V kernels really run there.
// LevelZeroOps.EveryOpMatchesTheCpu is the op-by-op differential test:
// every elementwise op, cast, reduction, index op, matmul and leaf on every
// dtype it accepts, on level_zero:0 against the CPU interpreter:
//   - integers and bools: bit-exact;
//   - floats, exact ops (+ - * /, sqrt, comparisons, min/max, rounding,
//     casts, copies, index ops): equal (NaN matches NaN);
//   - floats, transcendental ops (exp, log, tanh, sigmoid, sin, cos, pow,
//     erf, gelu, ...): OpenCL's builtins, within 4e-6 * max(1, |cpu|) for
//     f32, 1e-13 * max(1, |cpu|) for f64, one half ulp-ish (1e-2 relative)
//     for f16/bf16;
//   - sums, means, products and matmuls: the same order of operations as
//     the interpreter is not promised: 1e-5 relative (f32), 1e-12 (f64).
// Without the OpenCL runtime or the driver each test skips, saying why.
// LevelZeroNoDriver and LevelZeroDiscovery run in processes of their own
// (a loader that does not exist; the driver told to fail discovery).
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>
#include <functional>
#include <future>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln_c.h"
#include "runtime/backends/Hal.h"
#include "runtime/backends/gpu/CachingAllocator.h"
#include "runtime/capi/DLPackVersioned.h"
#include "runtime/exec/Engine.h"
#include "runtime/exec/Executable.h"
#include "test/unit/exec/JitScope.h"
#include "test/unit/exec/RandomOpChain.h"
#include "test/unit/trace/ExpectError.h"

namespace kiln {
namespace {

const Device kZe = Device::level_zero(0);

std::vector<float> ramp(size_t n, float start = -3.0f, float step = 0.37f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

#define REQUIRE_LEVEL_ZERO()                                                                                     \
  if (device_count(Device::LevelZero) == 0)                                                                     \
  GTEST_SKIP() << "no Level Zero device: " << hal::unavailableReason(Device::LevelZero)                          \
               << " (ctest points KILN_LEVEL_ZERO_LIBRARY at libkiln_test_level_zero.so and OCL_ICD_VENDORS at " \
                  "the ICD of scripts/setup-opencl.sh)"

class LevelZeroTest : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_LEVEL_ZERO(); }
  JitScope jit_{JitMode::Off};  // tier 0 only (LevelZeroTier1 compiles)
};

TEST_F(LevelZeroTest, DeviceIsTheTestDriversAndNamed) {
  hal::DeviceContext& ctx = hal::deviceContext(kZe);
  EXPECT_NE(ctx.name().find("Kiln test device (OpenCL"), std::string::npos) << ctx.name();
  EXPECT_FALSE(ctx.hostAccessible());
  // Hot traces compile to SPIR-V for this device: its name and driver are in
  // the fingerprint kernels are cached under.
  ASSERT_TRUE(ctx.compileTarget().has_value());
  EXPECT_EQ(ctx.compileTarget()->kind, exec::CompileTarget::Kind::Spirv);
  EXPECT_NE(ctx.compileTarget()->fingerprint().find("device=Kiln test device (OpenCL"), std::string::npos);
  EXPECT_NE(ctx.compileTarget()->fingerprint().find(" driver 1"), std::string::npos);
  ASSERT_NE(ctx.kernelLoader(), nullptr);
  EXPECT_EQ(ctx.kernelLoader()->fingerprint(), ctx.compileTarget()->fingerprint());
  EXPECT_EQ(device_count(Device::LevelZero), 1);
  expectError([] { hal::deviceContext(Device::level_zero(1)); }, {"level_zero:1", "1 device"});
  EXPECT_EQ(Device::parse("level_zero:0"), kZe);
}

TEST_F(LevelZeroTest, FreedBlockIsReusedOnlyAfterTheStreamWorkBeforeTheFree) {
  hal::DeviceContext& ctx = hal::deviceContext(kZe);
  hal::Allocator& a = ctx.allocator();
  ctx.synchronize();
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  ctx.defaultStream().hostCall([opened] { opened.wait(); });  // holds the stream
  void* first = a.allocate(1000);
  a.deallocate(first, 1000);
  void* second = a.allocate(1000);
  EXPECT_NE(second, first) << "a block was handed out again while stream work before its free was pending";
  a.deallocate(second, 1000);
  gate.set_value();
  ctx.synchronize();
  const uint64_t hits = a.stats().cache_hits;
  void* third = a.allocate(1000);
  EXPECT_GT(a.stats().cache_hits, hits);
  a.deallocate(third, 1000);
}

TEST_F(LevelZeroTest, BlocksSplitAndMergeInsideSegmentsAndEmptyCacheReturnsThem) {
  hal::DeviceContext& ctx = hal::deviceContext(kZe);
  auto& a = dynamic_cast<hal::CachingAllocator&>(ctx.allocator());
  ctx.synchronize();
  a.emptyCache();
  const size_t base = a.segmentCount();
  std::vector<void*> quarter;
  for (int i = 0; i < 4; ++i) quarter.push_back(a.allocate(256 << 10));
  EXPECT_EQ(a.segmentCount(), base + 1) << "four 256 KiB blocks are split out of one 2 MiB segment";
  for (void* p : quarter) a.deallocate(p, 256 << 10);
  ctx.synchronize();
  a.emptyCache();
  EXPECT_EQ(a.segmentCount(), base) << "the merged segment goes back to the driver";
}

TEST_F(LevelZeroTest, OutOfMemoryEmptiesTheCacheRetriesOnceThenSaysWhatItNeeded) {
  // ctest limits the test driver's memory (KILN_TEST_ZE_MEMORY_LIMIT=1 GiB).
  hal::Allocator& a = hal::deviceContext(kZe).allocator();
  const uint64_t retries = a.stats().retries;
  expectError([&] { a.allocate(std::size_t{3} << 30); }, {"level_zero:0", "out of memory", "MiB on the device"});
  EXPECT_EQ(a.stats().retries, retries + 1);
}

TEST_F(LevelZeroTest, TensorsRoundTripAndCopiesAreCounted) {
  const auto before = device_stats(kZe);
  const size_t n = (3u << 20) / 4 + 3;
  std::vector<float> v = ramp(n);
  Tensor d = from_vector(v, {static_cast<int64_t>(n)}).to(kZe);
  EXPECT_EQ(d.device(), kZe);
  Tensor back = d.to(Device::cpu());
  EXPECT_EQ(back.to_vector<float>(), v);
  const auto after = device_stats(kZe);
  EXPECT_GE(after.copy_bytes_to_device - before.copy_bytes_to_device, n * 4);
  EXPECT_GE(after.copy_bytes_to_host - before.copy_bytes_to_host, n * 4);
  expectError([&] { d.data(); }, {"level_zero:0", "to(Device::cpu())"});
}

TEST_F(LevelZeroTest, StridedViewsBroadcastingAndConcatRunTheSpirvKernels) {
  Tensor ac = from_vector(ramp(24), {2, 3, 4}), bc = from_vector(ramp(4, 1.0f, 0.5f), {4});
  Tensor ag = ac.to(kZe), bg = bc.to(kZe);
  const uint64_t launches = device_stats(kZe).kernel_launches;
  auto same = [](const Tensor& got, const Tensor& want, const char* what) {
    EXPECT_EQ(got.device(), kZe) << what;
    EXPECT_EQ(got.shape(), want.shape()) << what;
    EXPECT_EQ(got.to(Device::cpu()).to_vector<float>(), want.to_vector<float>()) << what;
  };
  same(add(ag, bg), add(ac, bc), "broadcast add");
  same(mul(permute(ag, {2, 0, 1}), 2.0), mul(permute(ac, {2, 0, 1}), 2.0), "permuted");
  same(neg(slice(ag, 2, 1, 4, 2)), neg(slice(ac, 2, 1, 4, 2)), "stepped slice");
  same(permute(ag, {1, 2, 0}).contiguous(), permute(ac, {1, 2, 0}).contiguous(), "strided copy");
  same(concat({ag, mul(ag, 3.0)}, 1), concat({ac, mul(ac, 3.0)}, 1), "concat (copy into strided)");
  same(zeros({3, 5}, DType::f32, kZe), zeros({3, 5}), "fill");
  same(full({7}, 2.5, DType::f32, kZe), full({7}, 2.5), "fill value");
  EXPECT_EQ(full({3}, int64_t{-5}, DType::i64, kZe).to(Device::cpu()).to_vector<int64_t>(),
            (std::vector<int64_t>{-5, -5, -5}));
  EXPECT_GE(device_stats(kZe).kernel_launches, launches + 8);
}

// Loops that run zero times: a reduction over an axis of size 1 folds no
// element after the first, a matmul with K = 0 adds nothing. (SPIR-V left
// such loops' results undefined: sums over a size-1 axis came back as 0.)
TEST_F(LevelZeroTest, ReductionsOverAxesOfSizeOneAndEmptyDotProducts) {
  Tensor rc = from_vector(ramp(3, 10.0f), {1, 3}), cc = from_vector(ramp(3, 10.0f), {3, 1});
  Tensor rg = rc.to(kZe), cg = cc.to(kZe);
  auto same = [](const Tensor& got, const Tensor& want, const char* what) {
    EXPECT_EQ(got.shape(), want.shape()) << what;
    EXPECT_EQ(got.to(Device::cpu()).to_vector<float>(), want.to_vector<float>()) << what;
  };
  same(sum(rg, {0}, false), sum(rc, {0}, false), "sum over a leading size-1 axis");
  same(sum(cg, {1}, true), sum(cc, {1}, true), "sum over a trailing size-1 axis");
  same(max(rg, {0}, false), max(rc, {0}, false), "max");
  same(mean(cg, {1}, false), mean(cc, {1}, false), "mean");
  EXPECT_EQ(argmax(rg, 0).to(Device::cpu()).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  Tensor a = zeros({2, 0}, DType::f32, kZe), b = zeros({0, 3}, DType::f32, kZe);
  same(matmul(add(a, 1.0), add(b, 1.0)), zeros({2, 3}), "matmul with K = 0");
}

TEST_F(LevelZeroTest, MixedDevicesAreAnErrorNamingBothAndTheFix) {
  Tensor c = from_vector(ramp(4), {4});
  Tensor g = c.to(kZe);
  expectError([&] { add(c, g); }, {"cpu:0", "level_zero:0", "to("});
}

// conv2d runs as padding and im2col copies plus a batched matmul of the
// tier-0 kernels: strides, padding, dilation, groups, bias, a weight whose
// kernel axes are not dense, f64, and through autograd.
TEST_F(LevelZeroTest, Conv2dMatchesTheCpu) {
  struct Case {
    Shape x, w;
    Conv2dOptions options;
    bool bias, permutedWeight;
    DType dtype;
  };
  const Case cases[] = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, {}, false, false, DType::f32},
      {{1, 4, 7, 7}, {6, 2, 3, 2}, {{2, 1}, {1, 2}, {1, 1}, 2}, true, false, DType::f32},
      {{2, 2, 9, 8}, {3, 2, 2, 3}, {{1, 2}, {2, 1}, {2, 2}, 1}, false, true, DType::f32},
      {{1, 2, 5, 5}, {2, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, false, DType::f64},
  };
  for (const Case& c : cases) {
    Tensor x = cast(from_vector(ramp(static_cast<size_t>(c.x.numel()), -1.0f, 0.013f), c.x), c.dtype);
    Tensor w = cast(from_vector(ramp(static_cast<size_t>(c.w.numel()), 0.5f, -0.021f), c.w), c.dtype);
    if (c.permutedWeight)  // the same extents, kh and kw strides swapped
      w = permute(cast(from_vector(ramp(static_cast<size_t>(c.w.numel())), {c.w[0], c.w[1], c.w[3], c.w[2]}), c.dtype),
                  {0, 1, 3, 2});
    Tensor b = c.bias ? cast(from_vector(ramp(static_cast<size_t>(c.w[0]), 0.1f, 0.2f), {c.w[0]}), c.dtype) : Tensor{};
    Tensor want = conv2d(x, w, b, c.options);
    Tensor got = conv2d(x.to(kZe), w.to(kZe), c.bias ? b.to(kZe) : Tensor{}, c.options);
    EXPECT_EQ(got.device(), kZe);
    ASSERT_EQ(got.shape(), want.shape()) << c.x.str() << " " << c.w.str();
    std::vector<double> g = got.to(Device::cpu()).to_vector<double>(), r = want.to_vector<double>();
    for (size_t i = 0; i < r.size(); ++i)
      ASSERT_NEAR(g[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << c.x.str() << " " << c.w.str() << " element " << i;
  }
  // The weight's gradient (a convolution too) on the device.
  Tensor x = from_vector(ramp(2 * 3 * 5 * 5), {2, 3, 5, 5});
  Tensor w = from_vector(ramp(4 * 3 * 3 * 3, 0.2f, 0.01f), {4, 3, 3, 3}).requires_grad();
  Tensor wz = w.detach().to(kZe).requires_grad();
  Tensor want = grad(sum(conv2d(x, w, {}, {{1, 1}, {1, 1}})), {w})[0];
  Tensor got = grad(sum(conv2d(x.to(kZe), wz, {}, {{1, 1}, {1, 1}})), {wz})[0];
  std::vector<float> g = got.to(Device::cpu()).to_vector<float>(), r = want.to_vector<float>();
  for (size_t i = 0; i < r.size(); ++i) ASSERT_NEAR(g[i], r[i], 1e-3f * (1 + std::abs(r[i]))) << "weight gradient " << i;
}

TEST_F(LevelZeroTest, DLPackCarriesLevelZeroTensorsAsOneApiWithoutCopies) {
  const float values[6] = {1, -2, 3, -4, 5, -6};
  const int64_t dims[2] = {2, 3};
  kiln_tensor host = nullptr, onDevice = nullptr, back = nullptr, refused = nullptr;
  ASSERT_EQ(kiln_tensor_from_host(values, sizeof values, KILN_DTYPE_F32, dims, 2, &host), KILN_OK);
  ASSERT_EQ(kiln_tensor_to_device(host, kiln_device{KILN_DEVICE_LEVEL_ZERO, 0}, &onDevice), KILN_OK)
      << kiln_last_error();
  DLManagedTensor* dl = nullptr;
  ASSERT_EQ(kiln_tensor_to_dlpack(onDevice, &dl), KILN_OK) << kiln_last_error();
  EXPECT_EQ(dl->dl_tensor.device.device_type, capi::kDLOneAPIDevice);
  EXPECT_EQ(dl->dl_tensor.device.device_id, 0);
  void* exported = dl->dl_tensor.data;
  ASSERT_EQ(kiln_tensor_from_dlpack(dl, &back), KILN_OK) << kiln_last_error();
  kiln_device where{};
  ASSERT_EQ(kiln_tensor_device(back, &where), KILN_OK);
  EXPECT_EQ(where.kind, KILN_DEVICE_LEVEL_ZERO);
  DLManagedTensor* again = nullptr;
  ASSERT_EQ(kiln_tensor_to_dlpack(back, &again), KILN_OK);
  EXPECT_EQ(again->dl_tensor.data, exported) << "no copy either way";
  again->deleter(again);
  float out[6] = {};
  ASSERT_EQ(kiln_tensor_copy_to_host(back, out, sizeof out, KILN_DTYPE_F32), KILN_OK) << kiln_last_error();
  EXPECT_EQ(std::vector<float>(out, out + 6), std::vector<float>(values, values + 6));
  DLManagedTensor foreign{};
  int64_t shape[1] = {2};
  foreign.dl_tensor.data = exported;
  foreign.dl_tensor.device = DLDevice{capi::kDLOneAPIDevice, 5};
  foreign.dl_tensor.ndim = 1;
  foreign.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  foreign.dl_tensor.shape = shape;
  EXPECT_EQ(kiln_tensor_from_dlpack(&foreign, &refused), KILN_ERROR_DEVICE);
  EXPECT_NE(std::string(kiln_last_error()).find("oneAPI device 5"), std::string::npos) << kiln_last_error();
  kiln_tensor_release(back);
  kiln_tensor_release(onDevice);
  kiln_tensor_release(host);
}

// ---------------------------------------------------------------------------
// The op-by-op differential test.

constexpr DType kAllTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64,
                               DType::i32, DType::i8,  DType::u8,  DType::boolean};

enum class Bound { Exact, Transcendental, Accumulated };

/// Inputs of `t` with negatives, zeros, fractions (floats) and a NaN-free
/// range the integer ops keep in bounds.
Tensor input(DType t, int64_t rows, int64_t cols, int salt) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) {
    const int k = static_cast<int>((i * 7 + static_cast<size_t>(salt) * 13) % 23) - 11;
    v[i] = is_floating(t) ? static_cast<float>(k) * 0.37f : static_cast<float>(k);
  }
  if (t == DType::u8) for (float& x : v) x = std::fabs(x);
  return cast(from_vector(v, {rows, cols}), t);
}

double tolerance(Bound b, DType t, double want) {
  if (b == Bound::Exact || !is_floating(t)) return 0;
  const double scale = std::max(1.0, std::fabs(want));
  if (t == DType::f16 || t == DType::bf16) return 1e-2 * scale;
  if (b == Bound::Transcendental) return (t == DType::f64 ? 1e-13 : 4e-6) * scale;
  return (t == DType::f64 ? 1e-12 : 1e-5) * scale;
}

struct OpCase {
  std::string name;
  Bound bound;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  /// Run by the device's op library between compiled regions on GPUs
  /// (RegionBoundaries): a compiling mode leaves it interpreted.
  bool library = false;
};

class LevelZeroOps : public LevelZeroTest {};

std::vector<OpCase> opCases() {
  using T = const Tensor&;
  return {
      {"neg", Bound::Exact, [](T a, T) { return neg(a); }},
      {"abs", Bound::Exact, [](T a, T) { return abs(a); }},
      {"relu", Bound::Exact, [](T a, T) { return relu(a); }},
      {"floor", Bound::Exact, [](T a, T) { return floor(a); }},
      {"ceil", Bound::Exact, [](T a, T) { return ceil(a); }},
      {"round", Bound::Exact, [](T a, T) { return round(a); }},
      {"sign", Bound::Exact, [](T a, T) { return sign(a); }},
      {"square", Bound::Exact, [](T a, T) { return square(a); }},
      {"sqrt", Bound::Exact, [](T a, T) { return sqrt(a); }},
      {"reciprocal", Bound::Exact, [](T a, T) { return reciprocal(a); }},
      {"logical_not", Bound::Exact, [](T a, T) { return logical_not(a); }},
      {"isnan", Bound::Exact, [](T a, T) { return isnan(div(a, a)); }},
      {"exp", Bound::Transcendental, [](T a, T) { return exp(a); }},
      {"expm1", Bound::Transcendental, [](T a, T) { return expm1(a); }},
      {"log", Bound::Transcendental, [](T a, T) { return log(a); }},
      {"log1p", Bound::Transcendental, [](T a, T) { return log1p(a); }},
      {"rsqrt", Bound::Transcendental, [](T a, T) { return rsqrt(a); }},
      {"tanh", Bound::Transcendental, [](T a, T) { return tanh(a); }},
      {"sigmoid", Bound::Transcendental, [](T a, T) { return sigmoid(a); }},
      {"sin", Bound::Transcendental, [](T a, T) { return sin(a); }},
      {"cos", Bound::Transcendental, [](T a, T) { return cos(a); }},
      {"erf", Bound::Transcendental, [](T a, T) { return erf(a); }},
      {"gelu", Bound::Transcendental, [](T a, T) { return gelu(a); }},
      {"add", Bound::Exact, [](T a, T b) { return add(a, b); }},
      {"sub", Bound::Exact, [](T a, T b) { return sub(a, b); }},
      {"mul", Bound::Exact, [](T a, T b) { return mul(a, b); }},
      {"div", Bound::Exact, [](T a, T b) { return div(a, b); }},
      {"pow", Bound::Transcendental, [](T a, T b) { return pow(a, b); }},
      {"fmod", Bound::Exact, [](T a, T b) { return fmod(a, b); }},
      {"remainder", Bound::Exact, [](T a, T b) { return remainder(a, b); }},
      {"maximum", Bound::Exact, [](T a, T b) { return maximum(a, b); }},
      {"minimum", Bound::Exact, [](T a, T b) { return minimum(a, b); }},
      {"logical_and", Bound::Exact, [](T a, T b) { return logical_and(a, b); }},
      {"logical_or", Bound::Exact, [](T a, T b) { return logical_or(a, b); }},
      {"eq", Bound::Exact, [](T a, T b) { return eq(a, b); }},
      {"ne", Bound::Exact, [](T a, T b) { return ne(a, b); }},
      {"lt", Bound::Exact, [](T a, T b) { return lt(a, b); }},
      {"le", Bound::Exact, [](T a, T b) { return le(a, b); }},
      {"gt", Bound::Exact, [](T a, T b) { return gt(a, b); }},
      {"ge", Bound::Exact, [](T a, T b) { return ge(a, b); }},
      {"where", Bound::Exact, [](T a, T b) { return where(gt(a, b), a, b); }},
      {"clamp", Bound::Exact, [](T a, T) { return clamp(a, -1, 2); }},
      {"broadcast add", Bound::Exact, [](T a, T b) { return add(a, slice(b, 0, 0, 1)); }},
      {"transposed mul", Bound::Exact, [](T a, T b) { return mul(transpose(a), transpose(b)); }},
      {"sum rows", Bound::Accumulated, [](T a, T) { return sum(a, {1}); }},
      {"sum all", Bound::Accumulated, [](T a, T) { return sum(a); }},
      {"prod cols", Bound::Accumulated, [](T a, T) { return prod(slice(a, 1, 0, 3), {0}); }},
      {"mean", Bound::Accumulated, [](T a, T) { return mean(a, {0}); }},
      {"max", Bound::Exact, [](T a, T) { return max(a, {1}); }},
      {"min", Bound::Exact, [](T a, T) { return min(transpose(a), {0}, true); }},
      {"argmax", Bound::Exact, [](T a, T) { return argmax(a, 1); }},
      {"argmin last", Bound::Exact, [](T a, T) { return argmin(a, 0, false, true); }},
      {"matmul", Bound::Accumulated, [](T a, T b) { return matmul(a, transpose(b)); }},
      {"index_select", Bound::Exact,
       [](T a, T) { return index_select(a, 1, from_vector<int64_t>({3, 0, 2, 2}, {4}).to(a.device())); }},
      {"gather", Bound::Exact,
       [](T a, T) {
         return gather(slice(a, 1, 0, 2), 1,
                       from_vector<int64_t>({1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1}, {6, 2}).to(a.device()));
       }},
      {"index_add", Bound::Exact,
       [](T a, T b) { return index_add(a, 1, from_vector<int64_t>({3, 0, 3}, {3}).to(a.device()), slice(b, 1, 0, 3)); },
       true},
      {"index_add of a transposed source", Bound::Exact,
       [](T a, T b) {
         return index_add(a, 0, from_vector<int64_t>({1, 1}, {2}).to(a.device()),
                          transpose(slice(slice(b, 0, 0, 5), 1, 0, 2)));
       },
       true},
      {"scatter_add", Bound::Exact,
       [](T a, T b) {
         return scatter_add(a, 1, from_vector<int64_t>({1, 0, 1, 1, 3, 1}, {3, 2}).to(a.device()),
                            slice(slice(b, 0, 0, 3), 1, 0, 2));
       },
       true},
      {"cumsum", Bound::Accumulated, [](T a, T) { return cumsum(a, 1); }, true},
      {"cumsum of a transposed view", Bound::Accumulated, [](T a, T) { return cumsum(transpose(a), 1); }, true},
      {"concat", Bound::Exact, [](T a, T b) { return concat({a, b}, 0); }},
      {"softmax", Bound::Transcendental, [](T a, T) { return softmax(a, -1); }},
  };
}

/// Runs every case on every dtype of `types` on the CPU and on level_zero:0
/// and compares them; returns how many programs were compared, and in
/// `libraryPrograms` how many of them were OpCase::library's.
/// The CPU side is interpreted; the device side runs in `deviceJit` (with
/// threshold 1: a compiling mode compiles each program before its first run).
int compareWithTheCpu(const std::vector<OpCase>& cases, std::initializer_list<DType> types,
                      JitMode deviceJit = JitMode::Off, int* libraryPrograms = nullptr) {
  int compared = 0, skipped = 0;
  for (DType t : types) {
    Tensor ac = input(t, 6, 5, 1), bc = input(t, 6, 5, 2);
    Tensor ag = ac.to(kZe), bg = bc.to(kZe);
    for (const OpCase& c : cases) {
      Tensor want;
      try {
        JitScope interpreted(JitMode::Off);
        want = c.fn(ac, bc);
        want.to_vector<double>();
      } catch (const Error&) {
        ++skipped;  // not defined for this dtype
        continue;
      }
      const std::string what = c.name + " " + std::string(dtype_name(t));
      Tensor got;
      try {
        JitScope device(deviceJit, 1);
        const Stats before = stats();
        got = c.fn(ag, bg);
        got.to_vector<double>();
        // A compiling mode runs every program that computes something as a
        // kernel (an identity such as floor of an integer computes nothing).
        const Stats after = stats();
        const bool ranCompiled = after.compiled_runs != before.compiled_runs;
        if (deviceJit != JitMode::Off && c.library && ranCompiled)
          ADD_FAILURE() << what << " ran compiled, not by the op library between regions";
        if (deviceJit != JitMode::Off && !c.library && !ranCompiled &&
            after.interpreted_ops != before.interpreted_ops)
          ADD_FAILURE() << what << " ran interpreted: " << after.compile_failures - before.compile_failures
                        << " compile failure(s)";
        EXPECT_EQ(got.device(), kZe) << what;
        got = got.to(Device::cpu());
      } catch (const Error& e) {
        ADD_FAILURE() << what << ": " << e.what();
        continue;
      }
      if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
        ADD_FAILURE() << what << ": " << dtype_name(got.dtype()) << got.shape().str() << ", the CPU has "
                      << dtype_name(want.dtype()) << want.shape().str();
        continue;
      }
      const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i) {
        if (std::isnan(w[i])) {
          EXPECT_TRUE(std::isnan(g[i])) << what << " [" << i << "]: " << g[i] << ", the CPU has NaN";
          continue;
        }
        const double tol = tolerance(c.bound, want.dtype(), w[i]);
        if (tol == 0 || std::isinf(w[i])) EXPECT_EQ(g[i], w[i]) << what << " [" << i << "]";
        else EXPECT_NEAR(g[i], w[i], tol) << what << " [" << i << "]";
      }
      ++compared;
      if (c.library && libraryPrograms) ++*libraryPrograms;
    }
  }
  std::printf("level_zero:0 op differential: %d op/dtype programs compared with the CPU, %d not defined\n", compared,
              skipped);
  return compared;
}

TEST_F(LevelZeroOps, EveryOpMatchesTheCpu) {
  EXPECT_GT(compareWithTheCpu(opCases(), {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32,
                                          DType::i8, DType::u8, DType::boolean}),
            300);
}

TEST_F(LevelZeroOps, CastsBetweenEveryPairOfDtypesMatchTheCpu) {
  std::vector<float> v = ramp(40, -4.5f, 0.23f);
  v[3] = 300.0f;  // out of range for the small integers: wraps like the CPU's conversion
  v[5] = 0.0f;
  int pairs = 0;
  for (DType from : kAllTypes)
    for (DType to : kAllTypes) {
      Tensor xc = cast(from_vector(v, {40}), from);
      Tensor want = cast(xc, to), got = cast(xc.to(kZe), to).to(Device::cpu());
      const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
      EXPECT_EQ(g, w) << dtype_name(from) << " -> " << dtype_name(to);
      ++pairs;
    }
  EXPECT_EQ(pairs, 81);
}

TEST_F(LevelZeroOps, LeavesMatchTheCpu) {
  for (DType t : kAllTypes) {
    EXPECT_EQ(arange(int64_t{37}, t, kZe).to(Device::cpu()).to_vector<double>(),
              arange(int64_t{37}, t).to_vector<double>())
        << "arange " << dtype_name(t);
    EXPECT_EQ(full({9}, 3, t, kZe).to(Device::cpu()).to_vector<double>(), full({9}, 3, t).to_vector<double>())
        << "full " << dtype_name(t);
  }
  EXPECT_EQ(arange(2.0, 9.0, 0.5, DType::f32, kZe).to(Device::cpu()).to_vector<float>(),
            arange(2.0, 9.0, 0.5).to_vector<float>());
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    EXPECT_EQ(rand({300}, 7, t, 0, 1, kZe).to(Device::cpu()).to_vector<double>(),
              rand({300}, 7, t).to_vector<double>())
        << "rand " << dtype_name(t) << ": the counter-based generator is bit-exact";
    const std::vector<double> g = randn({300}, 9, t, 0, 1, kZe).to(Device::cpu()).to_vector<double>(),
                              w = randn({300}, 9, t).to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_NEAR(g[i], w[i], tolerance(Bound::Transcendental, t, w[i])) << "randn " << dtype_name(t) << " " << i;
  }
}

// ---------------------------------------------------------------------------
// Tier 1: hot traces compiled to SPIR-V (jit/targets/spirv), launched by the
// device's kernel loader, cached on disk and replayed by another process.

class LevelZeroTier1 : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_LEVEL_ZERO(); }
};

TEST_F(LevelZeroTier1, EveryOpCompiledToSpirvMatchesTheInterpretedCpu) {
  reset_stats();
  int library = 0;
  const int compared =
      compareWithTheCpu(opCases(), {DType::f32, DType::i32, DType::boolean}, JitMode::Sync, &library);
  const Stats s = stats();
  EXPECT_GT(compared, 100);
  EXPECT_GT(library, 0);
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_GE(s.compiled_runs, static_cast<uint64_t>(compared - library) * 9 / 10) << s.str();
}

/// Element-wise nests large enough that each thread computes several
/// elements (jit/targets/gpu/GpuLaunches.cpp, coarsenParallelLoop): a chain
/// over 2^20 + 3 elements and a broadcast add over [1100, 1027], both with
/// partial blocks at their edges, compiled and run on level_zero:0, match
/// the interpreted CPU.
TEST_F(LevelZeroTier1, LargeElementwiseNestsMatchTheInterpretedCpu) {
  const int64_t n = (int64_t{1} << 20) + 3;
  const Tensor x = from_vector(ramp(static_cast<size_t>(n), -3.0f, 6.0f / static_cast<float>(n)), {n});
  const Tensor m = from_vector(ramp(1100 * 1027, -2.0f, 1e-6f), {1100, 1027});
  const Tensor bias = from_vector(ramp(1027, 1.0f, -0.002f), {1027});
  auto chain = [](const Tensor& t) { return exp(tanh(t) * t); };
  std::vector<float> wantChain, wantAdd;
  {
    JitScope off(JitMode::Off);
    wantChain = chain(x).to_vector<float>();
    wantAdd = (m + bias).to_vector<float>();
  }
  JitScope sync(JitMode::Sync, 1);
  reset_stats();
  const Tensor xd = x.to(kZe), md = m.to(kZe), biasd = bias.to(kZe);
  const std::vector<float> gotChain = chain(xd).to(Device::cpu()).to_vector<float>();
  const std::vector<float> gotAdd = (md + biasd).to(Device::cpu()).to_vector<float>();
  const Stats s = stats();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_GE(s.compiled_runs, 2u) << s.str();
  ASSERT_EQ(gotChain.size(), wantChain.size());
  for (size_t i = 0; i < gotChain.size(); ++i)
    ASSERT_NEAR(gotChain[i], wantChain[i], tolerance(Bound::Transcendental, DType::f32, wantChain[i])) << "chain [" << i << "]";
  ASSERT_EQ(gotAdd.size(), wantAdd.size());
  for (size_t i = 0; i < gotAdd.size(); ++i) ASSERT_EQ(gotAdd[i], wantAdd[i]) << "add [" << i << "]";
}

/// Reductions along rows of 32 or more run a block per row (GpuLaunches.cpp,
/// launchRowReductions): rows shorter and longer than the block, rows that
/// are not a multiple of it, two leading dimensions, integer, unsigned and
/// half rows, products, a NaN in a max row, softmax and layer_norm rows
/// (one row kernel each: launchRowKernels) and a row sum read across rows
/// (which no row kernel may take), compiled and run on level_zero:0, match
/// the interpreted CPU.
TEST_F(LevelZeroTier1, RowReductionsRunABlockPerRowAndMatchTheInterpretedCpu) {
  std::vector<float> withNaN = ramp(40 * 300, -1.5f, 0.001f);
  withNaN[7 * 300 + 123] = std::nanf("");
  const Tensor rows = from_vector(ramp(40 * 300, -1.5f, 0.001f), {40, 300});
  const Tensor nanRows = from_vector(withNaN, {40, 300});
  const Tensor deep = from_vector(ramp(3 * 5 * 1027, 2.0f, -0.0007f), {3, 5, 1027});
  const Tensor narrow = from_vector(ramp(17 * 33, 0.5f, 0.01f), {17, 33});
  const Tensor ints = cast(from_vector(ramp(24 * 700, -300.0f, 0.07f), {24, 700}), DType::i32);
  const Tensor bytes = cast(from_vector(ramp(24 * 700, 0.0f, 0.3f), {24, 700}), DType::u8);  // wraps past 255
  const Tensor halves = cast(rows, DType::f16);
  const Tensor nearOne = from_vector(ramp(40 * 300, 0.999f, 1e-7f), {40, 300});
  const Tensor square = from_vector(ramp(40 * 40, 1.0f, 0.01f), {40, 40});
  using Program = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<std::pair<const char*, Program>> programs = {
      {"row sum", [](auto& t) { return sum(t[0], {1}); }},
      {"row max keepdim", [](auto& t) { return max(t[0], {1}, true); }},
      {"row max with NaN", [](auto& t) { return max(t[1], {1}); }},
      {"row min", [](auto& t) { return min(t[0], {1}); }},
      {"row mean of a 3-d tensor", [](auto& t) { return mean(t[2], {2}); }},
      {"rows of 33", [](auto& t) { return sum(t[3], {1}, true); }},
      {"integer row sum", [](auto& t) { return sum(t[4], {1}); }},
      {"integer row max", [](auto& t) { return max(t[4], {1}); }},
      {"unsigned row max", [](auto& t) { return max(t[5], {1}); }},
      {"unsigned row min", [](auto& t) { return min(t[5], {1}); }},
      {"half row max", [](auto& t) { return max(t[6], {1}); }},
      {"row product", [](auto& t) { return prod(t[7], {1}); }},
      {"row sums read across rows", [](auto& t) { return t[8] + sum(t[0], {1}); }},  // not one row kernel
      {"softmax", [](auto& t) { return softmax(t[2], 2); }},
      {"layer_norm", [](auto& t) { return layer_norm(t[0]); }},
  };
  const std::vector<Tensor> inputs = {rows, nanRows, deep, narrow, ints, bytes, halves, nearOne, square};
  std::vector<std::vector<double>> want;
  {
    JitScope off(JitMode::Off);
    for (const auto& [name, program] : programs) want.push_back(program(inputs).to_vector<double>());
  }
  JitScope sync(JitMode::Sync, 1);
  std::vector<Tensor> onDevice;
  for (const Tensor& t : inputs) onDevice.push_back(t.to(kZe));
  reset_stats();
  for (size_t p = 0; p < programs.size(); ++p) {
    const auto& [name, program] = programs[p];
    SCOPED_TRACE(name);
    const Tensor got = program(onDevice);
    const std::vector<double> g = got.to(Device::cpu()).to_vector<double>();
    ASSERT_EQ(g.size(), want[p].size());
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::isnan(want[p][i])) {
        EXPECT_TRUE(std::isnan(g[i])) << "[" << i << "] " << g[i];
        continue;
      }
      EXPECT_NEAR(g[i], want[p][i], tolerance(Bound::Transcendental, got.dtype(), want[p][i])) << "[" << i << "]";
    }
    step();
  }
  const Stats s = stats();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_GE(s.compiled_runs, static_cast<uint64_t>(programs.size())) << s.str();
}

/// A training-like step on level_zero:0: matmul, bias, tanh, softmax, a loss
/// reduced to a scalar that later kernels read, and a float constant that
/// varies between steps (a kernel argument).
struct DeviceStep {
  Tensor x = from_vector(ramp(8 * 12, -1.0f, 0.021f), {8, 12}).to(kZe);
  Tensor w = from_vector(ramp(12 * 5, 0.4f, -0.013f), {12, 5}).to(kZe);
  Tensor b = from_vector(ramp(5, 0.1f, 0.05f), {5}).to(kZe);

  std::vector<float> run(float lr) {
    Tensor h = tanh(matmul(x, w) + b);
    Tensor p = softmax(h, 1);
    Tensor loss = mean(sum(p * h, {1}));
    w = w - (h.sum() * lr) * loss;  // every element reads the loss
    std::vector<float> r = w.to(Device::cpu()).to_vector<float>();
    step();
    return r;
  }
};

std::vector<std::vector<float>> runSteps(int n) {
  DeviceStep d;
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) out.push_back(d.run(0.01f * static_cast<float>(i + 1)));
  return out;
}

void expectClose(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t k = 0; k < got[i].size(); ++k)
      EXPECT_NEAR(got[i][k], want[i][k], 1e-5 * std::max(1.0f, std::fabs(want[i][k])))
          << "step " << i << " [" << k << "]";
  }
}

TEST_F(LevelZeroTier1, ATrainingStepCompilesWholeAndMatchesTheInterpreter) {
  std::vector<std::vector<float>> want;
  {
    JitScope off(JitMode::Off);
    want = runSteps(5);
  }
  JitScope sync(JitMode::Sync, 2);
  reset_stats();
  expectClose(runSteps(5), want);
  const Stats s = stats();
  EXPECT_EQ(s.compile_failures, 0u) << s.str();
  EXPECT_GE(s.compiled_runs, 3u) << s.str();
  EXPECT_GT(s.kernel_launches, s.compiled_runs) << s.str();  // several kernels a step
}

/// A step whose batch extent changes every call (with a size-0 batch among
/// them): broadcasting, row reductions of 40 (a block per row, as many
/// blocks as the batch has rows), a reduction over the batch, a matmul,
/// softmax and a cast, on level_zero:0.
std::vector<float> batchStep(int64_t batch) {
  const Tensor x = from_vector(ramp(static_cast<size_t>(batch * 40), -2.0f + 0.01f * static_cast<float>(batch), 0.013f),
                               {batch, 40}).to(kZe);
  const Tensor w = from_vector(ramp(40 * 7, -1.0f, 0.011f), {40, 7}).to(kZe);
  const Tensor bias = from_vector(ramp(40, 0.5f, -0.04f), {40}).to(kZe);
  const Tensor h = tanh(x * 1.5f + bias);
  const Tensor perRow = sum(h * h, {1});
  const Tensor perColumn = sum(h, {0});  // zeros for an empty batch
  const Tensor p = softmax(matmul(h, w), 1);
  const Tensor counts = cast(sum(cast(x > 0.0f, DType::i32), {1}), DType::f32);
  std::vector<float> out;
  for (const Tensor* t : {&perRow, &perColumn, &p, &counts}) {
    const std::vector<float> v = t->to(Device::cpu()).to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  step();
  return out;
}

/// One trace structure run at 14 batch sizes, 0 among them: past
/// KILN_MAX_SHAPES (3) it gets one dynamic-shape SPIR-V kernel, whose grids
/// and scratch offsets its launch program computes from the sizes at each
/// launch (runtime/exec/LaunchProgram.h), and which serves every later
/// size; results match the interpreted CPU at each size.
TEST_F(LevelZeroTier1, ADynamicShapeKernelServesEveryBatchSizeAndMatchesTheInterpretedCpu) {
  const std::vector<int64_t> batches = {5, 1, 9, 7, 0, 33, 2, 300, 8, 0, 1, 64, 13, 1027};
  std::vector<std::vector<float>> want;
  {
    JitScope off(JitMode::Off);
    for (int64_t b : batches) want.push_back(batchStep(b));
  }
  JitScope sync(JitMode::Sync, 1);
  Settings saved = settings(), s = saved;
  s.max_shapes = 3;
  set_settings(s);
  exec::Engine::instance().resetProfilesForTesting();  // the interpreted runs' profiles saw no shapes
  reset_stats();
  for (size_t i = 0; i < batches.size(); ++i) {
    const std::vector<float> got = batchStep(batches[i]);
    ASSERT_EQ(got.size(), want[i].size()) << "batch " << batches[i];
    for (size_t k = 0; k < got.size(); ++k)
      ASSERT_NEAR(got[k], want[i][k], tolerance(Bound::Transcendental, DType::f32, want[i][k]) * 8)
          << "batch " << batches[i] << " [" << k << "]";
  }
  const Stats st = stats();
  set_settings(saved);
  EXPECT_EQ(st.compile_failures, 0u) << st.str();
  // Three static kernels (batches 5, 1, 9), then one dynamic kernel for all.
  EXPECT_EQ(st.compiles, 4u) << st.str();
  // Every batch but the empty ones (a trace with size-0 tensors runs
  // interpreted, on every device) ran compiled.
  EXPECT_EQ(st.compiled_runs, batches.size() - 2) << st.str();
  EXPECT_EQ(st.interpreted_runs, 2u) << st.str();
}

/// randomOpChain on level_zero:0, on [batch, f] inputs with f 3, 23 or 43
/// by seed (rows of 43 reduce a block per row); its result and its rows'
/// sums of squares.
std::vector<float> randomBatchProgram(uint64_t seed, int64_t batch) {
  std::mt19937_64 rng(seed);
  const int64_t f = 3 + static_cast<int64_t>(seed % 3) * 20;
  const size_t n = static_cast<size_t>(batch * f);
  const Tensor x = from_vector(ramp(n, -1.0f + 0.02f * static_cast<float>(batch), 2.0f / static_cast<float>(n + 1)),
                               {batch, f}).to(kZe);
  const Tensor bias = from_vector(ramp(static_cast<size_t>(f), 0.3f, -0.6f / static_cast<float>(f)), {f}).to(kZe);
  const Tensor w = from_vector(ramp(static_cast<size_t>(f * f), -0.5f, 1.0f / static_cast<float>(f * f)), {f, f}).to(kZe);
  const Tensor h = randomOpChain(rng, x, bias, w);
  const Tensor perRow = sum(h * h, {1});  // pending with h: one trace
  std::vector<float> out = h.to(Device::cpu()).to_vector<float>();
  const std::vector<float> rows = perRow.to(Device::cpu()).to_vector<float>();
  out.insert(out.end(), rows.begin(), rows.end());
  step();
  return out;
}

/// Random programs at batch sizes 1 to 8: three static kernels, then one
/// dynamic-shape SPIR-V kernel for the rest, each size matching the
/// interpreted CPU.
TEST_F(LevelZeroTier1, RandomProgramsOnADynamicShapeKernelMatchTheInterpretedCpu) {
  uint64_t seeds = 9;
  if (const char* env = std::getenv("KILN_FUZZ_ITERATIONS")) seeds = std::strtoull(env, nullptr, 10);
  Settings saved = settings();
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    std::vector<std::vector<float>> want;
    {
      JitScope off(JitMode::Off);
      for (int64_t batch = 1; batch <= 8; ++batch) want.push_back(randomBatchProgram(seed, batch));
    }
    JitScope sync(JitMode::Sync, 1);
    Settings s = settings();
    s.max_shapes = 3;
    set_settings(s);
    exec::Engine::instance().resetProfilesForTesting();
    reset_stats();
    for (int64_t batch = 1; batch <= 8; ++batch) {
      const std::vector<float> got = randomBatchProgram(seed, batch);
      ASSERT_EQ(got.size(), want[batch - 1].size());
      for (size_t i = 0; i < got.size(); ++i) {
        const float a = got[i], b = want[batch - 1][i];
        if (!(std::fabs(a - b) <= 1e-4f * (1 + std::fabs(b))))
          ADD_FAILURE() << "seed " << seed << " batch " << batch << " element " << i << ": " << a << " vs " << b;
      }
    }
    const Stats st = stats();
    EXPECT_EQ(st.compile_failures, 0u) << "seed " << seed << ": " << st.str();
    EXPECT_EQ(st.compiles, 4u) << "seed " << seed << ": three static kernels, one dynamic: " << st.str();
    EXPECT_EQ(st.compiled_runs, 8u) << "seed " << seed << ": " << st.str();
  }
  set_settings(saved);
}

/// A private cache directory, removed at the end.
struct CacheDir {
  std::string path;
  CacheDir() {
    char tmpl[] = "/tmp/kiln-ze-cache-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~CacheDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

/// Runs this binary's LevelZeroTier1Child.Main with `env` added; its exit status.
int runChild(const std::vector<std::string>& env) {
  std::string cmd;
  for (const std::string& e : env) cmd += e + " ";
  cmd += "'" + std::filesystem::read_symlink("/proc/self/exe").string() +
         "' --gtest_filter=LevelZeroTier1Child.Main >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST_F(LevelZeroTier1, ASecondProcessReplaysTheKernelsFromTheDiskCache) {
  CacheDir dir;
  // First process: compiles and stores the step's SPIR-V.
  EXPECT_EQ(runChild({"KILN_TEST_ZE_ROLE=compile", "KILN_JIT=sync", "KILN_JIT_THRESHOLD=2", "KILN_CACHE=on",
                      "KILN_CACHE_DIR=" + dir.path}),
            0);
  // Second: replay only, strict (a missing kernel is an error), no compiler.
  EXPECT_EQ(runChild({"KILN_TEST_ZE_ROLE=replay", "KILN_JIT=replay", "KILN_JIT_THRESHOLD=2", "KILN_REPLAY_STRICT=1",
                      "KILN_CACHE=on", "KILN_CACHE_DIR=" + dir.path}),
            0);
}

/// The child side of ASecondProcessReplaysTheKernelsFromTheDiskCache.
TEST(LevelZeroTier1Child, Main) {
  const char* role = std::getenv("KILN_TEST_ZE_ROLE");
  if (!role) GTEST_SKIP() << "run by LevelZeroTier1.ASecondProcessReplaysTheKernelsFromTheDiskCache";
  REQUIRE_LEVEL_ZERO();
  std::vector<std::vector<float>> want;
  {
    JitScope off(JitMode::Off);
    want = runSteps(4);
  }
  reset_stats();
  expectClose(runSteps(4), want);
  const Stats s = stats();
  // The step's first run has its learning rate in the key; from the second
  // on it is a kernel argument (one key, one kernel).
  if (std::string(role) == "compile") {
    EXPECT_EQ(s.compile_failures, 0u) << s.str();
    EXPECT_GE(s.cache_stores, 1u) << s.str();
    EXPECT_GE(s.compiled_runs, 2u) << s.str();
  } else {
    EXPECT_EQ(s.compiles, 0u) << s.str();
    EXPECT_GE(s.cache_disk_hits, 1u) << s.str();
    EXPECT_GE(s.compiled_runs, 3u) << s.str();
    EXPECT_FALSE(exec::compilerLoaded()) << "replay loaded the compiler";
  }
}

// ---------------------------------------------------------------------------
// Discovery failures, each in its own process (ctest).

// KILN_LEVEL_ZERO_LIBRARY names a library that does not exist.
TEST(LevelZeroNoDriver, DeviceCountIsZeroAndUseSaysWhatIsMissing) {
  EXPECT_EQ(device_count(Device::LevelZero), 0);
  expectError([] { zeros({2}, DType::f32, Device::level_zero(0)); },
              {"level_zero:0", "no driver", "not found", "KILN_LEVEL_ZERO_LIBRARY", "libze_loader.so.1"});
  expectError([] { from_vector(std::vector<float>{1, 2}, {2}).to(Device::level_zero(0)); },
              {"level_zero:0", "KILN_LEVEL_ZERO_LIBRARY"});
  expectError([] { set_default_device(Device::parse("level_zero:0")); }, {"level_zero:0", "KILN_LEVEL_ZERO_LIBRARY"});
}

// The test driver told to fail (KILN_TEST_ZE_FAIL): zeInit fails, or the
// loader reports no driver or no device. KILN_EXPECT_ZE_REASON is what the
// reason must say.
TEST(LevelZeroDiscovery, FailedDiscoveryLeavesNoDeviceAndSaysWhy) {
  const char* expected = std::getenv("KILN_EXPECT_ZE_REASON");
  ASSERT_NE(expected, nullptr) << "ctest sets KILN_EXPECT_ZE_REASON";
  EXPECT_EQ(device_count(Device::LevelZero), 0);
  const std::string why = hal::unavailableReason(Device::LevelZero);
  EXPECT_NE(why.find(expected), std::string::npos) << why;
  expectError([] { zeros({2}, DType::f32, Device::level_zero(0)); }, {"level_zero:0", expected});
  // The CPU is unaffected.
  EXPECT_EQ(add(from_vector(std::vector<float>{1, 2}, {2}), 1.0).to_vector<float>(), (std::vector<float>{2, 3}));
}

}  // namespace
}  // namespace kiln
