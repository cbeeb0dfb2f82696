// The bf16 GEMM's blocked driver (the f32 GEMM's loop order, Sgemm.cpp): for
// each block of B's columns and slice of depth, pack the B block once into
// pair-ordered 16-column panels shared by all threads; each thread packs its
// rows of A into 16-row panels and runs the kernel over every 32 x 32 block.
// A bf16 result is rounded block by block from an L1 buffer (no f32 C).
// Also: which bf16 units the CPU has, and KILN_GEMM_BF16.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/error.h"
#include "runtime/backends/Hal.h"
#include "runtime/interp/ScratchBuffer.h"
#include "runtime/interp/gemm/Bf16MicroKernel.h"
#include "runtime/interp/gemm/BlockingTuner.h"
#include "runtime/interp/gemm/Sgemm.h"
#include "runtime/interp/gemm/WorkSplit.h"

namespace kiln::interp::gemm {

namespace {

// ---------------------------------------------------------------- ISA choice

struct Bf16Cpu {
  bool avx512bf16 = false;  // with AVX-512 F and BW, and the OS saving zmm state
  bool amx = false;         // AMX-TILE and AMX-BF16, the OS saving tile state, and the permission granted
};

Bf16Cpu probeCpu() {
  Bf16Cpu cpu;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return cpu;  // no OSXSAVE
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const bool zmmState = (lo & 0xe6u) == 0xe6u;                   // SSE, AVX, opmask, zmm
  const bool tileState = (lo & (3u << 17)) == (3u << 17);        // XTILECFG, XTILEDATA
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return cpu;
  const bool avx512 = zmmState && (b & (1u << 16)) && (b & (1u << 30));  // F, BW
  const bool amxBf16 = (d & (1u << 22)) && (d & (1u << 24));           // AMX-BF16, AMX-TILE
  const unsigned maxSub = a;
  unsigned eax1 = 0;
  if (maxSub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) eax1 = a;
  cpu.avx512bf16 = avx512 && (eax1 & (1u << 5));
  cpu.amx = avx512 && amxBf16 && tileState && requestAmxPermission();
  return cpu;
}

const Bf16Cpu& hostCpu() {
  static const Bf16Cpu cpu = probeCpu();
  return cpu;
}

Bf16Isa bestSupported() {
  if (cpuSupportsBf16(Bf16Isa::amx)) return Bf16Isa::amx;
  if (cpuSupportsBf16(Bf16Isa::avx512bf16)) return Bf16Isa::avx512bf16;
  return Bf16Isa::none;
}

Bf16Isa clampToCpu(Bf16Isa isa) {
  while (isa != Bf16Isa::none && !cpuSupportsBf16(isa)) isa = static_cast<Bf16Isa>(static_cast<int>(isa) - 1);
  return isa;
}

Bf16Isa initialIsa() {
  const Bf16Isa best = bestSupported();
  const char* v = std::getenv("KILN_GEMM_BF16");
  if (!v || !*v) return best;
  for (Bf16Isa isa : {Bf16Isa::none, Bf16Isa::avx512bf16, Bf16Isa::amx}) {
    if (std::strcmp(v, bf16IsaName(isa)) != 0) continue;
    if (cpuSupportsBf16(isa)) return isa;
    std::fprintf(stderr, "kiln: ignoring KILN_GEMM_BF16=%s (this CPU lacks it; using %s)\n", v, bf16IsaName(best));
    return best;
  }
  std::fprintf(stderr, "kiln: ignoring KILN_GEMM_BF16=%s (expected none, avx512bf16 or amx; using %s)\n", v,
               bf16IsaName(best));
  return best;
}

std::atomic<Bf16Isa>& active() {
  static std::atomic<Bf16Isa> isa{initialIsa()};
  return isa;
}

// ---------------------------------------------------------------- packing

thread_local ScratchSlot tlsBBlock, tlsABlock;

/// Transposes a 16 x 16 matrix of 32-bit elements held as 16 rows.
// (GCC 12 warns about the "undefined" pass-through operand inside its own
// unpack intrinsics.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f,avx512bw,avx512vl"))) void transpose16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
}
#pragma GCC diagnostic pop

/// Lane 2j of an interleave takes x[j], lane 2j+1 takes y[j] (index 32 + j:
/// the second source of VPERMT2W).
alignas(64) constexpr uint16_t kPairLanes[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};

/// Interleaves two rows of 16 bf16 (masked loads: `m` selects the elements
/// that exist, a null row is zeros) into 16 pairs (r0[j], r1[j]).
__attribute__((target("avx512f,avx512bw,avx512vl"))) __m512i interleaveRows(const uint16_t* r0, const uint16_t* r1,
                                                                          __mmask16 m) {
  const __m512i pairs = _mm512_load_si512(kPairLanes);
  const __m512i x = r0 ? _mm512_maskz_loadu_epi16(m, r0) : _mm512_setzero_si512();
  const __m512i y = r1 ? _mm512_maskz_loadu_epi16(m, r1) : _mm512_setzero_si512();
  return _mm512_permutex2var_epi16(x, pairs, y);
}

__mmask16 firstLanes16(int n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1); }

