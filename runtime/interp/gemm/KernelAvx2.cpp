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
/// power of two apart. So are the residual's lines the epilogue will read.
template <int Rows>
__attribute__((target("avx2"))) inline void startTile(__m256 (&acc)[Rows][kVecs], const float* c, int64_t ldc,
                                                      const TileEpilogue* epilogue) {
  const float* residual = epilogue ? epilogue->residual : nullptr;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm256_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNR - 1), _MM_HINT_T0);
    if (residual) {
      _mm_prefetch(reinterpret_cast<const char*>(residual + r * epilogue->residualRs), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(residual + r * epilogue->residualRs + kNR - 1), _MM_HINT_T0);
    }
  }
}

/// The epilogue on the vector of sums of row r's columns [first, first +
/// 8): the scale, their bias and residual (`mask`: the lanes that are
/// columns of the tile; neither is read past them), then relu as `x < 0 ? 0
/// : x` (a NaN compares false and stays).
template <bool Masked>
__attribute__((target("avx2"))) inline __m256 finishVector(__m256 x, const TileEpilogue* e, int r, int first,
                                                           __m256i mask) {
  if (!e) return x;
  if (e->scaled) x = _mm256_mul_ps(x, _mm256_set1_ps(e->scale));
  if (e->bias)
    x = _mm256_add_ps(x, Masked ? _mm256_maskload_ps(e->bias + first, mask) : _mm256_loadu_ps(e->bias + first));
  if (e->residual) {
    const float* res = e->residual + r * e->residualRs + first;
    x = _mm256_add_ps(x, Masked ? _mm256_maskload_ps(res, mask) : _mm256_loadu_ps(res));
  }
  if (e->relu) x = _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  return x;
}

/// Stores (or, `accumulate`, adds) the accumulators to C's columns [0, nr),
/// through masks when nr < 16, with the epilogue if one is given.
template <int Rows>
__attribute__((target("avx2"))) inline void storeTile(const __m256 (&acc)[Rows][kVecs], float* c, int64_t ldc, int nr,
                                                      bool accumulate, const TileEpilogue* epilogue) {
  if (nr == kNR) {
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      float* cr = c + r * ldc;
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) {
        __m256 x = acc[r][v];
        if (accumulate) x = _mm256_add_ps(x, _mm256_loadu_ps(cr + 8 * v));
        x = finishVector<false>(x, epilogue, r, 8 * v, __m256i{});
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
      x = finishVector<true>(x, epilogue, r, 8 * v, mask[v]);
      _mm256_maskstore_ps(cr + 8 * v, mask[v], x);
    }
  }
}

/// Transposes an 8 x 8 block in place: r[i] lane j becomes r[j] lane i.
__attribute__((target("avx2"))) inline void transpose8x8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const int q = 4 * h;
    s[q] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

/// Loads `lines` (<= 8) lines of `depth` (<= 8) floats, line l at
/// src + l * stride, transposed: r[t] holds step t of every line, lines past
/// `lines` zero. Reads nothing past a line's `depth` floats.
__attribute__((target("avx2"))) inline void loadTransposed(const float* src, int64_t stride, int lines, int depth,
                                                           __m256 (&r)[8]) {
  const __m256i depthLanes = laneMask(depth);
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l)
    r[l] = l >= lines   ? _mm256_setzero_ps()
           : depth == 8 ? _mm256_loadu_ps(src + l * stride)
                        : _mm256_maskload_ps(src + l * stride, depthLanes);
  transpose8x8(r);
}

