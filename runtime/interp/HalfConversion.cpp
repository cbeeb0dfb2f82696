#include "runtime/interp/HalfConversion.h"

#include <immintrin.h>

#include <algorithm>

#include "runtime/core/Half.h"

namespace kiln::interp {

namespace {

bool cpuHasF16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

/// Contiguous f16 to f32 by vcvtph2ps: core::halfToFloat's values (a
/// signalling NaN comes out quiet), whatever the denormals-are-zero mode.
__attribute__((target("avx,f16c"))) void widenF16(const uint16_t* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) out[i] = core::halfToFloat(x[i]);
}

/// f32 to f16 by vcvtps2ph, rounding to nearest even: core::floatToHalf's
/// bits, but for NaNs, whose payload the instruction keeps: those few are
/// converted again by core::floatToHalf (the canonical quiet NaN).
__attribute__((target("avx,f16c"))) void narrowF16(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0)
      for (int64_t j = i; j < i + 8; ++j)
        if (x[j] != x[j]) out[j] = core::floatToHalf(x[j]);
  }
  for (; i < n; ++i) out[i] = core::floatToHalf(x[i]);
}

}  // namespace

void widenHalfRun(DType t, const uint16_t* x, int64_t stride, float* out, int64_t n) {
  if (stride == 0) {  // a broadcast value
    std::fill(out, out + n, t == DType::bf16 ? core::bf16ToFloat(*x) : core::halfToFloat(*x));
    return;
  }
  if (t == DType::bf16) {
    if (stride == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = core::bf16ToFloat(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = core::bf16ToFloat(x[i * stride]);
    }
    return;
  }
  if (stride == 1 && cpuHasF16c()) return widenF16(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = core::halfToFloat(x[i * stride]);
}

void narrowHalfRun(DType t, const float* x, uint16_t* out, int64_t n) {
  if (t == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = core::floatToBf16(x[i]);
    return;
  }
  if (cpuHasF16c()) return narrowF16(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = core::floatToHalf(x[i]);
}

}  // namespace kiln::interp
