// The f32 array functions of VectorMath.h: branch-free bodies (selects,
// integer bit tricks, no calls) that the compiler vectorises, cloned for
// AVX-512, AVX2 and the baseline and picked at load time. Built with
// -ffp-contract=off (runtime/CMakeLists.txt): every clone rounds alike.
#include "runtime/interp/VectorMath.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/interp/VectorClones.h"

namespace kiln::interp {

namespace {

// Inlined into each clone (a call would run the baseline version). NaN
// passes both (the comparison is false, so the first operand is kept).
[[gnu::always_inline]] inline float atLeast(float x, float lo) { return x < lo ? lo : x; }
[[gnu::always_inline]] inline float atMost(float x, float hi) { return x > hi ? hi : x; }

/// exp(x): x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so that n
/// ln2's high part is exact), e^r by its Taylor series to r^7 (truncation
/// under 6e-9 relative), times 2^n as two powers of two, so that results
/// down to the smallest denormal round once. Below ln(2^-150), where exp
/// rounds to 0, a lane computes exp(0) and selects 0, as compiled code does:
/// an underflowing multiply costs a microcode assist on Intel cores, and a
/// masked softmax's -1e9 scores would take one in every masked lane.
[[gnu::always_inline]] inline float expOne(float x) {
  const bool zero = x < -103.972084f;
  // exp(89) overflows; n stays within [-150, 129]. NaN passes both.
  const float xc = atMost(atLeast(zero ? 0.0f : x, -104.0f), 89.0f);
  // n = round(xc log2 e): adding 1.5 * 2^23 rounds to an integer held in
  // the low mantissa bits.
  constexpr float kShift = 12582912.0f;
  const float shifted = xc * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  const int32_t ni = static_cast<int32_t>(std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kShift));
  const float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t half = ni >> 1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(half + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(ni - half + 127) << 23);
  return zero ? 0.0f : p * s1 * s2;
}

[[gnu::always_inline]] inline float tanhOne(float x) {
  constexpr float kClamp = 7.90531110763549805f;  // where p / q reaches 1
  const float xc = atMost(atLeast(x, -kClamp), kClamp);
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float t = atMost(atLeast(p / q, -1.0f), 1.0f);
  // Near 0, tanh(x) rounds to x (and keeps -0 and denormals exact).
  return std::fabs(x) < 0.0004f ? x : t;
}

/// erf(x): the rational function (degree 13/8 over [-4, 4], ±1 outside)
/// of Eigen, XLA and TVM; below 2^-13, where erf(x) rounds to 2x/sqrt(pi),
/// that product (one rounding, so tiny and denormal inputs keep their
/// precision, and -0 stays -0).
[[gnu::always_inline]] inline float erfOne(float x) {
  const float xc = atMost(atLeast(x, -4.0f), 4.0f);
  const float x2 = xc * xc;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * xc;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  const float e = atMost(atLeast(p / q, -1.0f), 1.0f);
  return std::fabs(x) < 0x1p-13f ? x * 1.12837916709551257f : e;
}

/// log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = log1p(m - 1)
/// by Cephes' logf polynomial, plus e ln2 in two parts. Denormals are
/// scaled into the normal range first; log(0) = -inf, log(x < 0) = NaN,
/// log(+inf) = +inf.
[[gnu::always_inline]] inline float logOne(float x) {
  const bool denormal = x < 0x1p-126f;
  const float xs = denormal ? x * 0x1p23f : x;
  const uint32_t bits = std::bit_cast<uint32_t>(xs);
  // The mantissa with exponent 0 (m in [1, 2)), then halved above sqrt(2).
  int32_t e = static_cast<int32_t>(bits >> 23) - 127 - (denormal ? 23 : 0);
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f800000u);
  const bool high = m > 1.41421356237309505f;
  m = high ? m * 0.5f : m;
  e = high ? e + 1 : e;
  const float f = m - 1.0f;
  const float ef = static_cast<float>(e);
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f + -1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f + -1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f + -1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f + -2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  float y = f * z * p;
  y = y + ef * -2.12194440e-4f;
  y = y + z * -0.5f;
  float r = (f + y) + ef * 0.693359375f;
  // Special values (x > 0 finite takes none of these).
  r = x == 0.0f ? -std::numeric_limits<float>::infinity() : r;
  r = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  return x != x ? x : r;
}

/// The four stride cases of arithF32 with the op inlined into each loop.
template <class F>
[[gnu::always_inline]] inline void stridedLoops(F f, const float* x, int64_t sx, const float* y, int64_t sy, float* o,
                                                int64_t n) {
  if (sx == 1 && sy == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
  } else if (sx == 1) {
    const float b = *y;
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], b);
  } else if (sy == 1) {
    const float a = *x;
    for (int64_t i = 0; i < n; ++i) o[i] = f(a, y[i]);
  } else {
    const float v = f(*x, *y);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

}  // namespace

KILN_VECTOR_CLONES
void exactF32(ExactF32 op, const float* x, float* y, int64_t n) {
  switch (op) {
    case ExactF32::Sqrt:
      for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
      return;
    case ExactF32::Rsqrt:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / std::sqrt(x[i]);
      return;
    case ExactF32::Reciprocal:
      for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / x[i];
      return;
    case ExactF32::Floor:
      for (int64_t i = 0; i < n; ++i) y[i] = std::floor(x[i]);
      return;
    case ExactF32::Ceil:
      for (int64_t i = 0; i < n; ++i) y[i] = std::ceil(x[i]);
      return;
    case ExactF32::Round:
      for (int64_t i = 0; i < n; ++i) y[i] = std::nearbyint(x[i]);
      return;
  }
}

KILN_VECTOR_CLONES
void arithF32(ArithF32 op, const float* x, int64_t sx, const float* y, int64_t sy, float* o, int64_t n) {
  switch (op) {
    case ArithF32::Add: return stridedLoops([](float a, float b) { return a + b; }, x, sx, y, sy, o, n);
    case ArithF32::Sub: return stridedLoops([](float a, float b) { return a - b; }, x, sx, y, sy, o, n);
    case ArithF32::Mul: return stridedLoops([](float a, float b) { return a * b; }, x, sx, y, sy, o, n);
    case ArithF32::Div: return stridedLoops([](float a, float b) { return a / b; }, x, sx, y, sy, o, n);
  }
}

KILN_VECTOR_CLONES
void productThenAddF32(const float* x, const float* y, const float* z, float pSign, float cSign, float* o,
                       int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = pSign * (x[i] * y[i]) + cSign * z[i];
}

KILN_VECTOR_CLONES
void expF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = expOne(x[i]);
}

KILN_VECTOR_CLONES
void tanhF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanhOne(x[i]);
}

KILN_VECTOR_CLONES
void erfF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erfOne(x[i]);
}

KILN_VECTOR_CLONES
void logF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = logOne(x[i]);
}

KILN_VECTOR_CLONES
void sigmoidF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = expOne(-std::fabs(v));
    const float s = 1.0f / (1.0f + e);
    y[i] = v < 0.0f ? e * s : s;
  }
}

}  // namespace kiln::interp