/// dst[r][0:cols] = bf16(src[r][0:cols]) for r < rows, rounded to nearest
/// even in integers exactly as core::floatToBf16 (not VCVTNEPS2BF16, which
/// flushes denormals): NaN keeps its top bits and becomes quiet.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void roundRowsToBf16(const float* src, int64_t lds, int64_t rows,
                                                                         int64_t cols, uint16_t* dst, int64_t ldd) {
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = firstLanes16(static_cast<int>(std::min<int64_t>(cols - j, 16)));
      const __m512 x = _mm512_maskz_loadu_ps(m, src + r * lds + j);
      const __m512i bits = _mm512_castps_si512(x);
      const __m512i high = _mm512_srli_epi32(bits, 16);
      const __m512i bias = _mm512_add_epi32(_mm512_and_si512(high, one), half);
      __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
      rounded = _mm512_mask_or_epi32(rounded, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), high, quiet);
      _mm256_mask_storeu_epi16(dst + r * ldd + j, m, _mm512_cvtepi32_epi16(rounded));
    }
}

/// Packs rows [i0, i0+rows) x depth [k0, k0+kc) of A into 16-row panels of
/// kTiles tiles each (Bf16MicroKernel.h), zero past the matrix.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void packA(Bf16Matrix a, int64_t i0, int rows, int64_t k0, int kc,
                                                       int kTiles, uint16_t* dst) {
  const int panels = (rows + kBf16TileRows - 1) / kBf16TileRows;
  const int64_t panelElems = static_cast<int64_t>(kTiles) * kBf16TileElems;
  if (a.cs == 1) {
    // Rows contiguous: each tile row is one (masked) 64-byte copy.
    for (int p = 0; p < panels; ++p)
      for (int r = 0; r < kBf16TileRows; ++r) {
        const int row = p * kBf16TileRows + r;
        const uint16_t* src = a.p + (i0 + row) * a.rs + k0;
        uint16_t* d = dst + p * panelElems + r * kBf16TileDepth;
        for (int t = 0; t < kTiles; ++t, d += kBf16TileElems) {
          const int depth = std::clamp(kc - t * kBf16TileDepth, 0, kBf16TileDepth);
          const __mmask32 m = row < rows ? static_cast<__mmask32>(depth == 32 ? ~0u : (1u << depth) - 1) : 0;
          _mm512_storeu_si512(d, _mm512_maskz_loadu_epi16(m, src + t * kBf16TileDepth));
        }
      }
    return;
  }
  if (a.rs == 1) {
    // Columns contiguous (A transposed): interleave two columns' 16 rows into
    // 16 depth pairs, 16 such pairs of columns make a [pair][row] block, and
    // its transpose is the tile.
    for (int p = 0; p < panels; ++p) {
      const __mmask16 m = firstLanes16(rows - p * kBf16TileRows);
      const uint16_t* src = a.p + (i0 + p * kBf16TileRows) + k0 * a.cs;
      for (int t = 0; t < kTiles; ++t) {
        __m512i r[16];
        for (int q = 0; q < 16; ++q) {
          const int k = t * kBf16TileDepth + 2 * q;
          r[q] = interleaveRows(k < kc ? src + k * a.cs : nullptr, k + 1 < kc ? src + (k + 1) * a.cs : nullptr, m);
        }
        transpose16x16(r);
        uint16_t* d = dst + p * panelElems + t * kBf16TileElems;
        for (int row = 0; row < 16; ++row) _mm512_storeu_si512(d + row * kBf16TileDepth, r[row]);
      }
    }
    return;
  }
  // Any other strides (a broadcast or doubly strided view): element by element.
  for (int p = 0; p < panels; ++p) {
    uint16_t* panel = dst + p * panelElems;
    const int panelRows = std::min(kBf16TileRows, rows - p * kBf16TileRows);
    for (int k = 0; k < kTiles * kBf16TileDepth; ++k) {
      uint16_t* d = panel + (k / kBf16TileDepth) * kBf16TileElems + k % kBf16TileDepth;
      const uint16_t* src = a.p + (i0 + p * kBf16TileRows) * a.rs + (k0 + k) * a.cs;
      int r = 0;
      if (k < kc)
        for (; r < panelRows; ++r) d[r * kBf16TileDepth] = src[r * a.rs];
      for (; r < kBf16TileRows; ++r) d[r * kBf16TileDepth] = 0;
    }
  }
}

