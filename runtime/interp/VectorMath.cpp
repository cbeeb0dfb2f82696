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

/// x = m 2^e with m in [sqrt(1/2), sqrt(2)) (denormals scaled into the
/// normal range first), f = m - 1, and the part of Cephes' logf polynomial
/// that log and log2 share: log(m) = f - f^2/2 + f^3 p(f).
struct LogParts {
  float f, z, fzp;  ///< f, f^2, f^3 p(f)
  int32_t e;
};
[[gnu::always_inline]] inline LogParts logParts(float x) {
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
  return {f, z, f * z * p, e};
}

/// A logarithm's special values, which a positive finite x takes none of:
/// -inf at 0, NaN below 0 and for NaN, +inf at +inf; r otherwise.
[[gnu::always_inline]] inline float logSpecials(float x, float r) {
  r = x == 0.0f ? -std::numeric_limits<float>::infinity() : r;
  r = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  return x != x ? x : r;
}

/// log(x) = log(m) + e ln2, ln2 in two parts.
[[gnu::always_inline]] inline float logOne(float x) {
  const LogParts l = logParts(x);
  const float ef = static_cast<float>(l.e);
  float y = l.fzp;
  y = y + ef * -2.12194440e-4f;
  y = y + l.z * -0.5f;
  return logSpecials(x, (l.f + y) + ef * 0.693359375f);
}

/// log2(x) = e + log2(m): exact at powers of two, where log2(m) is 0.
[[gnu::always_inline]] inline float log2One(float x) {
  const LogParts l = logParts(x);
  const float y = l.fzp + l.z * -0.5f;  // log(m) - f
  // log2(m) = (f + y) log2(e), with log2(e) split so that f's product keeps
  // its precision; e is added last.
  constexpr float kLog2eHigh = 1.4375f, kLog2eLow = 5.19504088896e-3f;  // high + low = log2(e)
  const float lm2 = l.f * kLog2eHigh + (l.f * kLog2eLow + y * 1.44269504088896341f);
  return logSpecials(x, lm2 + static_cast<float>(l.e));
}

/// log1p(x) = log(u) x / (u - 1) with u = 1 + x rounded (Goldberg): the
/// rounding of 1 + x cancels. x itself where u rounds to 1 (tiny x, -0).
[[gnu::always_inline]] inline float log1pOne(float x) {
  const float u = 1.0f + x;
  const float d = u - 1.0f;
  float r = d == 0.0f ? x : logOne(u) * (x / d);
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  // Below -1 one NaN, whichever operand order the compiler picked.
  r = x < -1.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  return x != x ? x : r;
}

/// expm1(x) = (u - 1) x / log(u) with u = e^x rounded (Kahan): the rounding
/// of e^x cancels. x itself where u rounds to 1 (tiny x, -0); -1 where u
/// is below half an ulp of 1; +inf where e^x overflows.
[[gnu::always_inline]] inline float expm1One(float x) {
  const float u = expOne(x);
  const float um1 = u - 1.0f;
  float r = um1 * (x / logOne(u));
  r = u == 1.0f ? x : r;
  r = um1 == -1.0f ? -1.0f : r;
  r = u == std::numeric_limits<float>::infinity() ? u : r;
  return x != x ? x : r;
}

/// atan(x) by Cephes' atanf: |x| reduced to [0, tan(pi/8)] through
/// atan(x) = pi/2 + atan(-1/x) and pi/4 + atan((x - 1) / (x + 1)), a degree-9
/// odd polynomial, the sign of x (-0 stays -0; +-inf gives +-pi/2).
[[gnu::always_inline]] inline float atanOne(float x) {
  const float a = std::fabs(x);
  const bool big = a > 2.414213562373095f;  // tan(3 pi / 8)
  const bool mid = !big && a > 0.4142135623730950f;  // tan(pi / 8)
  const float t = big ? -1.0f / a : (mid ? (a - 1.0f) / (a + 1.0f) : a);
  const float base = big ? 1.57079632679489662f : (mid ? 0.785398163397448310f : 0.0f);
  const float z = t * t;
  float p = 8.05374449538e-2f;
  p = p * z - 1.38776856032e-1f;
  p = p * z + 1.99777106478e-1f;
  p = p * z - 3.33329491539e-1f;
  const float r = base + (p * z * t + t);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(r) | (std::bit_cast<uint32_t>(x) & 0x80000000u));
}

