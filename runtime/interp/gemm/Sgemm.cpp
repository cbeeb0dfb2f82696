// The blocked GEMM driver (Goto/BLIS loop order): for each NC-column block of
// B and KC-deep slice of K, pack the B block once into NR-wide panels, each
// thread a share; the threads then take MC-row blocks of A (WorkSplit.h: of
// all B's panels, or of their column group's), pack each into MR-high panels
// and run the micro-kernel over every (A panel, B panel) pair.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "kiln/error.h"
#include "runtime/core/Half.h"
#include "runtime/interp/ScratchBuffer.h"
#include "runtime/interp/gemm/BlockingTuner.h"
#include "runtime/interp/gemm/HalfOperands.h"
#include "runtime/interp/gemm/MicroKernel.h"
#include "runtime/interp/gemm/Sgemm.h"
#include "runtime/interp/gemm/WorkSplit.h"

namespace kiln::interp::gemm {

namespace {

thread_local ScratchSlot tlsBBlock, tlsABlock;
/// A small product's half operands, widened whole (sgemmWidening).
thread_local ScratchSlot tlsWidenedA, tlsWidenedB;

/// Packs rows [i0, i0+mc) x depth [k0, k0+kc) of A into MR-high panels: each
/// panel holds kc steps of MR floats, rows past the matrix zero. MR is a
/// constant so a full panel's step is an unrolled run of loads and stores.
template <int MR>
void packA(StridedMatrix a, int64_t i0, int mc, int64_t k0, int kc, float* dst) {
  for (int p = 0; p < mc; p += MR) {
    const int rows = std::min(MR, mc - p);
    const float* src = a.p + (i0 + p) * a.rs + k0 * a.cs;
    float* d = dst + static_cast<int64_t>(p) * kc;
    if (rows == MR) {
      for (int k = 0; k < kc; ++k, src += a.cs, d += MR)
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) d[i] = src[i * a.rs];
      continue;
    }
    for (int k = 0; k < kc; ++k, src += a.cs, d += MR) {
      int i = 0;
      for (; i < rows; ++i) d[i] = src[i * a.rs];
      for (; i < MR; ++i) d[i] = 0;
    }
  }
}

void packA(StridedMatrix a, int64_t i0, int mc, int64_t k0, int kc, int mr, float* dst) {
  switch (mr) {
    case 6:
      return packA<6>(a, i0, mc, k0, kc, dst);
    case 14:
      return packA<14>(a, i0, mc, k0, kc, dst);
  }
  throw Error("matmul: internal error: no A packing for a micro-kernel of " + std::to_string(mr) + " rows");
}

/// Packs depth [k0, k0+kc) x columns [j0, j0+cols) of B into one NR-wide
/// panel: kc steps of NR floats, columns past the matrix zero.
template <int NR>
void packBPanel(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols, float* dst) {
  const float* src = b.p + k0 * b.rs + j0 * b.cs;
  if (cols == NR && b.cs == 1) {
    // Rows of B are contiguous: fixed-width copies the compiler vectorises.
    for (int k = 0; k < kc; ++k, src += b.rs, dst += NR)
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) dst[j] = src[j];
    return;
  }
  for (int k = 0; k < kc; ++k, src += b.rs, dst += NR) {
    int j = 0;
    for (; j < cols; ++j) dst[j] = src[j * b.cs];
    for (; j < NR; ++j) dst[j] = 0;
  }
}

void packBPanel(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols, int nr, float* dst) {
  switch (nr) {
    case 16:
      return packBPanel<16>(b, k0, kc, j0, cols, dst);
    case 32:
      return packBPanel<32>(b, k0, kc, j0, cols, dst);
  }
  throw Error("matmul: internal error: no B packing for a micro-kernel of " + std::to_string(nr) + " columns");
}

/// x rounded to the nearest bf16, as f32.
inline float roundedToBf16(float x) { return core::bf16ToFloat(core::floatToBf16(x)); }

