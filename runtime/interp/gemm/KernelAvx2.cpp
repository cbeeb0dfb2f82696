// AVX2/FMA micro-kernel: a 6 x 16 tile, 12 ymm accumulators.
#include <immintrin.h>

#include "runtime/interp/gemm/MicroKernel.h"

namespace kiln::interp::gemm {

namespace {

constexpr int kMR = 6, kNR = 16;

__attribute__((target("avx2,fma"))) void microKernelAvx2(int kc, const float* ap, const float* bp, float* c,
                                                         int64_t ldc, int mr, int nr, bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
         c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
         c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
         c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(bp + k * kNR), b1 = _mm256_load_ps(bp + k * kNR + 8);
    const float* ak = ap + k * kMR;
    __m256 x = _mm256_broadcast_ss(ak + 0);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(ak + 1);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(ak + 2);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(ak + 3);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(ak + 4);
    c40 = _mm256_fmadd_ps(x, b0, c40);
    c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(ak + 5);
    c50 = _mm256_fmadd_ps(x, b0, c50);
    c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  const __m256 rows[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == kMR && nr == kNR) {
    for (int i = 0; i < kMR; ++i) {
      float* ci = c + i * ldc;
      __m256 r0 = rows[i][0], r1 = rows[i][1];
      if (accumulate) {
        r0 = _mm256_add_ps(r0, _mm256_loadu_ps(ci));
        r1 = _mm256_add_ps(r1, _mm256_loadu_ps(ci + 8));
      }
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    }
    return;
  }
  // An edge tile: spill the accumulators and store the mr x nr corner.
  alignas(32) float tile[kMR * kNR];
  for (int i = 0; i < kMR; ++i) {
    _mm256_store_ps(tile + i * kNR, rows[i][0]);
    _mm256_store_ps(tile + i * kNR + 8, rows[i][1]);
  }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * kNR + j] : tile[i * kNR + j];
}

}  // namespace

const MicroKernel& avx2MicroKernel() {
  static const MicroKernel k{Isa::avx2, kMR, kNR, /*kc=*/256, /*mc=*/72, /*nc=*/2048, microKernelAvx2};
  return k;
}

}  // namespace kiln::interp::gemm
