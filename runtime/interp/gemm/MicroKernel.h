// The GEMM's seam between the blocked driver (Sgemm.cpp) and the per-ISA
// register tiles (Kernel<Isa>.cpp).
#pragma once

#include <cstdint>

#include "runtime/interp/gemm/Sgemm.h"

namespace kiln::interp::gemm {

/// What a tile's store applies to its sums on the product's last depth pass
/// (Sgemm.h's Epilogue, fused): the scale, bias[j] added to column j (the tile's own
/// columns, contiguous), then the residual's element, then relu (x < 0 ? 0
/// : x: NaN stays NaN). The
/// same operations in the same order as applyEpilogue on the stored tile,
/// so the same bits, without reading the tile back.
struct TileEpilogue {
  const float* bias = nullptr;
  bool relu = false;
  /// The residual's element for the tile's first row and column; its rows
  /// residualRs apart, its columns contiguous.
  const float* residual = nullptr;
  int64_t residualRs = 0;
  bool scaled = false;
  float scale = 1.0f;
};

/// C[0:mr, 0:nr] (=, or += with `accumulate`) Ap * Bp over depth kc, where Ap
/// is a packed A micro-panel (kc steps of MR floats, rows >= mr zero) and Bp a
/// packed B micro-panel (kc steps of NR floats, 64-byte aligned, columns >= nr
/// zero). C's rows are ldc apart. 1 <= mr <= MR, 1 <= nr <= NR, kc >= 1.
/// A non-null `epilogue` is applied before the store.
using MicroKernelFn = void (*)(int kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                               bool accumulate, const TileEpilogue* epilogue);

/// Packs rows [i0, i0+mc) x depth [k0, k0+kc) of A, whose rows are
/// contiguous (cs == 1), into MR-high panels (kc steps of MR floats each, rows
/// past the matrix zero): the layout ap of MicroKernelFn expects.
using PackRowMajorAFn = void (*)(StridedMatrix a, int64_t i0, int mc, int64_t k0, int kc, float* dst);

/// Packs depth [k0, k0+kc) x columns [j0, j0+cols) of B, whose columns are
/// contiguous (rs == 1), into one NR-wide panel (kc steps of NR floats,
/// columns past the matrix zero): the layout bp of MicroKernelFn expects.
using PackColumnMajorBFn = void (*)(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols, float* dst);

/// Packs depth [k0, k0+kc) x columns [j0, j0+cols) of B, whose rows are
/// contiguous (cs == 1), into consecutive NR-wide panels (kc * NR floats
/// apart; columns past the matrix zero), one row of B at a time: the reads
/// run along B's rows instead of down one panel's column of short pieces.
using PackRowMajorBFn = void (*)(StridedMatrix b, int64_t k0, int kc, int64_t j0, int cols, float* dst);

/// The register tile on unpacked operands: C[0:mr, 0:nr] (=, or +=) A * B
/// over depth kc, where A's rows are lda apart with their depth contiguous
/// (or, `columnMajorA`, its depth steps lda apart with its rows contiguous)
/// and B's depth steps ldb apart with their columns contiguous. It reads no
/// element past row mr of A or column nr of B, and gives the packed tile's
/// bits (the same FMAs in the same order).
using DirectKernelFn = void (*)(int kc, const float* a, int64_t lda, bool columnMajorA, const float* b, int64_t ldb,
                                float* c, int64_t ldc, int mr, int nr, bool accumulate,
                                const TileEpilogue* epilogue);

/// A register tile and the cache blocking tuned for it.
struct MicroKernel {
  Isa isa;
  int mr, nr;  // register tile: rows of A (broadcast) x columns of B (vectors)
  int kc;      // depth of a packed panel
  int mc;      // rows of A per packed block (a multiple of mr; L2)
  int nc;      // columns of B per packed block (a multiple of nr; L3)
  MicroKernelFn run;
  PackRowMajorAFn packRowMajorA = nullptr;  // optional; the driver's generic packing otherwise
  PackColumnMajorBFn packColumnMajorB = nullptr;  // optional, likewise
  DirectKernelFn runDirect = nullptr;  // optional: small products skip packing (Sgemm.cpp, runsDirect)
  PackRowMajorAFn packColumnMajorA = nullptr;  // optional: A with contiguous columns (rs == 1), same layout
  PackRowMajorBFn packRowMajorB = nullptr;  // optional: B with contiguous rows, several panels at once
};

const MicroKernel& scalarMicroKernel();
const MicroKernel& avx2MicroKernel();
const MicroKernel& avx512MicroKernel();
/// The micro-kernel for `isa` (which the CPU must support).
const MicroKernel& microKernelFor(Isa isa);

}  // namespace kiln::interp::gemm
