// Widening bf16 and f16 GEMM operands into the packed panels (HalfOperands.h),
// by HalfConversion.h's runs.
#include "runtime/interp/gemm/HalfOperands.h"

#include <algorithm>
#include <optional>

#include "runtime/interp/HalfConversion.h"
#include "runtime/interp/ScratchBuffer.h"

namespace kiln::interp::gemm {

namespace {

/// A panel's rows of A widened before they are packed (at most MR x kc).
thread_local ScratchSlot tlsWidenStage;

/// The dtype of a half storage.
DType typeOf(Storage s) { return s == Storage::bf16 ? DType::bf16 : DType::f16; }

/// An A panel's layout (kc steps of MR floats) from `rows` rows of depth kc
/// at `stage` (row-major, kc apart): the micro-kernel's own A packing
/// where it has one, else a plain transposition; rows past `rows` zero.
void packStagedRows(const MicroKernel& mk, const float* stage, int rows, int kc, float* dst) {
  if (mk.packRowMajorA) return mk.packRowMajorA({stage, kc, 1}, 0, rows, 0, kc, dst);
  for (int k = 0; k < kc; ++k) {
    float* d = dst + static_cast<int64_t>(k) * mk.mr;
    int i = 0;
    for (; i < rows; ++i) d[i] = stage[static_cast<int64_t>(i) * kc + k];
    for (; i < mk.mr; ++i) d[i] = 0;
  }
}

}  // namespace

void widenBlock(StoredMatrix m, int64_t i0, int64_t rows, int64_t j0, int64_t cols, float* dst, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i) {
    float* d = dst + i * ld;
    const int64_t at = (i0 + i) * m.rs + j0 * m.cs;
    if (m.storage == Storage::f32) {
      const float* src = static_cast<const float*>(m.p) + at;
      for (int64_t j = 0; j < cols; ++j) d[j] = src[j * m.cs];
    } else {
      widenHalfRun(typeOf(m.storage), static_cast<const uint16_t*>(m.p) + at, m.cs, d, cols);
    }
  }
}

void packWidenedA(const MicroKernel& mk, StoredMatrix a, int64_t i0, int mc, int64_t k0, int kc, float* dst) {
  const int MR = mk.mr;
  const auto* src = static_cast<const uint16_t*>(a.p);
  std::optional<ScratchBuffer> stage;
  for (int p = 0; p < mc; p += MR) {
    const int rows = std::min(MR, mc - p);
    const int64_t r0 = i0 + p;
    float* panel = dst + static_cast<int64_t>(p) * kc;
    if (a.rs == 1) {
      // Rows contiguous at each depth step: widened straight into the panel.
      for (int k = 0; k < kc; ++k) {
        float* d = panel + static_cast<int64_t>(k) * MR;
        widenHalfRun(typeOf(a.storage), src + (k0 + k) * a.cs + r0, 1, d, rows);
        std::fill(d + rows, d + MR, 0.0f);
      }
      continue;
    }
    if (!stage) stage.emplace(tlsWidenStage, sizeof(float) * MR * kc, "matmul (widening A)");
    float* rowsAt = stage->as<float>();
    widenBlock(a, r0, rows, k0, kc, rowsAt, kc);
    packStagedRows(mk, rowsAt, rows, kc, panel);
  }
}

void packWidenedBPanel(const MicroKernel& mk, StoredMatrix b, int64_t k0, int kc, int64_t j0, int cols,
                       float* dst) {
  const int NR = mk.nr;
  const auto* src = static_cast<const uint16_t*>(b.p);
  if (b.rs == 1 && b.cs != 1 && mk.packColumnMajorB) {
    // Columns contiguous (x @ W^T): each column's depth run widened into a
    // staging block, then the micro-kernel's own transposing packing.
    ScratchBuffer stage(tlsWidenStage, sizeof(float) * NR * kc, "matmul (widening B)");
    float* columns = stage.as<float>();
    for (int j = 0; j < cols; ++j)
      widenHalfRun(typeOf(b.storage), src + (j0 + j) * b.cs + k0, 1, columns + static_cast<int64_t>(j) * kc, kc);
    return mk.packColumnMajorB({columns, 1, kc}, 0, kc, 0, cols, dst);
  }
  // One depth step of the panel is row k of B's columns [j0, j0 + cols):
  // contiguous for row-major B, a strided read otherwise.
  for (int k = 0; k < kc; ++k) {
    float* d = dst + static_cast<int64_t>(k) * NR;
    widenHalfRun(typeOf(b.storage), src + (k0 + k) * b.rs + j0 * b.cs, b.cs, d, cols);
    std::fill(d + cols, d + NR, 0.0f);
  }
}

}  // namespace kiln::interp::gemm