/// Packs A with contiguous rows (PackRowMajorAFn) 8 depth steps at a time:
/// up to 6 row segments transposed, each step's 6 floats stored. Rows past
/// the matrix are zero.
__attribute__((target("avx2"))) void packRowMajorA(StridedMatrix a, int64_t i0, int mc, int64_t k0, int kc,
                                                   float* dst) {
  for (int p = 0; p < mc; p += kMR) {
    const int rows = mc - p < kMR ? mc - p : kMR;
    const float* src = a.p + (i0 + p) * a.rs + k0;
    float* d = dst + static_cast<int64_t>(p) * kc;
    for (int k = 0; k < kc; k += 8) {
      const int depth = kc - k < 8 ? kc - k : 8;
      __m256 r[8];
      loadTransposed(src + k, a.rs, rows, depth, r);
      for (int t = 0; t < depth; ++t) {
        // 6 floats: the low 4 lanes, then lanes 4 and 5.
        float* step = d + static_cast<int64_t>(k + t) * kMR;
        _mm_storeu_ps(step, _mm256_castps256_ps128(r[t]));
        _mm_storel_pi(reinterpret_cast<__m64*>(step + 4), _mm256_extractf128_ps(r[t], 1));
      }
    }
  }
}

/// Packs A whose columns are contiguous (PackRowMajorAFn's layout from rs ==
/// 1: a transposed view, the weight gradient's x^T * dY): each depth step's
/// 6 rows are 6 floats in a row, one masked load. Rows past the matrix are
/// zero.
__attribute__((target("avx2"))) void packColumnMajorA(StridedMatrix a, int64_t i0, int mc, int64_t k0, int kc,
                                                      float* dst) {
  for (int p = 0; p < mc; p += kMR) {
    const int rows = mc - p < kMR ? mc - p : kMR;
    const __m256i rowLanes = laneMask(rows);
    const float* src = a.p + (i0 + p) + k0 * a.cs;
    float* d = dst + static_cast<int64_t>(p) * kc;
    for (int k = 0; k < kc; ++k, src += a.cs, d += kMR) {
      const __m256 step = _mm256_maskload_ps(src, rowLanes);
      // 6 floats: the low 4 lanes, then lanes 4 and 5.
      _mm_storeu_ps(d, _mm256_castps256_ps128(step));
      _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(step, 1));
    }
  }
}

/// Packs B with contiguous rows (PackRowMajorBFn): each row of B, read in
/// order, gives each panel its two vectors of that depth step. Columns past
/// `cols` (the last panel's) are zero.
__attribute__((target("avx2"))) void packRowMajorB(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols,
                                                   float* dst) {
  const int full = cols / kNR, rest = cols % kNR;
  const int64_t panelStride = static_cast<int64_t>(kc) * kNR;
  const __m256i low = laneMask(rest), high = laneMask(rest - 8);
  for (int k = 0; k < kc; ++k) {
    const float* src = b.p + (k0 + k) * b.rs + j0;
    float* d = dst + static_cast<int64_t>(k) * kNR;
    for (int p = 0; p < full; ++p, src += kNR, d += panelStride) {
      _mm256_storeu_ps(d, _mm256_loadu_ps(src));
      _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + 8));
    }
    if (rest) {
      _mm256_storeu_ps(d, _mm256_maskload_ps(src, low));
      _mm256_storeu_ps(d + 8, _mm256_maskload_ps(src + 8, high));
    }
  }
}

/// Packs one 16-wide panel of B whose columns are contiguous
/// (PackColumnMajorBFn; a transposed view, x * W^T): 8 columns by 8 depth
/// steps at a time, transposed into 8 steps of the panel. Columns past the
/// matrix are zero.
__attribute__((target("avx2"))) void packColumnMajorB(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols,
                                                      float* dst) {
  for (int h = 0; h < kVecs; ++h) {
    const int first = 8 * h;
    const int lines = cols - first < 0 ? 0 : (cols - first > 8 ? 8 : cols - first);
    const float* src = b.p + k0 + (j0 + first) * b.cs;
    for (int k = 0; k < kc; k += 8) {
      const int depth = kc - k < 8 ? kc - k : 8;
      __m256 r[8];
      loadTransposed(src + k, b.cs, lines, depth, r);
      for (int t = 0; t < depth; ++t) _mm256_storeu_ps(dst + static_cast<int64_t>(k + t) * kNR + first, r[t]);
    }
  }
}

