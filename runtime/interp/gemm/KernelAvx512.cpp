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

/// Lane masks of a tile's Vecs vectors for its first nr columns.
template <int Vecs>
__attribute__((target("avx512f"))) inline void columnMasks(int nr, __mmask16 (&mask)[Vecs]) {
#pragma GCC unroll 4
  for (int v = 0; v < Vecs; ++v) {
    const int cols = nr - 16 * v;
    mask[v] = cols >= 16 ? __mmask16(0xFFFF) : cols <= 0 ? __mmask16(0) : __mmask16((1u << cols) - 1);
  }
}

/// Zeroes a tile's accumulators. The C tile is read (accumulate) or written
/// after the depth loop: start its lines on their way, into L2, since C's
/// rows are often a power of two apart and would fight over one L1 set.
/// So are the residual's lines the epilogue will read.
template <int Rows, int Vecs>
__attribute__((target("avx512f"))) inline void startTile(__m512 (&acc)[Rows][Vecs], const float* c, int64_t ldc,
                                                         const TileEpilogue* epilogue) {
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v) acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16 * Vecs - 1), _MM_HINT_T1);
  }
  if (const float* residual = epilogue ? epilogue->residual : nullptr) {
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(residual + r * epilogue->residualRs), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(residual + r * epilogue->residualRs + 16 * Vecs - 1), _MM_HINT_T1);
    }
  }
}

/// Stores (or adds, `accumulate`) a tile's first nr columns to C, with the
/// epilogue if one is given: the scale, the bias of each column and the
/// residual's element (neither read past nr), then relu as `x < 0 ? 0 : x`
/// (a NaN compares false and stays).
template <int Rows, int Vecs>
__attribute__((target("avx512f"))) inline void storeTile(__m512 (&acc)[Rows][Vecs], float* c, int64_t ldc, int nr,
                                                         bool accumulate, const TileEpilogue* epilogue) {
  __mmask16 mask[Vecs];
  columnMasks<Vecs>(nr, mask);
  __m512 bias[Vecs];
  const bool addBias = epilogue && epilogue->bias, relu = epilogue && epilogue->relu;
  const bool scaled = epilogue && epilogue->scaled;
  const __m512 scale = _mm512_set1_ps(scaled ? epilogue->scale : 1.0f);
  const float* residual = epilogue ? epilogue->residual : nullptr;
#pragma GCC unroll 4
  for (int v = 0; v < Vecs; ++v)
    bias[v] = addBias ? _mm512_maskz_loadu_ps(mask[v], epilogue->bias + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v) {
      __m512 x = acc[r][v];
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], cr + 16 * v));
      if (scaled) x = _mm512_mul_ps(x, scale);
      if (addBias) x = _mm512_add_ps(x, bias[v]);
      if (residual) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], residual + r * epilogue->residualRs + 16 * v));
      if (relu) x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
      _mm512_mask_storeu_ps(cr + 16 * v, mask[v], x);
    }
  }
}

/// The tile's first `Rows` rows and first 16 Vecs columns: a panel of at
/// most 16 columns (N = 10 logits, the last panel of N = 784) runs half the
/// FMAs with Vecs = 1, reading only the first half of each packed B step.
template <int Rows, int Vecs>
__attribute__((target("avx512f"))) void tileRows(int kc, const float* ap, const float* bp, float* c, int64_t ldc,
                                                 int nr, bool accumulate, const TileEpilogue* epilogue) {
  __m512 acc[Rows][Vecs];
  startTile<Rows, Vecs>(acc, c, ldc, epilogue);
#pragma GCC unroll 2
  for (int k = 0; k < kc; ++k) {
    __m512 b[Vecs];
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v) b[v] = _mm512_load_ps(bp + k * kNR + 16 * v);
    const float* ak = ap + k * kMR;
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(ak[r]);
#pragma GCC unroll 4
      for (int v = 0; v < Vecs; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
    }
  }
  storeTile<Rows, Vecs>(acc, c, ldc, nr, accumulate, epilogue);
}

/// The same tile on unpacked operands (DirectKernelFn): the A scalars
/// broadcast from A (row r at step k: a[r * lda + k], or a[k * lda + r]
/// when A is column-major), the B vectors load from B's rows through masks
/// (a tile narrower than 16 Vecs columns must not read past B's row). The
/// FMAs and their order are the packed tile's, so are the bits.
template <int Rows, int Vecs, bool ColumnMajorA>
__attribute__((target("avx512f"))) void directTileRows(int kc, const float* a, int64_t lda, const float* b,
                                                       int64_t ldb, float* c, int64_t ldc, int nr, bool accumulate,
                                                       const TileEpilogue* epilogue) {
  __m512 acc[Rows][Vecs];
  startTile<Rows, Vecs>(acc, c, ldc, epilogue);
  __mmask16 mask[Vecs];
  columnMasks<Vecs>(nr, mask);
#pragma GCC unroll 2
  for (int k = 0; k < kc; ++k) {
    __m512 bv[Vecs];
    const float* bk = b + k * ldb;
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], bk + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(ColumnMajorA ? a[k * lda + r] : a[r * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < Vecs; ++v) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
    }
  }
  storeTile<Rows, Vecs>(acc, c, ldc, nr, accumulate, epilogue);
}