/// applyEpilogue with Epilogue::bf16Steps: each step as a separate bf16 op
/// computes it (in f32, the result rounded to bf16), one pass over the row
/// (in L1) per step.
__attribute__((target_clones("avx512f", "avx2", "default"))) void applyBf16StepsEpilogue(
    const Epilogue& e, float* c, int64_t ldc, int64_t rows, int64_t cols, int64_t i0, int64_t j0) {
  for (int64_t i = 0; i < rows; ++i) {
    float* __restrict row = c + i * ldc;
#pragma GCC ivdep
    for (int64_t j = 0; j < cols; ++j) row[j] = roundedToBf16(row[j]);
    if (e.scaled) {
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) row[j] = roundedToBf16(row[j] * e.scale);
    }
    if (e.bias) {
      const float* bias = e.bias + j0 * e.biasStride;
      if (e.biasStride == 1) {
#pragma GCC ivdep
        for (int64_t j = 0; j < cols; ++j) row[j] = roundedToBf16(row[j] + bias[j]);
      } else {
        for (int64_t j = 0; j < cols; ++j) row[j] = roundedToBf16(row[j] + bias[j * e.biasStride]);
      }
    }
    if (e.residual) {
      const float* residual = e.residual + (i0 + i) * e.residualRs + j0;
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) row[j] = roundedToBf16(row[j] + residual[j]);
    }
    if (e.residualBf16) {
      const uint16_t* residual = e.residualBf16 + (i0 + i) * e.residualRs + j0;
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j)
        row[j] = roundedToBf16(row[j] + core::bf16ToFloat(residual[j]));
    }
    if (e.relu) {
      // As the f32 relu below: NaN stays NaN.
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) row[j] = row[j] < 0.0f ? 0.0f : row[j];
    }
  }
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void applyEpilogue(const Epilogue& e, float* c,
                                                                                  int64_t ldc, int64_t rows,
                                                                                  int64_t cols, int64_t i0,
                                                                                  int64_t j0) {
  if (e.bf16Steps) return applyBf16StepsEpilogue(e, c, ldc, rows, cols, i0, j0);
  for (int64_t i = 0; i < rows; ++i) {
    float* __restrict row = c + i * ldc;
    if (e.scaled) {
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) row[j] *= e.scale;
    }
    if (e.bias) {
      const float* bias = e.bias + j0 * e.biasStride;
      if (e.biasStride == 1) {
#pragma GCC ivdep
        for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
      } else {
        for (int64_t j = 0; j < cols; ++j) row[j] += bias[j * e.biasStride];
      }
    }
    if (e.residual) {
      const float* residual = e.residual + (i0 + i) * e.residualRs + j0;
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) row[j] += residual[j];
    }
    if (e.relu) {
      // x < 0 ? 0 : x, so that NaN stays NaN (the interpreter's relu).
#pragma GCC ivdep
      for (int64_t j = 0; j < cols; ++j) row[j] = row[j] < 0.0f ? 0.0f : row[j];
    }
  }
}