/// Packs depth [k0, k0+kc) x columns [j0, j0+cols) (cols <= 16) of B into
/// one pair-ordered panel of kTiles tiles, zero past the matrix.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void packBPanel(Bf16Matrix b, int64_t k0, int kc, int64_t j0,
                                                                     int cols, int kTiles, uint16_t* dst) {
  const int pairs = kTiles * kBf16TileDepth / 2;
  if (b.cs == 1) {
    // Rows contiguous: interleave two rows' 16 columns.
    const __mmask16 m = firstLanes16(cols);
    const uint16_t* src = b.p + k0 * b.rs + j0;
    for (int p = 0; p < pairs; ++p, dst += 32) {
      const int k = 2 * p;
      _mm512_storeu_si512(dst, interleaveRows(k < kc ? src + k * b.rs : nullptr,
                                              k + 1 < kc ? src + (k + 1) * b.rs : nullptr, m));
    }
    return;
  }
  if (b.rs == 1) {
    // Columns contiguous (B transposed): a column's 32 depth steps are 16
    // pairs in one load; 16 columns make a [column][pair] block, whose
    // transpose is the tile.
    for (int t = 0; t < kTiles; ++t) {
      const int depth = std::clamp(kc - t * kBf16TileDepth, 0, kBf16TileDepth);
      const __mmask32 m = static_cast<__mmask32>(depth == 32 ? ~0u : (1u << depth) - 1);
      __m512i r[16];
      for (int n = 0; n < 16; ++n)
        r[n] = n < cols ? _mm512_maskz_loadu_epi16(m, b.p + k0 + t * kBf16TileDepth + (j0 + n) * b.cs)
                        : _mm512_setzero_si512();
      transpose16x16(r);
      for (int q = 0; q < 16; ++q) _mm512_storeu_si512(dst + t * kBf16TileElems + q * 32, r[q]);
    }
    return;
  }
  // Any other strides: element by element.
  for (int n = 0; n < kBf16TileRows; ++n) {
    const uint16_t* src = b.p + k0 * b.rs + (j0 + n) * b.cs;
    for (int p = 0; p < pairs; ++p) {
      const int k = 2 * p;
      dst[p * 32 + n * 2] = n < cols && k < kc ? src[k * b.rs] : 0;
      dst[p * 32 + n * 2 + 1] = n < cols && k + 1 < kc ? src[(k + 1) * b.rs] : 0;
    }
  }
}

const Bf16MicroKernel& kernelFor(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::amx:
      return amxBf16MicroKernel();
    case Bf16Isa::avx512bf16:
      return avx512Bf16MicroKernel();
    case Bf16Isa::none:
      break;
  }
  throw Error("matmul: internal error: the bf16 GEMM was called on a CPU without bf16 units");
}

/// Calls the kernel's enter() now and its leave() at scope exit.
class KernelScope {
 public:
  explicit KernelScope(const Bf16MicroKernel& k) : k_(k) {
    if (k_.enter) k_.enter();
  }
  ~KernelScope() {
    if (k_.leave) k_.leave();
  }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  const Bf16MicroKernel& k_;
};

}  // namespace

const char* bf16IsaName(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::none:
      return "none";
    case Bf16Isa::avx512bf16:
      return "avx512bf16";
    case Bf16Isa::amx:
      return "amx";
  }
  return "?";
}

bool cpuSupportsBf16(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::none:
      return true;
    case Bf16Isa::avx512bf16:
      return hostCpu().avx512bf16;
    case Bf16Isa::amx:
      return hostCpu().amx;
  }
  return false;
}

Bf16Isa activeBf16Isa() { return active().load(std::memory_order_relaxed); }

Bf16Isa setActiveBf16Isa(Bf16Isa isa) { return active().exchange(clampToCpu(isa), std::memory_order_relaxed); }

