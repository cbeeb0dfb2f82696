// GEMM operands stored as bf16 or f16 (Sgemm.h, StoredMatrix), widened to
// f32 as the driver packs them. Widening is exact, so the packed panels hold
// the floats a cast to f32 would have written, and the product has the
// bits of the f32 GEMM of cast operands, without the cast's f32 copy and
// its passes over memory.
#pragma once

#include <cstdint>

#include "runtime/interp/gemm/MicroKernel.h"

namespace kiln::interp::gemm {

/// The f32 view of an operand stored as f32.
inline StridedMatrix asF32(StoredMatrix m) { return {static_cast<const float*>(m.p), m.rs, m.cs}; }

/// Rows [i0, i0 + rows) x columns [j0, j0 + cols) of `m` (any storage) as
/// f32 at dst, row-major with rows `ld` apart.
void widenBlock(StoredMatrix m, int64_t i0, int64_t rows, int64_t j0, int64_t cols, float* dst, int64_t ld);

/// Packs rows [i0, i0+mc) x depth [k0, k0+kc) of a half-stored A into the
/// MR-high panels the micro-kernel reads (MicroKernelFn's ap: kc steps of MR
/// floats, rows past the matrix zero). A whose columns are contiguous is
/// widened straight into the panels; otherwise each panel's rows are
/// widened into a staging block in L1/L2 and packed from there.
void packWidenedA(const MicroKernel& mk, StoredMatrix a, int64_t i0, int mc, int64_t k0, int kc, float* dst);

/// Packs depth [k0, k0+kc) x columns [j0, j0+cols) of a half-stored B into
/// one NR-wide panel (MicroKernelFn's bp: kc steps of NR floats, columns
/// past the matrix zero).
void packWidenedBPanel(const MicroKernel& mk, StoredMatrix b, int64_t k0, int kc, int64_t j0, int cols,
                       float* dst);

}  // namespace kiln::interp::gemm