/// sin and cos in double precision, then rounded once: x = k pi/2 + r with
/// pi/2 in two parts (fdlibm's: 33 bits, so k times the first is exact for
/// |k| < 2^20, and the rest), |r| <= pi/4, and Taylor series of sin r to
/// r^11 and cos r to r^12 (truncation under 1e-11 relative). Valid while
/// |x| <= kTrigLimit; sinF32/cosF32 give larger, infinite and NaN inputs to
/// libm.
constexpr float kTrigLimit = 100000.0f;
struct QuarterTurns {
  double sin, cos;
  uint32_t quadrant;  ///< k mod 4
};
[[gnu::always_inline]] inline QuarterTurns quarterTurns(float xf) {
  const double x = std::fabs(xf) <= kTrigLimit ? static_cast<double>(xf) : 0.0;
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: rounds to an integer in the low bits
  const double shifted = x * 0.636619772367581343 + kShift;
  const double k = shifted - kShift;
  const auto quadrant = static_cast<uint32_t>(std::bit_cast<uint64_t>(shifted)) & 3u;
  const double r = (x - k * 1.57079632673412561417) - k * 6.07710050650619224932e-11;
  const double z = r * r;
  double s = -1.0 / 39916800.0;
  s = s * z + 1.0 / 362880.0;
  s = s * z - 1.0 / 5040.0;
  s = s * z + 1.0 / 120.0;
  s = s * z - 1.0 / 6.0;
  s = s * z * r + r;
  double c = 1.0 / 479001600.0;
  c = c * z - 1.0 / 3628800.0;
  c = c * z + 1.0 / 40320.0;
  c = c * z - 1.0 / 720.0;
  c = c * z + 1.0 / 24.0;
  c = c * z - 0.5;
  c = c * z + 1.0;
  return {s, c, quadrant};
}

[[gnu::always_inline]] inline float sinOne(float x) {
  const QuarterTurns t = quarterTurns(x);
  // sin(r + k pi/2) = sin r, cos r, -sin r, -cos r for k mod 4 = 0..3.
  const double v = (t.quadrant & 1u) ? t.cos : t.sin;
  const float r = static_cast<float>((t.quadrant & 2u) ? -v : v);
  return x == 0.0f ? x : r;  // sin(-0) = -0
}

[[gnu::always_inline]] inline float cosOne(float x) {
  const QuarterTurns t = quarterTurns(x);
  // cos(r + k pi/2) = cos r, -sin r, -cos r, sin r.
  const double v = (t.quadrant & 1u) ? t.sin : t.cos;
  return static_cast<float>(((t.quadrant + 1u) & 2u) ? -v : v);
}

/// Runs `vector` over x in blocks, then gives the elements beyond
/// kTrigLimit (and infinities and NaN) to `libm`; their inputs are kept
/// first, so y may be x itself.
template <class Vector, class Libm>
[[gnu::always_inline]] inline void trigBlocks(const float* x, float* y, int64_t n, Vector vector, Libm libm) {
  constexpr int64_t kBlock = 256;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = n - b < kBlock ? n - b : kBlock;
    float kept[kBlock];
    int32_t at[kBlock];
    int32_t count = 0;
    for (int64_t i = 0; i < m; ++i) {
      if (!(std::fabs(x[b + i]) <= kTrigLimit)) {
        kept[count] = x[b + i];
        at[count++] = static_cast<int32_t>(i);
      }
    }
    for (int64_t i = 0; i < m; ++i) y[b + i] = vector(x[b + i]);
    for (int32_t j = 0; j < count; ++j) y[b + at[j]] = libm(kept[j]);
  }
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

KILN_VECTOR_CLONES
void log2F32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = log2One(x[i]);
}

KILN_VECTOR_CLONES
void log1pF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = log1pOne(x[i]);
}

KILN_VECTOR_CLONES
void expm1F32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = expm1One(x[i]);
}

KILN_VECTOR_CLONES
void atanF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = atanOne(x[i]);
}

KILN_VECTOR_CLONES
void sinF32(const float* x, float* y, int64_t n) {
  trigBlocks(x, y, n, [](float v) { return sinOne(v); }, [](float v) { return std::sin(v); });
}

KILN_VECTOR_CLONES
void cosF32(const float* x, float* y, int64_t n) {
  trigBlocks(x, y, n, [](float v) { return cosOne(v); }, [](float v) { return std::cos(v); });
}

}  // namespace kiln::interp