namespace {

/// Where a product goes: f32 C (accumulated into with `accumulate`), or,
/// with `rounded`, bf16 C (then K fits one depth pass); the epilogue, if
/// any, applies to each block of C after the last pass.
struct ResultOut {
  float* c = nullptr;
  uint16_t* rounded = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  const Epilogue* epilogue = nullptr;
};

/// The blocked product with blocking `blk` (gemmBf16's contract, K > 0).
void blockedProduct(const Bf16MicroKernel& mk, Blocking blk, int threads, int64_t M, int64_t N, int64_t K,
                    Bf16Matrix a, Bf16Matrix b, const ResultOut& out) {
  // Equal blocks rather than full ones and a sliver (as the f32 GEMM),
  // rounded to whole tiles of depth and whole 32-column blocks.
  const int64_t kPasses = (K + mk.kc - 1) / mk.kc;
  const int kcStep = static_cast<int>(((K + kPasses - 1) / kPasses + kBf16TileDepth - 1) / kBf16TileDepth *
                                      kBf16TileDepth);
  const int ncStep = columnStep(N, blk.nc, kBf16BlockCols);
  const int64_t maxPanelElems = static_cast<int64_t>(kcStep / kBf16TileDepth) * kBf16TileElems;
  ScratchBuffer bBlock(tlsBBlock, sizeof(uint16_t) * maxPanelElems * (ncStep / kBf16TileRows),
                       "bf16 matmul (packing B)");
  const int64_t rowBlocks = (M + kBf16BlockRows - 1) / kBf16BlockRows;

  for (int64_t jc = 0; jc < N; jc += ncStep) {
    const int nc = static_cast<int>(std::min<int64_t>(ncStep, N - jc));
    const int colPanels = (nc + kBf16TileRows - 1) / kBf16TileRows;
    const int colBlocks = (nc + kBf16BlockCols - 1) / kBf16BlockCols;
    const WorkSplit grid = splitWork(rowBlocks, colBlocks, threads);
    for (int64_t pc = 0; pc < K; pc += kcStep) {
      const int kc = static_cast<int>(std::min<int64_t>(kcStep, K - pc));
      const int kTiles = (kc + kBf16TileDepth - 1) / kBf16TileDepth;
      const int64_t panelElems = static_cast<int64_t>(kTiles) * kBf16TileElems;
      uint16_t* bPanels = bBlock.as<uint16_t>();
      const int packTasks = std::min(threads, colPanels / 8 + 1);
      forEachTask(packTasks, [&](int t) {
        for (int p = colPanels * t / packTasks; p < colPanels * (t + 1) / packTasks; ++p)
          packBPanel(b, pc, kc, jc + static_cast<int64_t>(p) * kBf16TileRows,
                     std::min(kBf16TileRows, nc - p * kBf16TileRows), kTiles, bPanels + p * panelElems);
      });
      const bool addToC = out.accumulate || pc > 0;
      const Epilogue* epilogue = pc + kc >= K ? out.epilogue : nullptr;  // after the last depth pass
      // A row-major A whose depth fills whole tiles is read in place (its
      // blocks of whole 16-row panels): packing it cost 6 % of 4096 x 4096 x
      // 1024 and bought nothing, its block being as compact in A itself.
      const bool aInPlace = a.cs == 1 && kc % kBf16TileDepth == 0;
      forEachShare(grid, colBlocks, kBf16BlockRows, M, blk.mc, [&](const TaskShare& share) {
        if (share.empty()) return;
        ScratchBuffer aBlock(tlsABlock, sizeof(uint16_t) * panelElems * (blk.mc / kBf16TileRows), "bf16 matmul (packing A)");
        const KernelScope scope(mk);
        alignas(64) float block[kBf16BlockRows * kBf16BlockCols];  // a bf16 result's f32 block, in L1
        for (int64_t ic = share.i0; ic < share.i1; ic += blk.mc) {
          const int mc = static_cast<int>(std::min<int64_t>(blk.mc, share.i1 - ic));
          const bool inPlace = aInPlace && mc % kBf16TileRows == 0;
          if (!inPlace) packA(a, ic, mc, pc, kc, kTiles, aBlock.as<uint16_t>());
          for (int q = share.p0; q < share.p1; ++q) {
            const int j = q * kBf16BlockCols;
            const uint16_t* bp = bPanels + (j / kBf16TileRows) * panelElems;
            const int nr = std::min(kBf16BlockCols, nc - j);
            for (int ir = 0; ir < mc; ir += kBf16BlockRows) {
              const Bf16APanels ap =
                  inPlace ? Bf16APanels::inPlace(a.p + (ic + ir) * a.rs + pc, a.rs)
                          : Bf16APanels::packed(aBlock.as<uint16_t>() + (ir / kBf16TileRows) * panelElems, panelElems);
              const int mr = std::min(kBf16BlockRows, mc - ir);
              const int64_t row = ic + ir, col = jc + j;
              if (out.rounded) {
                // The block's bf16 rows on their way into L2 while it
                // computes (as the kernels do for an f32 C): the rounding's
                // stores otherwise wait for every line.
                for (int r = 0; r < mr; ++r) {
                  const uint16_t* line = out.rounded + (row + r) * out.ldc + col;
                  _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
                  _mm_prefetch(reinterpret_cast<const char*>(line + nr - 1), _MM_HINT_T1);
                }
                mk.run(kTiles, ap, bp, panelElems, block, kBf16BlockCols, mr, nr, false);
                if (epilogue) applyEpilogue(*epilogue, block, kBf16BlockCols, mr, nr, row, col);
                roundRowsToBf16(block, kBf16BlockCols, mr, nr, out.rounded + row * out.ldc + col, out.ldc);
                continue;
              }
              float* cp = out.c + row * out.ldc + col;
              mk.run(kTiles, ap, bp, panelElems, cp, out.ldc, mr, nr, addToC);
              if (epilogue) applyEpilogue(*epilogue, cp, out.ldc, mr, nr, row, col);
            }
          }
        }
      });
    }
  }
}

/// gemmBf16 and gemmBf16RoundedOut once K > 0 (`kernel`: the tuning site's name).
void runProduct(const Bf16MicroKernel& mk, const char* kernel, int64_t M, int64_t N, int64_t K, Bf16Matrix a,
                Bf16Matrix b, bool parallel, const ResultOut& out) {
  const int threads = gemmThreads(M, N, K, parallel);
  const TunableCall call{.kernel = kernel,
                         .isa = bf16IsaName(mk.isa),
                         .aLayout = operandLayout(a.rs, a.cs),
                         .bLayout = operandLayout(b.rs, b.cs),
                         .M = M,
                         .N = N,
                         .K = K,
                         .threads = threads,
                         .parallel = parallel,
                         .byDefault = {mk.mc, mk.nc},
                         .mcUnit = kBf16BlockRows,
                         .ncUnit = kBf16BlockCols};
  runWithTunedBlocking(call, [&](Blocking blk) { blockedProduct(mk, blk, threads, M, N, K, a, b, out); });
}

}  // namespace

