// The interpreter's f32 array math (runtime/interp/VectorMath.h) against
// double precision: the largest error in ulps over a dense sweep of f32
// inputs (every 257th bit pattern of each range, which reaches every
// exponent), the thresholds where exp overflows, underflows and turns
// denormal, and the special values. Through the public ops: every layout
// of a tensor gives the same bits (strided runs go through the same loop).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/interp/VectorMath.h"
#ifdef KILN_VECTOR_MATH_COPIES
#include "test/unit/interp/VectorMathIsa.h"
#endif

namespace kiln::interp {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// |got - exact| in units of the last place of the f32 nearest to exact
/// (2^-149 for denormal results); a NaN, or an infinity, where the other
/// has none counts as a huge error.
double ulpError(float got, double exact) {
  const float rounded = static_cast<float>(exact);
  if (std::isnan(got) || std::isnan(rounded)) return std::isnan(got) == std::isnan(rounded) ? 0.0 : 1e30;
  if (std::isinf(rounded) || std::isinf(got)) return got == rounded ? 0.0 : 1e30;
  const double magnitude = std::fabs(static_cast<double>(rounded));
  const double ulp = magnitude < std::numeric_limits<float>::min()
                         ? std::ldexp(1.0, -149)
                         : std::ldexp(1.0, std::ilogb(rounded) - 23);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

/// Every 257th f32 between a and b (both of one sign, in either order), in
/// order of magnitude.
std::vector<float> sweep(float a, float b) {
  uint32_t from = std::bit_cast<uint32_t>(a), to = std::bit_cast<uint32_t>(b);
  EXPECT_EQ(from >> 31, to >> 31) << "a sweep stays on one side of 0";
  if (from > to) std::swap(from, to);
  std::vector<float> xs;
  for (uint64_t u = from; u <= to; u += 257) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  EXPECT_GT(xs.size(), 1000u);
  return xs;
}

struct Worst {
  double ulps = 0;
  float at = 0;
};

Worst worstError(void (*fn)(const float*, float*, int64_t), double (*exact)(double), const std::vector<float>& xs) {
  std::vector<float> ys(xs.size());
  fn(xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  Worst w;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double e = ulpError(ys[i], exact(xs[i]));
    if (e > w.ulps) w = {e, xs[i]};
  }
  return w;
}

double exactExp(double x) { return std::exp(x); }
double exactTanh(double x) { return std::tanh(x); }
double exactSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double exactErf(double x) { return std::erf(x); }
double exactLog(double x) { return std::log(x); }
double exactLog2(double x) { return std::log2(x); }
double exactLog1p(double x) { return std::log1p(x); }
double exactExpm1(double x) { return std::expm1(x); }
double exactAtan(double x) { return std::atan(x); }
double exactSin(double x) { return std::sin(x); }
double exactCos(double x) { return std::cos(x); }

/// fn(x), computed in every lane of the vector loop and in its scalar tail
/// (67 copies of x), which all agree.
float one(void (*fn)(const float*, float*, int64_t), float x) {
  std::vector<float> xs(67, x), ys(67);
  fn(xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  for (float y : ys) EXPECT_EQ(std::bit_cast<uint32_t>(y), std::bit_cast<uint32_t>(ys[0])) << "input " << x;
  return ys[0];
}

/// The same bits, or both NaN (a NaN's payload may differ).
bool same(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (a != a && b != b); }

TEST(VectorMath, ExpWithinTwoUlpsDownToTheSmallestDenormal) {
  for (auto [lo, hi] : {std::pair{0.0f, 88.72f}, std::pair{-0.0f, -103.9f}}) {
    const Worst w = worstError(expF32, exactExp, sweep(lo, hi));
    EXPECT_LE(w.ulps, 2.0) << "exp(" << w.at << ")";
  }
}

TEST(VectorMath, ExpOverflowsAndUnderflowsWhereF32Does) {
  EXPECT_EQ(one(expF32, 88.7228f), std::exp(88.7228f));  // the largest finite results
  EXPECT_TRUE(std::isfinite(one(expF32, 88.7228f)));
  EXPECT_EQ(one(expF32, 88.7230f), kInf);
  EXPECT_EQ(one(expF32, 1e30f), kInf);
  EXPECT_EQ(one(expF32, kInf), kInf);
  // exp(-103.28) is the smallest denormal, 2^-149; exp(-104) rounds to 0.
  EXPECT_EQ(one(expF32, -103.28f), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(one(expF32, -103.97f), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(one(expF32, -103.9721f), 0.0f);  // below ln(2^-150): rounds to 0
  EXPECT_EQ(one(expF32, -104.0f), 0.0f);
  EXPECT_EQ(one(expF32, -1e30f), 0.0f);
  EXPECT_EQ(one(expF32, -kInf), 0.0f);
  EXPECT_EQ(one(expF32, 0.0f), 1.0f);
  EXPECT_EQ(one(expF32, -0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(one(expF32, kNaN)));
  // Denormal results keep their leading bits: one rounding, not two.
  for (float x : {-87.5f, -90.0f, -95.0f, -100.0f, -102.5f})
    EXPECT_LE(ulpError(one(expF32, x), std::exp(static_cast<double>(x))), 1.0) << "exp(" << x << ")";
}

// Without fused multiply-adds (the clones round alike) the rational
// function's worst case is 6.2 ulps, near 5.85 (4.7 with them, in compiled code).
TEST(VectorMath, TanhWithinSevenUlps) {
  for (auto [lo, hi] : {std::pair{0.0f, 9.0f}, std::pair{-0.0f, -9.0f}}) {
    const Worst w = worstError(tanhF32, exactTanh, sweep(lo, hi));
    EXPECT_LE(w.ulps, 7.0) << "tanh(" << w.at << ")";
  }
}

TEST(VectorMath, TanhSpecialValues) {
  EXPECT_LE(ulpError(one(tanhF32, 7.9f), std::tanh(7.9)), 7.0);
  EXPECT_EQ(one(tanhF32, 20.0f), 1.0f);
  EXPECT_EQ(one(tanhF32, kInf), 1.0f);
  EXPECT_EQ(one(tanhF32, -kInf), -1.0f);
  EXPECT_TRUE(std::signbit(one(tanhF32, -0.0f)));
  EXPECT_EQ(one(tanhF32, -0.0f), 0.0f);
  const float denormal = std::numeric_limits<float>::denorm_min() * 5;
  EXPECT_EQ(one(tanhF32, denormal), denormal);
  EXPECT_TRUE(std::isnan(one(tanhF32, kNaN)));
}

TEST(VectorMath, SigmoidWithinFourUlps) {
  for (auto [lo, hi] : {std::pair{0.0f, 20.0f}, std::pair{-0.0f, -103.0f}}) {
    const Worst w = worstError(sigmoidF32, exactSigmoid, sweep(lo, hi));
    EXPECT_LE(w.ulps, 4.0) << "sigmoid(" << w.at << ")";
  }
  EXPECT_EQ(one(sigmoidF32, 0.0f), 0.5f);
  EXPECT_EQ(one(sigmoidF32, -0.0f), 0.5f);
  EXPECT_EQ(one(sigmoidF32, kInf), 1.0f);
  EXPECT_EQ(one(sigmoidF32, -kInf), 0.0f);
  EXPECT_EQ(one(sigmoidF32, -200.0f), 0.0f);
  EXPECT_GT(one(sigmoidF32, -100.0f), 0.0f);  // a denormal, not 0
  EXPECT_TRUE(std::isnan(one(sigmoidF32, kNaN)));
}

TEST(VectorMath, LogWithinTwoUlpsDenormalsIncluded) {
  // Every binade: the smallest denormal to FLT_MAX.
  const Worst w = worstError(logF32, exactLog, sweep(std::numeric_limits<float>::denorm_min(),
                                                     std::numeric_limits<float>::max()));
  EXPECT_LE(w.ulps, 2.0) << "log(" << w.at << ")";
  EXPECT_EQ(one(logF32, 1.0f), 0.0f);
  EXPECT_EQ(one(logF32, 0.0f), -kInf);
  EXPECT_EQ(one(logF32, -0.0f), -kInf);
  EXPECT_EQ(one(logF32, kInf), kInf);
  EXPECT_TRUE(std::isnan(one(logF32, -1.0f)));
  EXPECT_TRUE(std::isnan(one(logF32, -kInf)));
  EXPECT_TRUE(std::isnan(one(logF32, kNaN)));
}

// The same family as tanh's: 6.4 ulps at worst, near 2.68, without fused
// multiply-adds.
TEST(VectorMath, ErfWithinSevenUlps) {
  for (auto [lo, hi] : {std::pair{0.0f, 5.0f}, std::pair{-0.0f, -5.0f}}) {
    const Worst w = worstError(erfF32, exactErf, sweep(lo, hi));
    EXPECT_LE(w.ulps, 7.0) << "erf(" << w.at << ")";
  }
  EXPECT_EQ(one(erfF32, kInf), 1.0f);
  EXPECT_EQ(one(erfF32, -kInf), -1.0f);
  EXPECT_EQ(one(erfF32, 10.0f), 1.0f);
  EXPECT_TRUE(std::signbit(one(erfF32, -0.0f)));
  EXPECT_GT(one(erfF32, std::numeric_limits<float>::denorm_min()), 0.0f);
  EXPECT_TRUE(std::isnan(one(erfF32, kNaN)));
}

TEST(VectorMath, Log2WithinTwoUlpsAndExactAtPowersOfTwo) {
  const Worst w = worstError(log2F32, exactLog2, sweep(std::numeric_limits<float>::denorm_min(),
                                                       std::numeric_limits<float>::max()));
  EXPECT_LE(w.ulps, 2.0) << "log2(" << w.at << ")";
  for (int e = -149; e <= 127; ++e) EXPECT_EQ(one(log2F32, std::ldexp(1.0f, e)), static_cast<float>(e)) << e;
  EXPECT_EQ(one(log2F32, 0.0f), -kInf);
  EXPECT_EQ(one(log2F32, -0.0f), -kInf);
  EXPECT_EQ(one(log2F32, kInf), kInf);
  EXPECT_TRUE(std::isnan(one(log2F32, -3.0f)));
  EXPECT_TRUE(std::isnan(one(log2F32, kNaN)));
}

TEST(VectorMath, Log1pWithinThreeUlpsNearZeroAsWell) {
  for (auto [lo, hi] : {std::pair{0.0f, std::numeric_limits<float>::max()}, std::pair{-0.0f, -0.99999994f}}) {
    const Worst w = worstError(log1pF32, exactLog1p, sweep(lo, hi));
    EXPECT_LE(w.ulps, 3.0) << "log1p(" << w.at << ")";
  }
  const float denormal = std::numeric_limits<float>::denorm_min() * 7;
  EXPECT_EQ(one(log1pF32, denormal), denormal);
  EXPECT_EQ(one(log1pF32, 1e-30f), 1e-30f);
  EXPECT_TRUE(std::signbit(one(log1pF32, -0.0f)));
  EXPECT_EQ(one(log1pF32, -1.0f), -kInf);
  EXPECT_EQ(one(log1pF32, kInf), kInf);
  EXPECT_TRUE(std::isnan(one(log1pF32, -1.5f)));
  EXPECT_TRUE(std::isnan(one(log1pF32, -kInf)));
  EXPECT_TRUE(std::isnan(one(log1pF32, kNaN)));
}

TEST(VectorMath, Expm1WithinThreeUlpsNearZeroAsWell) {
  for (auto [lo, hi] : {std::pair{0.0f, 88.72f}, std::pair{-0.0f, -104.0f}}) {
    const Worst w = worstError(expm1F32, exactExpm1, sweep(lo, hi));
    EXPECT_LE(w.ulps, 3.0) << "expm1(" << w.at << ")";
  }
  const float denormal = std::numeric_limits<float>::denorm_min() * 7;
  EXPECT_EQ(one(expm1F32, denormal), denormal);
  EXPECT_TRUE(std::signbit(one(expm1F32, -0.0f)));
  EXPECT_EQ(one(expm1F32, -20.0f), -1.0f);
  EXPECT_EQ(one(expm1F32, -kInf), -1.0f);
  EXPECT_EQ(one(expm1F32, 89.0f), kInf);
  EXPECT_EQ(one(expm1F32, kInf), kInf);
  EXPECT_TRUE(std::isnan(one(expm1F32, kNaN)));
}

// 2.8 ulps at worst, near 0.43, where (x - 1) / (x + 1) reduces the argument.
TEST(VectorMath, AtanWithinThreeUlps) {
  for (auto [lo, hi] : {std::pair{0.0f, std::numeric_limits<float>::max()}, std::pair{-0.0f, -1e30f}}) {
    const Worst w = worstError(atanF32, exactAtan, sweep(lo, hi));
    EXPECT_LE(w.ulps, 3.0) << "atan(" << w.at << ")";
  }
  EXPECT_EQ(one(atanF32, kInf), static_cast<float>(M_PI / 2));
  EXPECT_EQ(one(atanF32, -kInf), -static_cast<float>(M_PI / 2));
  EXPECT_TRUE(std::signbit(one(atanF32, -0.0f)));
  const float denormal = std::numeric_limits<float>::denorm_min() * 7;
  EXPECT_EQ(one(atanF32, denormal), denormal);
  EXPECT_TRUE(std::isnan(one(atanF32, kNaN)));
}

// Computed in double and rounded once: within an ulp up to 1e5 (the sweep
// crosses zeros of sin and cos at every multiple of pi/2 it passes, where a
// single-precision reduction would lose the leading digits), libm beyond.
TEST(VectorMath, SinAndCosWithinOneUlpZerosIncluded) {
  using Fn = void (*)(const float*, float*, int64_t);
  using Exact = double (*)(double);
  for (auto [fn, exact, name] : {std::tuple<Fn, Exact, const char*>{sinF32, exactSin, "sin"},
                                 std::tuple<Fn, Exact, const char*>{cosF32, exactCos, "cos"}}) {
    for (auto [lo, hi] : {std::pair{0.0f, 1e5f}, std::pair{-0.0f, -1e5f}}) {
      const Worst w = worstError(fn, exact, sweep(lo, hi));
      EXPECT_LE(w.ulps, 1.0) << name << "(" << w.at << ")";
    }
    // The closest floats to multiples of pi/2 up to the limit, and the limit.
    for (int k = 1; k < 60000; k += 997) {
      const float x = static_cast<float>(k * M_PI / 2);
      EXPECT_LE(ulpError(one(fn, x), exact(x)), 1.0) << name << "(" << x << ")";
    }
    EXPECT_LE(ulpError(one(fn, 1e5f), exact(1e5f)), 1.0) << name << "(1e5), the last computed in double";
    for (float x : {100000.01f, 1e6f, 3e38f, -7e20f})
      EXPECT_TRUE(same(one(fn, x), name[0] == 's' ? std::sin(x) : std::cos(x))) << name << "(" << x << ")";
    EXPECT_TRUE(std::isnan(one(fn, kInf)));
    EXPECT_TRUE(std::isnan(one(fn, -kInf)));
    EXPECT_TRUE(std::isnan(one(fn, kNaN)));
  }
  EXPECT_TRUE(std::signbit(one(sinF32, -0.0f)));
  EXPECT_EQ(one(cosF32, -0.0f), 1.0f);
  const float denormal = std::numeric_limits<float>::denorm_min() * 7;
  EXPECT_EQ(one(sinF32, denormal), denormal);
  // In place (y == x), with large values among small ones: each gets its own.
  std::vector<float> xs = {0.5f, 2e5f, -1.0f, kInf, 3.0f, -4e9f, 0.25f};
  std::vector<float> want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) want[i] = static_cast<float>(std::sin(static_cast<double>(xs[i])));
  want[1] = std::sin(2e5f);
  want[5] = std::sin(-4e9f);
  sinF32(xs.data(), xs.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_TRUE(same(xs[i], want[i])) << i << ": " << xs[i] << " vs " << want[i];
}

/// sqrt, rsqrt, reciprocal, floor, ceil and round give libm's bits (round:
/// ties to even), on values that include NaN, infinities, signed zeros,
/// denormals, negative values and halves.
TEST(VectorMath, ExactFunctionsAreLibms) {
  std::vector<float> x;
  for (float v : {kNaN, kInf, -kInf, 0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -2.5f, -1.5f, -0.5f, 0.5f,
                  1.5f, 2.5f, 3.49999976f, 8388609.0f, -1e30f, 1e30f})
    x.push_back(v);
  for (int i = 0; i < 200; ++i) x.push_back(std::sin(static_cast<float>(i) * 1.3f) * std::pow(10.0f, i % 9 - 4));
  const int64_t n = static_cast<int64_t>(x.size());
  const std::pair<ExactF32, float (*)(float)> cases[] = {
      {ExactF32::Sqrt, [](float v) { return std::sqrt(v); }},
      {ExactF32::Rsqrt, [](float v) { return 1.0f / std::sqrt(v); }},
      {ExactF32::Reciprocal, [](float v) { return 1.0f / v; }},
      {ExactF32::Floor, [](float v) { return std::floor(v); }},
      {ExactF32::Ceil, [](float v) { return std::ceil(v); }},
      {ExactF32::Round, [](float v) { return std::nearbyint(v); }}};
  for (auto [op, ref] : cases) {
    SCOPED_TRACE("op " + std::to_string(static_cast<int>(op)));
    std::vector<float> y(x.size());
    exactF32(op, x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(y[i], ref(x[i]))) << "input " << x[i];
  }
}

/// The vectorised arithmetic gives the bits of the scalar operations, in
/// each stride case (both arrays, either one broadcast, both broadcast), on
/// values that include NaN, infinities, zeros of both signs and denormals.
TEST(VectorMath, ArithmeticIsTheScalarOperations) {
  std::vector<float> x(203), y(203);
  const float specials[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), 1e38f, -3.5f};
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = i % 11 < 8 ? specials[i % 11] : std::sin(static_cast<float>(i)) * 100.0f;
    y[i] = i % 7 < 3 ? specials[(i * 5) % 8] : std::cos(static_cast<float>(i)) * 0.01f;
  }
  const int64_t n = static_cast<int64_t>(x.size());
  for (ArithF32 op : {ArithF32::Add, ArithF32::Sub, ArithF32::Mul, ArithF32::Div}) {
    auto scalar = [op](float a, float b) {
      switch (op) {
        case ArithF32::Add: return a + b;
        case ArithF32::Sub: return a - b;
        case ArithF32::Mul: return a * b;
        default: return a / b;
      }
    };
    for (auto [sx, sy] : {std::pair<int64_t, int64_t>{1, 1}, {1, 0}, {0, 1}, {0, 0}}) {
      SCOPED_TRACE("op " + std::to_string(static_cast<int>(op)) + " strides " + std::to_string(sx) + "," +
                   std::to_string(sy));
      std::vector<float> o(x.size());
      arithF32(op, x.data() + 1, sx, y.data() + 2, sy, o.data(), n - 2);
      for (int64_t i = 0; i < n - 2; ++i)
        ASSERT_TRUE(same(o[i], scalar(x[1 + i * sx], y[2 + i * sy]))) << "element " << i;
    }
  }
  std::vector<float> o(x.size());
  productThenAddF32(x.data(), y.data(), y.data() + 1, -1.0f, 1.0f, o.data(), n - 1);
  for (int64_t i = 0; i < n - 1; ++i) {
    const float product = x[i] * y[i];  // rounded on its own (no contraction in this file either)
    ASSERT_TRUE(same(o[i], -1.0f * product + y[i + 1])) << "element " << i;
  }
}

#ifdef KILN_VECTOR_MATH_COPIES
/// Every 4099th f32 bit pattern: all binades of both signs, denormals,
/// infinities and NaNs.
std::vector<float> everyBinade() {
  std::vector<float> xs;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  for (float v : {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f, 0.5f, 2.5f, -2.5f}) xs.push_back(v);
  return xs;
}

void expectSameBits(const std::vector<float>& want, const std::vector<float>& got, const std::vector<float>& xs,
                    const char* isa, const char* fn) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_TRUE(same(want[i], got[i])) << fn << "(" << xs[i] << ") on " << isa << ": " << got[i]
                                       << ", the library's clone gives " << want[i];
}

// The library's clones (AVX-512, AVX2, baseline; the machine picks one) round
// every operation alike, so machines of different ISAs compute the same
// bits: the clone this machine runs against VectorMath compiled again for
// AVX2 alone and for the x86-64 baseline alone.
TEST(VectorMath, EveryIsaGivesTheSameBits) {
  const std::vector<float> xs = everyBinade();
  const auto n = static_cast<int64_t>(xs.size());
  std::vector<float> ys = xs;
  std::reverse(ys.begin(), ys.end());
  std::vector<float> zs(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) zs[i] = xs[(i * 7919) % xs.size()];
  for (const VectorMathCopy* copy : {&kVectorMathAvx2, &kVectorMathBaseline}) {
    if (copy == &kVectorMathAvx2 && !__builtin_cpu_supports("avx2")) continue;
    SCOPED_TRACE(copy->isa);
    const std::pair<const char*, std::pair<VectorMathCopy::Unary, VectorMathCopy::Unary>> unaries[] = {
        {"exp", {expF32, copy->exp}},       {"log", {logF32, copy->log}},
        {"tanh", {tanhF32, copy->tanh}},    {"sigmoid", {sigmoidF32, copy->sigmoid}},
        {"erf", {erfF32, copy->erf}},       {"log2", {log2F32, copy->log2}},
        {"log1p", {log1pF32, copy->log1p}}, {"expm1", {expm1F32, copy->expm1}},
        {"atan", {atanF32, copy->atan}},    {"sin", {sinF32, copy->sin}},
        {"cos", {cosF32, copy->cos}}};
    std::vector<float> want(xs.size()), got(xs.size());
    for (auto [name, fns] : unaries) {
      fns.first(xs.data(), want.data(), n);
      fns.second(xs.data(), got.data(), n);
      expectSameBits(want, got, xs, copy->isa, name);
    }
    for (ExactF32 op : {ExactF32::Sqrt, ExactF32::Rsqrt, ExactF32::Reciprocal, ExactF32::Floor, ExactF32::Ceil,
                        ExactF32::Round}) {
      exactF32(op, xs.data(), want.data(), n);
      copy->exact(op, xs.data(), got.data(), n);
      expectSameBits(want, got, xs, copy->isa, "exact");
    }
    for (ArithF32 op : {ArithF32::Add, ArithF32::Sub, ArithF32::Mul, ArithF32::Div}) {
      for (auto [sx, sy] : {std::pair<int64_t, int64_t>{1, 1}, {1, 0}, {0, 1}}) {
        arithF32(op, xs.data(), sx, ys.data(), sy, want.data(), n);
        copy->arith(op, xs.data(), sx, ys.data(), sy, got.data(), n);
        expectSameBits(want, got, xs, copy->isa, "arith");
      }
    }
    productThenAddF32(xs.data(), ys.data(), zs.data(), -1.0f, 1.0f, want.data(), n);
    copy->productThenAdd(xs.data(), ys.data(), zs.data(), -1.0f, 1.0f, got.data(), n);
    expectSameBits(want, got, xs, copy->isa, "productThenAdd");
  }
}
#endif

/// The ops on a transposed view, on a strided slice and on a contiguous
/// copy: the same bits (odd extents, so runs end mid-vector).
TEST(VectorMath, EveryLayoutGivesTheSameBits) {
  std::vector<float> values(37 * 23);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i) * 0.7f) * 12.0f;
  Tensor x = kiln::from_vector(values, {37, 23});
  Tensor view = kiln::transpose(x, 0, 1);
  Tensor sliced = kiln::slice(x, 1, 1, 23, 3);
  using Op = Tensor (*)(const Tensor&);
  const std::pair<const char*, Op> ops[] = {{"exp", kiln::exp},     {"tanh", kiln::tanh}, {"sigmoid", kiln::sigmoid},
                                             {"erf", kiln::erf},     {"log", kiln::log},   {"rsqrt", kiln::rsqrt},
                                             {"round", kiln::round}, {"sqrt", kiln::sqrt}, {"sin", kiln::sin},
                                             {"cos", kiln::cos},     {"atan", kiln::atan}, {"log2", kiln::log2},
                                             {"log1p", kiln::log1p}, {"expm1", kiln::expm1}};
  for (auto [name, op] : ops) {
    SCOPED_TRACE(name);
    for (const Tensor& t : {view, sliced}) {
      std::vector<float> fromView = op(t).to_vector<float>();
      std::vector<float> fromCopy = op(t.contiguous()).to_vector<float>();
      ASSERT_EQ(fromView.size(), fromCopy.size());
      for (size_t i = 0; i < fromView.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(fromView[i]), std::bit_cast<uint32_t>(fromCopy[i])) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::interp
