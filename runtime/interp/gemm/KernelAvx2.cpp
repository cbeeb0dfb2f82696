// AVX2/FMA micro-kernel: a 6 x 16 tile (12 ymm accumulators, two B vectors,
// one broadcast: 15 of the 16 registers). Each depth step loads two B vectors
// and broadcasts 6 A scalars for 12 FMAs. Edge tiles run a kernel
// instantiated for their row count, so a thin M costs no more FMAs than its
// rows need, and store their columns through a mask.
#include <immintrin.h>

#include <array>
#include <utility>

#include "runtime/interp/gemm/MicroKernel.h"

namespace kiln::interp::gemm {

namespace {

constexpr int kMR = 6, kVecs = 2, kNR = 8 * kVecs;

/// Lanes [0, cols) of an 8-float vector, as a maskload/maskstore mask.
__attribute__((target("avx2"))) inline __m256i laneMask(int cols) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int Rows>
__attribute__((target("avx2,fma"))) void tileRows(int kc, const float* ap, const float* bp, float* c, int64_t ldc,
                                                  int nr, bool accumulate) {
  __m256 acc[Rows][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm256_setzero_ps();
  // C is read (accumulate) or written after the loop: start its lines on
  // their way now, since C's rows are often a power of two apart.
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNR - 1), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (int k = 0; k < kc; ++k) {
    __m256 b[kVecs];
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) b[v] = _mm256_load_ps(bp + k * kNR + 8 * v);
    const float* ak = ap + k * kMR;
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const __m256 x = _mm256_broadcast_ss(ak + r);
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm256_fmadd_ps(x, b[v], acc[r][v]);
    }
  }
  if (nr == kNR) {
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      float* cr = c + r * ldc;
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) {
        __m256 x = acc[r][v];
        if (accumulate) x = _mm256_add_ps(x, _mm256_loadu_ps(cr + 8 * v));
        _mm256_storeu_ps(cr + 8 * v, x);
      }
    }
    return;
  }
  __m256i mask[kVecs];
#pragma GCC unroll 2
  for (int v = 0; v < kVecs; ++v) mask[v] = laneMask(nr - 8 * v);
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) {
      if (nr <= 8 * v) break;
      __m256 x = acc[r][v];
      if (accumulate) x = _mm256_add_ps(x, _mm256_maskload_ps(cr + 8 * v, mask[v]));
      _mm256_maskstore_ps(cr + 8 * v, mask[v], x);
    }
  }
}

template <int... R>
constexpr std::array<MicroKernelFn, sizeof...(R)> tilesByRows(std::integer_sequence<int, R...>) {
  return {[](int kc, const float* ap, const float* bp, float* c, int64_t ldc, int, int nr, bool accumulate) {
    tileRows<R + 1>(kc, ap, bp, c, ldc, nr, accumulate);
  }...};
}

void microKernelAvx2(int kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                     bool accumulate) {
  static constexpr auto kTiles = tilesByRows(std::make_integer_sequence<int, kMR>{});
  kTiles[mr - 1](kc, ap, bp, c, ldc, mr, nr, accumulate);
}

}  // namespace

const MicroKernel& avx2MicroKernel() {
  static const MicroKernel k{Isa::avx2, kMR, kNR, /*kc=*/256, /*mc=*/72, /*nc=*/2048, microKernelAvx2};
  return k;
}

}  // namespace kiln::interp::gemm
