// The f32 array functions of VectorMath.h: branch-free bodies (selects,
// integer bit tricks, no calls) that the compiler vectorises, cloned for
// AVX-512, AVX2 and the baseline and picked at load time. Built with
// -ffp-contract=off (runtime/CMakeLists.txt): every clone rounds alike.
#include "runtime/interp/VectorMath.h"

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KILN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_VECTOR_CLONES
#endif

namespace kiln::interp {

namespace {

// NaN passes both (the comparison is false, so the first operand is kept).
inline float atLeast(float x, float lo) { return x < lo ? lo : x; }
inline float atMost(float x, float hi) { return x > hi ? hi : x; }

/// exp(x): x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so that n
/// ln2's high part is exact), e^r by its Taylor series to r^7 (truncation
/// under 6e-9 relative), times 2^n as two powers of two, so that results
/// down to the smallest denormal round once.
inline float expOne(float x) {
  // exp(89) overflows and exp(-104) rounds to 0; n stays within [-150, 129].
  const float xc = atMost(atLeast(x, -104.0f), 89.0f);
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
  return p * s1 * s2;
}

inline float tanhOne(float x) {
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

}  // namespace

KILN_VECTOR_CLONES
void expF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = expOne(x[i]);
}

KILN_VECTOR_CLONES
void tanhF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanhOne(x[i]);
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