template <int Rows>
__attribute__((target("avx2,fma"))) void tileRows(int kc, const float* ap, const float* bp, float* c, int64_t ldc,
                                                  int nr, bool accumulate, const TileEpilogue* epilogue) {
  __m256 acc[Rows][kVecs];
  startTile<Rows>(acc, c, ldc, epilogue);
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
  storeTile<Rows>(acc, c, ldc, nr, accumulate, epilogue);
}

/// The same tile on unpacked operands (DirectKernelFn): the A scalars
/// broadcast from A (row r at step k: a[r * lda + k], or a[k * lda + r]
/// when A is column-major), the B vectors load from B's rows (through a
/// mask in a tile narrower than 16 columns, which must not read past B's
/// row). The FMAs and their order are the packed tile's, so are the bits.
template <int Rows, bool Masked, bool ColumnMajorA>
__attribute__((target("avx2,fma"))) void directTileRows(int kc, const float* a, int64_t lda, const float* b,
                                                        int64_t ldb, float* c, int64_t ldc, int nr,
                                                        bool accumulate, const TileEpilogue* epilogue) {
  __m256 acc[Rows][kVecs];
  startTile<Rows>(acc, c, ldc, epilogue);
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
  storeTile<Rows>(acc, c, ldc, nr, accumulate, epilogue);
}

template <bool Masked, bool ColumnMajorA, int... R>
constexpr std::array<DirectKernelFn, sizeof...(R)> directTilesByRows(std::integer_sequence<int, R...>) {
  return {[](int kc, const float* a, int64_t lda, bool, const float* b, int64_t ldb, float* c, int64_t ldc, int,
             int nr, bool accumulate, const TileEpilogue* epilogue) {
    directTileRows<R + 1, Masked, ColumnMajorA>(kc, a, lda, b, ldb, c, ldc, nr, accumulate, epilogue);
  }...};
}

void directKernelAvx2(int kc, const float* a, int64_t lda, bool columnMajorA, const float* b, int64_t ldb, float* c,
                      int64_t ldc, int mr, int nr, bool accumulate, const TileEpilogue* epilogue) {
  using Rows = std::make_integer_sequence<int, kMR>;
  static constexpr std::array<std::array<DirectKernelFn, kMR>, 4> kTiles = {
      directTilesByRows<false, false>(Rows{}), directTilesByRows<true, false>(Rows{}),
      directTilesByRows<false, true>(Rows{}), directTilesByRows<true, true>(Rows{})};
  kTiles[(nr == kNR ? 0 : 1) + (columnMajorA ? 2 : 0)][mr - 1](kc, a, lda, columnMajorA, b, ldb, c, ldc, mr, nr,
                                                               accumulate, epilogue);
}

template <int... R>
constexpr std::array<MicroKernelFn, sizeof...(R)> tilesByRows(std::integer_sequence<int, R...>) {
  return {[](int kc, const float* ap, const float* bp, float* c, int64_t ldc, int, int nr, bool accumulate,
             const TileEpilogue* epilogue) { tileRows<R + 1>(kc, ap, bp, c, ldc, nr, accumulate, epilogue);
  }...};
}

void microKernelAvx2(int kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                     bool accumulate, const TileEpilogue* epilogue) {
  static constexpr auto kTiles = tilesByRows(std::make_integer_sequence<int, kMR>{});
  kTiles[mr - 1](kc, ap, bp, c, ldc, mr, nr, accumulate, epilogue);
}

}  // namespace

const MicroKernel& avx2MicroKernel() {
  static const MicroKernel k{Isa::avx2, kMR, kNR, /*kc=*/256, /*mc=*/72, /*nc=*/2048, microKernelAvx2,
                             packRowMajorA, packColumnMajorB, directKernelAvx2, packColumnMajorA,
                             packRowMajorB};
  return k;
}

}  // namespace kiln::interp::gemm