namespace {

/// Whether the micro-kernels apply `e` as they store the tiles
/// (TileEpilogue): a bias with contiguous columns or none. A strided bias
/// is added to the stored tile (applyEpilogue).
bool fusesEpilogue(const Epilogue* e) { return e && !e->bf16Steps && (!e->bias || e->biasStride == 1); }

/// `e` for the tile whose first row and column are row i0 and column j0 of
/// the product.
TileEpilogue fusedFor(const Epilogue* e, int64_t i0, int64_t j0) {
  if (!e) return {};
  return {e->bias ? e->bias + j0 : nullptr, e->relu, e->residual ? e->residual + i0 * e->residualRs + j0 : nullptr,
          e->residualRs, e->scaled, e->scale};
}

/// The depth of each pass over C for depth K in passes of at most kc: equal
/// passes rather than full ones and a sliver (K = 1100 runs as two passes of
/// 550, not 1024 + 76: each pass costs a pass over C).
int depthStep(int64_t K, int kc) {
  const int64_t passes = (K + kc - 1) / kc;
  return static_cast<int>((K + passes - 1) / passes);
}

/// Products this small run on unpacked operands. Packing pays for itself by
/// reuse (an A block over every column panel of B, a B panel over every row
/// panel of A), and a small product reuses little: on one Zen 3 core,
/// attention's per-head products (64x64x32, 64x32x64, 32x64x64) ran at
/// 56-66 GFLOP/s packed and 65-87 unpacked, while 512x128x128 ran 5-10 %
/// slower unpacked (B's rows, 512 bytes apart, fall into few L1 sets), but
/// 19 % faster on two Zen 5 cores: larger products try both
/// (BlockingTuner.h, kDirectTrialMultiplyAdds).
/// Products this small also run on one thread (kSplitMultiplyAdds).
constexpr int64_t kDirectMultiplyAdds = kSplitMultiplyAdds;
/// The most floats a direct product packs column-major B into (4 MiB).
constexpr int64_t kMaxDirectPanelFloats = int64_t{1} << 20;

/// Does the unpacked product take these operands? A's rows or its columns
/// contiguous and B's rows contiguous, or its columns (which are packed into
/// panels first: mk.packColumnMajorB).
bool directLayouts(const MicroKernel& mk, int64_t N, int64_t K, StridedMatrix a, StridedMatrix b) {
  if (!mk.runDirect) return false;
  // Column-major B is packed whole, K deep, into the thread's kept scratch:
  // only while that stays as small as the blocked path's packed block (a
  // matrix-vector product with K = 2^24 packed 2 GiB, 32 times B, and kept it).
  const int64_t panelFloats = K * mk.nr * ((N + mk.nr - 1) / mk.nr);
  return (a.cs == 1 || a.rs == 1) &&
         (b.cs == 1 || (b.rs == 1 && mk.packColumnMajorB && panelFloats <= kMaxDirectPanelFloats));
}

/// Whether the product runs unpacked (directProduct) without trials: small,
/// or one column panel wide (each element of A then meets one tile: a packed
/// copy of A would be read once; N = 10 logits: 256x10x512 took 41 us packed
/// and 2x oneDNN's), on operands directLayouts takes.
bool runsDirect(const MicroKernel& mk, int64_t M, int64_t N, int64_t K, StridedMatrix a, StridedMatrix b) {
  return (M * N <= kDirectMultiplyAdds / K || N <= mk.nr) && directLayouts(mk, N, K, a, b);
}

/// The product on unpacked operands (runsDirect, or Blocking::direct where
/// the tuner chose it): the row panels of each
/// task in mc blocks, so that a block of A stays in L2 while the column
/// panels go by, and each tile's depth passes while it is in L1.
void directProduct(const MicroKernel& mk, int threads, int64_t M, int64_t N, int64_t K, StridedMatrix a,
                   StridedMatrix b, float* c, int64_t ldc, bool accumulate, const Epilogue* epilogue) {
  const int MR = mk.mr, NR = mk.nr;
  const bool columnMajorA = a.cs != 1;
  const int64_t lda = columnMajorA ? a.cs : a.rs;
  const int64_t rowPanels = (M + MR - 1) / MR;
  const int colPanels = static_cast<int>((N + NR - 1) / NR);
  // Column panel p at depth k starts at bAt + p * panelStep + k * ldb: B
  // itself where its rows are contiguous, else its columns packed into
  // NR-wide panels of depth K (a transposing copy, which a strided read of
  // B's columns in the tile would cost many times over).
  const float* bAt = b.p;
  int64_t ldb = b.rs, panelStep = NR;
  std::optional<ScratchBuffer> bPanels;
  if (b.cs != 1) {
    bPanels.emplace(tlsBBlock, sizeof(float) * K * NR * colPanels, "matmul (packing B's columns)");
    float* panels = bPanels->as<float>();
    for (int p = 0; p < colPanels; ++p)
      mk.packColumnMajorB(b, 0, static_cast<int>(K), static_cast<int64_t>(p) * NR,
                          static_cast<int>(std::min<int64_t>(NR, N - static_cast<int64_t>(p) * NR)),
                          panels + static_cast<int64_t>(p) * K * NR);
    bAt = panels, ldb = NR, panelStep = K * NR;
  }
  const WorkSplit grid = splitWork(rowPanels, colPanels, threads);
  const int kcStep = depthStep(K, mk.kc), mcStep = mk.mc;
  forEachTask(grid.rows * grid.cols, [&](int t) {
    const TaskShare share = grid.share(t, rowPanels, colPanels, MR, M);
    for (int64_t ic = share.i0; ic < share.i1; ic += mcStep) {
      const int mc = static_cast<int>(std::min<int64_t>(mcStep, share.i1 - ic));
      for (int p = share.p0; p < share.p1; ++p) {
        const int64_t j0 = static_cast<int64_t>(p) * NR;
        const int nr = static_cast<int>(std::min<int64_t>(NR, N - j0));
        for (int ir = 0; ir < mc; ir += MR) {
          float* tile = c + (ic + ir) * ldc + j0;
          const int mr = std::min(MR, mc - ir);
          // The packed product's depth passes, so its roundings: each pass
          // sums in registers and adds to C.
          const TileEpilogue fused = fusedFor(epilogue, ic + ir, j0);
          for (int64_t pc = 0; pc < K; pc += kcStep) {
            const bool last = pc + kcStep >= K;
            mk.runDirect(static_cast<int>(std::min<int64_t>(kcStep, K - pc)), a.p + (ic + ir) * a.rs + pc * a.cs, lda,
                         columnMajorA, bAt + p * panelStep + pc * ldb, ldb, tile, ldc, mr, nr, accumulate || pc > 0,
                         last && fusesEpilogue(epilogue) ? &fused : nullptr);
          }
          if (epilogue && !fusesEpilogue(epilogue)) applyEpilogue(*epilogue, tile, ldc, mr, nr, ic + ir, j0);
        }
      }
    }
  });
}

/// The blocked product with blocking `blk` (sgemm's contract, K > 0); half
/// operands are widened as they are packed (HalfOperands.h).
void blockedProduct(const MicroKernel& mk, Blocking blk, int threads, int64_t M, int64_t N, int64_t K,
                    StoredMatrix a, StoredMatrix b, float* c, int64_t ldc, bool accumulate,
                    const Epilogue* epilogue) {
  const int MR = mk.mr, NR = mk.nr;
  const int64_t rowPanels = (M + MR - 1) / MR;
  const int kcStep = depthStep(K, mk.kc);
  const int ncStep = columnStep(N, blk.nc, NR);
  ScratchBuffer bBlock(tlsBBlock, sizeof(float) * kcStep * ncStep, "matmul (packing B)");

  for (int64_t jc = 0; jc < N; jc += ncStep) {
    const int nc = static_cast<int>(std::min<int64_t>(ncStep, N - jc));
    const int colPanels = (nc + NR - 1) / NR;
    const WorkSplit grid = splitWork(rowPanels, colPanels, threads);
    for (int64_t pc = 0; pc < K; pc += kcStep) {
      const int kc = static_cast<int>(std::min<int64_t>(kcStep, K - pc));
      const int packTasks = std::min(threads, colPanels / 4 + 1);
      const bool halfB = b.storage != Storage::f32;
      const bool columnMajorB = b.rs == 1 && b.cs != 1 && mk.packColumnMajorB;
      const bool rowMajorB = b.cs == 1 && mk.packRowMajorB;
      forEachTask(packTasks, [&](int t) {
        const int p0 = colPanels * t / packTasks, p1 = colPanels * (t + 1) / packTasks;
        if (!halfB && rowMajorB && p1 > p0) {
          mk.packRowMajorB(asF32(b), pc, kc, jc + static_cast<int64_t>(p0) * NR, std::min(nc, p1 * NR) - p0 * NR,
                           bBlock.as<float>() + static_cast<int64_t>(p0) * kc * NR);
          return;
        }
        for (int p = p0; p < p1; ++p) {
          const int64_t j0 = jc + static_cast<int64_t>(p) * NR;
          float* panel = bBlock.as<float>() + static_cast<int64_t>(p) * kc * NR;
          if (halfB)
            packWidenedBPanel(mk, b, pc, kc, j0, std::min(NR, nc - p * NR), panel);
          else if (columnMajorB)
            mk.packColumnMajorB(asF32(b), pc, kc, j0, std::min(NR, nc - p * NR), panel);
          else
            packBPanel(asF32(b), pc, kc, j0, std::min(NR, nc - p * NR), NR, panel);
        }
      });
      const bool addToC = accumulate || pc > 0;
      const Epilogue* tileEpilogue = pc + kc >= K ? epilogue : nullptr;  // after the last depth pass
      // Rows [share.i0, share.i1) of C, mc at a time, over column panels
      // [share.p0, share.p1) of the B block.
      auto rowBlocks = [&](const TaskShare& share) {
        if (share.empty()) return;
        ScratchBuffer aBlock(tlsABlock, sizeof(float) * blk.mc * kc, "matmul (packing A)");
        for (int64_t ic = share.i0; ic < share.i1; ic += blk.mc) {
          const int mc = static_cast<int>(std::min<int64_t>(blk.mc, share.i1 - ic));
          if (a.storage != Storage::f32)
            packWidenedA(mk, a, ic, mc, pc, kc, aBlock.as<float>());
          else if (a.cs == 1 && mk.packRowMajorA)
            mk.packRowMajorA(asF32(a), ic, mc, pc, kc, aBlock.as<float>());
          else if (a.rs == 1 && mk.packColumnMajorA)
            mk.packColumnMajorA(asF32(a), ic, mc, pc, kc, aBlock.as<float>());
          else
            packA(asF32(a), ic, mc, pc, kc, MR, aBlock.as<float>());
          for (int p = share.p0; p < share.p1; ++p) {
            const int nr = std::min(NR, nc - p * NR);
            const float* bp = bBlock.as<float>() + static_cast<int64_t>(p) * kc * NR;
            float* cp = c + ic * ldc + jc + static_cast<int64_t>(p) * NR;
            const bool fusedEpilogue = tileEpilogue && fusesEpilogue(tileEpilogue);
            const int64_t j0 = jc + static_cast<int64_t>(p) * NR;
            for (int ir = 0; ir < mc; ir += MR) {
              const TileEpilogue fused = fusedFor(tileEpilogue, ic + ir, j0);
              mk.run(kc, aBlock.as<float>() + static_cast<int64_t>(ir) * kc, bp, cp + ir * ldc, ldc, std::min(MR, mc - ir),
                     nr, addToC, fusedEpilogue ? &fused : nullptr);
              if (tileEpilogue && !fusedEpilogue)
                applyEpilogue(*tileEpilogue, cp + ir * ldc, ldc, std::min(MR, mc - ir), nr, ic + ir, j0);
            }
          }
        }
      };
      forEachShare(grid, colPanels, MR, M, blk.mc, rowBlocks);
    }
  }
}

/// The f32 GEMM's call as tier 2 sees it, operands laid out as named.
TunableCall tunableCall(const MicroKernel& mk, int64_t M, int64_t N, int64_t K, int threads, bool parallel,
                        const char* aLayout, const char* bLayout) {
  return {.kernel = "sgemm",
          .isa = isaName(mk.isa),
          .aLayout = aLayout,
          .bLayout = bLayout,
          .M = M,
          .N = N,
          .K = K,
          .threads = threads,
          .parallel = parallel,
          .byDefault = {mk.mc, mk.nc},
          .mcUnit = mk.mr,
          .ncUnit = mk.nr};
}

}  // namespace