void gemmBf16(int64_t M, int64_t N, int64_t K, Bf16Matrix a, Bf16Matrix b, float* c, int64_t ldc, bool accumulate,
              bool parallel, const Epilogue* epilogue) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return productOverEmptyDepth(M, N, c, ldc, accumulate, epilogue);
  runProduct(kernelFor(activeBf16Isa()), "gemm_bf16", M, N, K, a, b, parallel,
             {.c = c, .ldc = ldc, .accumulate = accumulate, .epilogue = epilogue});
}

void gemmBf16RoundedOut(int64_t M, int64_t N, int64_t K, Bf16Matrix a, Bf16Matrix b, uint16_t* c, int64_t ldc,
                        bool parallel, const Epilogue* epilogue) {
  if (M <= 0 || N <= 0) return;
  const Bf16MicroKernel& mk = kernelFor(activeBf16Isa());
  if (K > 0 && K <= mk.kc) {
    runProduct(mk, "gemm_bf16_rounded", M, N, K, a, b, parallel, {.rounded = c, .ldc = ldc, .epilogue = epilogue});
    return;
  }
  // Several depth passes (or none) sum into f32 first: a temporary from the
  // host allocator (cached while calls come, given back when they stop),
  // not a thread's kept scratch, which would hold M x N floats for good.
  struct HostTemporary {
    hal::Allocator& host;
    std::size_t bytes;
    float* p = static_cast<float*>(host.allocate(bytes));
    ~HostTemporary() { host.deallocate(p, bytes); }
  } f32{hal::hostAllocator(), sizeof(float) * static_cast<std::size_t>(M * N)};
  gemmBf16(M, N, K, a, b, f32.p, N, /*accumulate=*/false, parallel, epilogue);
  const int tasks = parallel ? std::max(1, std::min<int>(gemmThreads(M, N, K, true), static_cast<int>(M))) : 1;
  forEachTask(tasks, [&](int t) {
    const int64_t r0 = M * t / tasks, r1 = M * (t + 1) / tasks;
    roundRowsToBf16(f32.p + r0 * N, N, r1 - r0, N, c + r0 * ldc, ldc);
  });
}

}  // namespace kiln::interp::gemm
