// AVX-512 micro-kernel: a 14 x 32 tile (28 zmm accumulators, two B vectors,
// one broadcast: 31 of the 32 registers). Each depth step loads two B vectors
// and 14 A scalars for 28 FMAs. Edge tiles run a kernel instantiated for
// their row count and store their columns through a mask, so a thin M or N
// costs no more FMAs than it needs (rows) or a masked store (columns).
#include <immintrin.h>

#include <array>
#include <utility>

#include "runtime/interp/gemm/MicroKernel.h"

namespace kiln::interp::gemm {

namespace {

constexpr int kMR = 14, kVecs = 2, kNR = 16 * kVecs;

template <int Rows>
__attribute__((target("avx512f"))) void tileRows(int kc, const float* ap, const float* bp, float* c, int64_t ldc,
                                                 int nr, bool accumulate) {
  __m512 acc[Rows][kVecs];
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_setzero_ps();
  // The C tile is read (accumulate) or written after the loop: start its lines on their way.
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNR - 1), _MM_HINT_T1);
  }
#pragma GCC unroll 2
  for (int k = 0; k < kc; ++k) {
    __m512 b[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) b[v] = _mm512_load_ps(bp + k * kNR + 16 * v);
    const float* ak = ap + k * kMR;
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(ak[r]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
    }
  }
  __mmask16 mask[kVecs];
#pragma GCC unroll 4
  for (int v = 0; v < kVecs; ++v) {
    const int cols = nr - 16 * v;
    mask[v] = cols >= 16 ? __mmask16(0xFFFF) : cols <= 0 ? __mmask16(0) : __mmask16((1u << cols) - 1);
  }
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      __m512 x = acc[r][v];
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], cr + 16 * v));
      _mm512_mask_storeu_ps(cr + 16 * v, mask[v], x);
    }
  }
}

template <int... R>
constexpr std::array<MicroKernelFn, sizeof...(R)> tilesByRows(std::integer_sequence<int, R...>) {
  return {[](int kc, const float* ap, const float* bp, float* c, int64_t ldc, int, int nr, bool accumulate) {
    tileRows<R + 1>(kc, ap, bp, c, ldc, nr, accumulate);
  }...};
}

void microKernelAvx512(int kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                       bool accumulate) {
  static constexpr auto kTiles = tilesByRows(std::make_integer_sequence<int, kMR>{});
  kTiles[mr - 1](kc, ap, bp, c, ldc, mr, nr, accumulate);
}

}  // namespace

const MicroKernel& avx512MicroKernel() {
  static const MicroKernel k{Isa::avx512, kMR, kNR, /*kc=*/1024, /*mc=*/14 * 4, /*nc=*/2048, microKernelAvx512};
  return k;
}

}  // namespace kiln::interp::gemm