void sgemm(int64_t M, int64_t N, int64_t K, StridedMatrix a, StridedMatrix b, float* c, int64_t ldc, bool accumulate,
           bool parallel, const Epilogue* epilogue) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return productOverEmptyDepth(M, N, c, ldc, accumulate, epilogue);
  const MicroKernel& mk = microKernelFor(activeIsa());
  const int threads = gemmThreads(M, N, K, parallel);
  // Small products and those one column panel wide run unpacked; larger
  // ones up to kDirectTrialMultiplyAdds try it (BlockingTuner.h).
  if (runsDirect(mk, M, N, K, a, b)) return directProduct(mk, threads, M, N, K, a, b, c, ldc, accumulate, epilogue);
  TunableCall call = tunableCall(mk, M, N, K, threads, parallel, operandLayout(a.rs, a.cs), operandLayout(b.rs, b.cs));
  call.directCandidate = M * N * K <= kDirectTrialMultiplyAdds && directLayouts(mk, N, K, a, b);
  runWithTunedBlocking(call, [&](Blocking blk) {
    if (blk.direct) directProduct(mk, threads, M, N, K, a, b, c, ldc, accumulate, epilogue);
    else blockedProduct(mk, blk, threads, M, N, K, {a.p, a.rs, a.cs}, {b.p, b.rs, b.cs}, c, ldc, accumulate, epilogue);
  });
}