// GCC 12's shuffle intrinsics start from _mm512_undefined_ps() and warn about
// it once inlined (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

/// In-register transpose of 16 x 16 floats: r[i] lane j -> r[j] lane i.
__attribute__((target("avx512f"))) inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[16];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]),
                  t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g .. 4g+3.
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD),
                 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88),
                 v3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[4 + j] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

/// Packing's common step: `lines` (<= 16) lines of depth, `depth` (<= 16)
/// floats each and `stride` apart, become `depth` rows of 16 floats (lanes
/// past `lines` zero; only `storeLanes` stored) `rowStride` apart at dst.
__attribute__((target("avx512f"))) inline void transposeLines(const float* src, int64_t stride, int lines,
                                                              int depth, float* dst, int64_t rowStride,
                                                              __mmask16 storeLanes) {
  const __mmask16 depthLanes = depth == 16 ? __mmask16(0xFFFF) : __mmask16((1u << depth) - 1);
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = i < lines ? _mm512_maskz_loadu_ps(depthLanes, src + i * stride) : _mm512_setzero_ps();
  transpose16x16(r);
  if (depth == 16) {
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) _mm512_mask_storeu_ps(dst + t * rowStride, storeLanes, r[t]);
  } else {
    for (int t = 0; t < depth; ++t) _mm512_mask_storeu_ps(dst + t * rowStride, storeLanes, r[t]);
  }
}

/// Packs A with contiguous rows 16 depth steps at a time: up to 14 row
/// segments, transposed, each step's 14 floats stored.
__attribute__((target("avx512f"))) void packRowMajorA(StridedMatrix a, int64_t i0, int mc, int64_t k0, int kc,
                                                      float* dst) {
  constexpr __mmask16 kPanelLanes = (1u << kMR) - 1;
  for (int p = 0; p < mc; p += kMR) {
    const int rows = mc - p < kMR ? mc - p : kMR;
    const float* src = a.p + (i0 + p) * a.rs + k0;
    float* d = dst + static_cast<int64_t>(p) * kc;
    for (int k = 0; k < kc; k += 16)
      transposeLines(src + k, a.rs, rows, kc - k < 16 ? kc - k : 16, d + k * kMR, kMR, kPanelLanes);
  }
}

/// Packs A whose columns are contiguous (rs == 1: a transposed view, the
/// weight gradient's x^T * dY): each depth step's 14 rows are 14 floats in a
/// row, one masked load and one masked store. Rows past the matrix are zero.
__attribute__((target("avx512f"))) void packColumnMajorA(StridedMatrix a, int64_t i0, int mc, int64_t k0, int kc,
                                                         float* dst) {
  constexpr __mmask16 kPanelLanes = (1u << kMR) - 1;
  for (int p = 0; p < mc; p += kMR) {
    const int rows = mc - p < kMR ? mc - p : kMR;
    const __mmask16 rowLanes = static_cast<__mmask16>((1u << rows) - 1);
    const float* src = a.p + (i0 + p) + k0 * a.cs;
    float* d = dst + static_cast<int64_t>(p) * kc;
    for (int k = 0; k < kc; ++k, src += a.cs, d += kMR)
      _mm512_mask_storeu_ps(d, kPanelLanes, _mm512_maskz_loadu_ps(rowLanes, src));
  }
}

/// Packs B with contiguous rows (PackRowMajorBFn): each row of B, read in
/// order, gives each panel its two vectors of that depth step. Columns past
/// `cols` (the last panel's) are zero.
__attribute__((target("avx512f"))) void packRowMajorB(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols,
                                                      float* dst) {
  const int full = cols / kNR, rest = cols % kNR;
  const int64_t panelStride = static_cast<int64_t>(kc) * kNR;
  __mmask16 mask[kVecs];
  columnMasks<kVecs>(rest, mask);
  for (int k = 0; k < kc; ++k) {
    const float* src = b.p + (k0 + k) * b.rs + j0;
    float* d = dst + static_cast<int64_t>(k) * kNR;
    for (int p = 0; p < full; ++p, src += kNR, d += panelStride) {
      _mm512_storeu_ps(d, _mm512_loadu_ps(src));
      _mm512_storeu_ps(d + 16, _mm512_loadu_ps(src + 16));
    }
    if (rest) {
      _mm512_storeu_ps(d, _mm512_maskz_loadu_ps(mask[0], src));
      _mm512_storeu_ps(d + 16, _mm512_maskz_loadu_ps(mask[1], src + 16));
    }
  }
}

