// AVX2/FMA micro-kernel: a 6 x 16 tile (12 ymm accumulators, two B vectors,
// one broadcast: 15 of the 16 registers). Each depth step loads two B vectors
// and broadcasts 6 A scalars for 12 FMAs. Edge tiles run a kernel
// instantiated for their row count, so a thin M costs no more FMAs than its
// rows need, and store their columns through a mask. A second form of the
// tile reads A and B where they are, for products too small to pack.
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

/// Zeroes the accumulators and starts C's lines on their way: C is read
/// (accumulate) or written after the depth loop, and its rows are often a
/// power of two apart.
template <int Rows>
__attribute__((target("avx2"))) inline void startTile(__m256 (&acc)[Rows][kVecs], const float* c, int64_t ldc) {
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm256_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNR - 1), _MM_HINT_T0);
  }
}

/// Stores (or, `accumulate`, adds) the accumulators to C's columns [0, nr),
/// through masks when nr < 16.
template <int Rows>
__attribute__((target("avx2"))) inline void storeTile(const __m256 (&acc)[Rows][kVecs], float* c, int64_t ldc, int nr,
                                                      bool accumulate) {
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

template <int Rows>
__attribute__((target("avx2,fma"))) void tileRows(int kc, const float* ap, const float* bp, float* c, int64_t ldc,
                                                  int nr, bool accumulate) {
  __m256 acc[Rows][kVecs];
  startTile<Rows>(acc, c, ldc);
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
  storeTile<Rows>(acc, c, ldc, nr, accumulate);
}

/// The same tile on unpacked operands (DirectKernelFn): the A scalars
/// broadcast from A (row r at step k: a[r * lda + k], or a[k * lda + r]
/// when A is column-major), the B vectors load from B's rows (through a
/// mask in a tile narrower than 16 columns, which must not read past B's
/// row). The FMAs and their order are the packed tile's, so are the bits.
template <int Rows, bool Masked, bool ColumnMajorA>
__attribute__((target("avx2,fma"))) void directTileRows(int kc, const float* a, int64_t lda, const float* b,
                                                        int64_t ldb, float* c, int64_t ldc, int nr,
                                                        bool accumulate) {
  __m256 acc[Rows][kVecs];
  startTile<Rows>(acc, c, ldc);
  __m256i mask[kVecs] = {};
  if constexpr (Masked) {
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) mask[v] = laneMask(nr - 8 * v);
  }
#pragma GCC unroll 4
  for (int k = 0; k < kc; ++k) {
    __m256 bv[kVecs];
    const float* bk = b + k * ldb;
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v)
      if constexpr (Masked)
        bv[v] = _mm256_maskload_ps(bk + 8 * v, mask[v]);
      else
        bv[v] = _mm256_loadu_ps(bk + 8 * v);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const __m256 x = _mm256_broadcast_ss(ColumnMajorA ? a + k * lda + r : a + r * lda + k);
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm256_fmadd_ps(x, bv[v], acc[r][v]);
    }
  }
  storeTile<Rows>(acc, c, ldc, nr, accumulate);
}

template <bool Masked, bool ColumnMajorA, int... R>
constexpr std::array<DirectKernelFn, sizeof...(R)> directTilesByRows(std::integer_sequence<int, R...>) {
  return {[](int kc, const float* a, int64_t lda, bool, const float* b, int64_t ldb, float* c, int64_t ldc, int,
             int nr, bool accumulate) {
    directTileRows<R + 1, Masked, ColumnMajorA>(kc, a, lda, b, ldb, c, ldc, nr, accumulate);
  }...};
}

void directKernelAvx2(int kc, const float* a, int64_t lda, bool columnMajorA, const float* b, int64_t ldb, float* c,
                      int64_t ldc, int mr, int nr, bool accumulate) {
  using Rows = std::make_integer_sequence<int, kMR>;
  static constexpr std::array<std::array<DirectKernelFn, kMR>, 4> kTiles = {
      directTilesByRows<false, false>(Rows{}), directTilesByRows<true, false>(Rows{}),
      directTilesByRows<false, true>(Rows{}), directTilesByRows<true, true>(Rows{})};
  kTiles[(nr == kNR ? 0 : 1) + (columnMajorA ? 2 : 0)][mr - 1](kc, a, lda, columnMajorA, b, ldb, c, ldc, mr, nr,
                                                               accumulate);
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
  static const MicroKernel k{Isa::avx2, kMR, kNR, /*kc=*/256, /*mc=*/72, /*nc=*/2048, microKernelAvx2,
                             /*packRowMajorA=*/nullptr, /*packColumnMajorB=*/nullptr, directKernelAvx2};
  return k;
}

}  // namespace kiln::interp::gemm