namespace {
/// The tuning site's name for operand `m`'s layout and storage ("rows",
/// "bf16 rows", "f16 columns", ...).
const char* storedLayout(StoredMatrix m) {
  static constexpr const char* kNames[3][3] = {{"rows", "columns", "strided"},
                                               {"bf16 rows", "bf16 columns", "bf16 strided"},
                                               {"f16 rows", "f16 columns", "f16 strided"}};
  const int layout = m.cs == 1 ? 0 : m.rs == 1 ? 1 : 2;  // as operandLayout
  return kNames[static_cast<int>(m.storage)][layout];
}
}  // namespace

void sgemmWidening(int64_t M, int64_t N, int64_t K, StoredMatrix a, StoredMatrix b, float* c, int64_t ldc,
                   bool accumulate, bool parallel, const Epilogue* epilogue) {
  if (a.storage == Storage::f32 && b.storage == Storage::f32)
    return sgemm(M, N, K, asF32(a), asF32(b), c, ldc, accumulate, parallel, epilogue);
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return productOverEmptyDepth(M, N, c, ldc, accumulate, epilogue);
  const MicroKernel& mk = microKernelFor(activeIsa());
  // A small product's half operands widened whole (each at most
  // kDirectMultiplyAdds floats), then the f32 product: the unpacked path,
  // which reads its operands in place, needs them as f32. So for a product
  // one column panel wide (N = 10 logits), which runs unpacked at any M, when
  // only its B (at most K x NR) is half.
  const bool narrow = N <= mk.nr && a.storage == Storage::f32 && K * N <= kDirectMultiplyAdds;
  if (M * N <= kDirectMultiplyAdds / K || narrow) {
    std::optional<ScratchBuffer> wa, wb;
    // `m` (rows x cols) as f32: itself, or widened dense into `kept`.
    auto f32 = [](StoredMatrix m, int64_t rows, int64_t cols, ScratchSlot& slot, std::optional<ScratchBuffer>& kept,
                  const char* what) -> StridedMatrix {
      if (m.storage == Storage::f32) return asF32(m);
      kept.emplace(slot, sizeof(float) * rows * cols, what);
      widenBlock(m, 0, rows, 0, cols, kept->as<float>(), cols);
      return {kept->as<float>(), cols, 1};
    };
    return sgemm(M, N, K, f32(a, M, K, tlsWidenedA, wa, "matmul (widening A)"),
                 f32(b, K, N, tlsWidenedB, wb, "matmul (widening B)"), c, ldc, accumulate, parallel, epilogue);
  }
  const int threads = gemmThreads(M, N, K, parallel);
  // Tuning sites of their own (the storage in the layout's name): widening
  // changes what a blocking costs, and the unpacked product is no candidate.
  const TunableCall call = tunableCall(mk, M, N, K, threads, parallel, storedLayout(a), storedLayout(b));
  runWithTunedBlocking(call, [&](Blocking blk) {
    blockedProduct(mk, blk, threads, M, N, K, a, b, c, ldc, accumulate, epilogue);
  });
}

}  // namespace kiln::interp::gemm