/// Packs one NR-wide panel of B whose columns are contiguous (rs == 1: a
/// transposed view, dX = dY * W^T): 16 columns by 16 depth steps at a time,
/// transposed into 16 steps of the panel. Columns past the matrix are zero.
__attribute__((target("avx512f"))) void packColumnMajorB(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols,
                                                         float* dst) {
  for (int h = 0; h < kVecs; ++h) {
    const int first = 16 * h;
    const int lines = cols - first < 0 ? 0 : (cols - first > 16 ? 16 : cols - first);
    const float* src = b.p + k0 + (j0 + first) * b.cs;
    for (int k = 0; k < kc; k += 16)
      transposeLines(src + k, b.cs, lines, kc - k < 16 ? kc - k : 16, dst + static_cast<int64_t>(k) * kNR + first,
                     kNR, __mmask16(0xFFFF));
  }
}

#pragma GCC diagnostic pop

template <int Vecs, int... R>
constexpr std::array<MicroKernelFn, sizeof...(R)> tilesByRows(std::integer_sequence<int, R...>) {
  return {[](int kc, const float* ap, const float* bp, float* c, int64_t ldc, int, int nr, bool accumulate,
             const TileEpilogue* epilogue) { tileRows<R + 1, Vecs>(kc, ap, bp, c, ldc, nr, accumulate, epilogue);
  }...};
}

void microKernelAvx512(int kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                       bool accumulate, const TileEpilogue* epilogue) {
  static constexpr auto kTiles = tilesByRows<kVecs>(std::make_integer_sequence<int, kMR>{});
  static constexpr auto kHalfTiles = tilesByRows<1>(std::make_integer_sequence<int, kMR>{});
  (nr <= 16 ? kHalfTiles : kTiles)[mr - 1](kc, ap, bp, c, ldc, mr, nr, accumulate, epilogue);
}

template <int Vecs, bool ColumnMajorA, int... R>
constexpr std::array<DirectKernelFn, sizeof...(R)> directTilesByRows(std::integer_sequence<int, R...>) {
  return {[](int kc, const float* a, int64_t lda, bool, const float* b, int64_t ldb, float* c, int64_t ldc, int,
             int nr, bool accumulate, const TileEpilogue* epilogue) {
    directTileRows<R + 1, Vecs, ColumnMajorA>(kc, a, lda, b, ldb, c, ldc, nr, accumulate, epilogue);
  }...};
}

void directKernelAvx512(int kc, const float* a, int64_t lda, bool columnMajorA, const float* b, int64_t ldb,
                        float* c, int64_t ldc, int mr, int nr, bool accumulate, const TileEpilogue* epilogue) {
  using Rows = std::make_integer_sequence<int, kMR>;
  static constexpr std::array<std::array<DirectKernelFn, kMR>, 4> kTiles = {
      directTilesByRows<kVecs, false>(Rows{}), directTilesByRows<1, false>(Rows{}),
      directTilesByRows<kVecs, true>(Rows{}), directTilesByRows<1, true>(Rows{})};
  kTiles[(nr <= 16 ? 1 : 0) + (columnMajorA ? 2 : 0)][mr - 1](kc, a, lda, columnMajorA, b, ldb, c, ldc, mr, nr,
                                                              accumulate, epilogue);
}

}  // namespace

// kc 1024: every K panel is one more pass over C, whose tiles come from L3 or
// memory; the B panel (128 KiB) and the A block then sit in L2 and stream
// from it. On Zen 4 (bench/gemm_bench.cpp, 1 thread) kc 256 -> 1024 took
// 1024^3 from about 94 to 104 GFLOP/s.
// mc 112 (an A block of 448 KiB, with the B panel within Zen 4's 1 MiB L2):
// once each thread sweeps only the B panels it packed (splitWork), fewer
// and larger A blocks paid on a 2-core Sapphire Rapids (2 MiB L2), 2
// threads: 1024^3 322-326 -> 323-350 GFLOP/s, 4096x4096x1024 320-327 ->
// 325-330 (kiln_gemm_bench, KILN_TUNE=off, 3 alternating runs).
// nc 1024: the packed B block (4 MiB) is what every A block sweeps, from L3;
// on a shared Sapphire Rapids an 8 MiB block (nc 2048) no longer stayed there:
// 4096x4096x1024 went from 228 to 242 GFLOP/s on 2 threads (104 -> 114 on 1).
const MicroKernel& avx512MicroKernel() {
  static const MicroKernel k{Isa::avx512, kMR, kNR, /*kc=*/1024, /*mc=*/14 * 8, /*nc=*/1024, microKernelAvx512,
                             packRowMajorA, packColumnMajorB, directKernelAvx512, packColumnMajorA,
                             packRowMajorB};
  return k;
}

}  // namespace kiln::interp::gemm
