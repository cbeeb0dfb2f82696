// AVX-512 BF16 kernel, for CPUs with VDPBF16PS and no AMX (AMD Zen 4 and
// later, Cooper Lake): it reads the AMX-ordered packed panels. The 32 x 32
// block runs as row groups of 8 x 32 (16 zmm accumulators); each pair of
// depth steps loads two B vectors of 16 column pairs and broadcasts one A
// pair per row for two VDPBF16PS.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "runtime/interp/gemm/Bf16MicroKernel.h"

namespace kiln::interp::gemm {

namespace {

constexpr int kGroupRows = 8;

/// Rows [row0, row0 + rows) of the block, from the A panel at `a.p` (row0 <
/// 16 is inside it), all 32 columns computed and `nr` stored.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void rowGroup(int kTiles, Bf16APanels a,
                                                                     const uint16_t* b, int64_t panelStride,
                                                                     int row0, float* c, int64_t ldc, int rows, int nr,
                                                                     bool accumulate) {
  __m512 acc[kGroupRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kGroupRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const uint16_t* b1 = b + panelStride;
  for (int t = 0; t < kTiles; ++t) {
    const uint16_t* at = a.p + t * a.tileStep + row0 * a.rowStride;
    const uint16_t* b0t = b + static_cast<int64_t>(t) * kBf16TileElems;
    const uint16_t* b1t = b1 + static_cast<int64_t>(t) * kBf16TileElems;
#pragma GCC unroll 2
    for (int p = 0; p < kBf16TileDepth / 2; ++p) {
      const __m512bh v0 = (__m512bh)_mm512_load_si512(b0t + p * 32);
      const __m512bh v1 = (__m512bh)_mm512_load_si512(b1t + p * 32);
#pragma GCC unroll 8
      for (int r = 0; r < kGroupRows; ++r) {
        int32_t pair;
        std::memcpy(&pair, at + r * a.rowStride + 2 * p, sizeof pair);
        const __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, v0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, v1);
      }
    }
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : nr <= 16 ? __mmask16(0) : __mmask16((1u << (nr - 16)) - 1);
  for (int r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    __m512 x0 = acc[r][0], x1 = acc[r][1];
    if (accumulate) {
      x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cr));
      x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cr + 16));
    }
    _mm512_mask_storeu_ps(cr, m0, x0);
    _mm512_mask_storeu_ps(cr + 16, m1, x1);
  }
}

void run(int kTiles, Bf16APanels a, const uint16_t* b, int64_t panelStride, float* c, int64_t ldc, int mr, int nr,
         bool accumulate) {
  // The block's C lines on their way into L2 while the first row group
  // computes: each row is a miss otherwise (C is M x N floats, rarely
  // cached), and the accumulate or store of every row group waited for
  // them (2048 x 2048 x 1024 on one Zen 4 core: 166-168 -> 183-187 GFLOP/s).
  for (int r = 0; r < mr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + nr - 1), _MM_HINT_T1);
  }
  for (int row0 = 0; row0 < mr; row0 += kGroupRows) {
    Bf16APanels panel = a;
    panel.p += (row0 / kBf16TileRows) * a.panelStride;
    rowGroup(kTiles, panel, b, panelStride, row0 % kBf16TileRows, c + row0 * ldc, ldc, std::min(kGroupRows, mr - row0),
             nr, accumulate);
  }
}

}  // namespace

// Blocking for the CPUs this kernel serves (no AMX: Zen 4 and Cooper Lake,
// 1 MiB of L2 per core): the whole depth of K <= 1024 in one pass (a second
// pass reads and writes C again) and 128-row blocks of A (256 KiB). On a
// 2-core Zen 4, bf16 1024^3 and 4096 x 4096 x 1024 ran at 401-412 and
// 410-415 GFLOP/s against 369-379 and 352-377 with kc 512, mc 256 (6
// blockings compared; the tier-2 tuner tries half and twice mc and nc).
const Bf16MicroKernel& avx512Bf16MicroKernel() {
  static const Bf16MicroKernel k{Bf16Isa::avx512bf16, /*kc=*/1024, /*mc=*/128, /*nc=*/1024, run};
  return k;
}

}  // namespace kiln::interp::gemm
