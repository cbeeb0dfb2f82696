// Widening bf16 and f16 GEMM operands into the packed panels (HalfOperands.h):
// bf16 by a shift, f16 by F16C where the CPU has it.
#include "runtime/interp/gemm/HalfOperands.h"

#include <immintrin.h>

#include <algorithm>
#include <optional>

#include "runtime/core/Half.h"
#include "runtime/interp/ScratchBuffer.h"

namespace kiln::interp::gemm {

namespace {

/// A panel's rows of A widened before they are packed (at most MR x kc).
thread_local ScratchSlot tlsWidenStage;

bool cpuHasF16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

/// Contiguous f16 to f32 by the CPU's conversion instruction. It gives
/// core::halfToFloat's values (a signalling NaN comes out quiet, as a NaN
/// through the GEMM does anyway) and is not affected by denormals-are-zero.
__attribute__((target("avx,f16c"))) void widenF16Contiguous(const uint16_t* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) out[i] = core::halfToFloat(x[i]);
}

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

void widenHalfRun(Storage storage, const uint16_t* x, int64_t stride, float* out, int64_t n) {
  if (storage == Storage::bf16) {
    if (stride == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = core::bf16ToFloat(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = core::bf16ToFloat(x[i * stride]);
    }
    return;
  }
  if (stride == 1 && cpuHasF16c()) return widenF16Contiguous(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = core::halfToFloat(x[i * stride]);
}

void widenBlock(StoredMatrix m, int64_t i0, int64_t rows, int64_t j0, int64_t cols, float* dst, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i) {
    float* d = dst + i * ld;
    const int64_t at = (i0 + i) * m.rs + j0 * m.cs;
    if (m.storage == Storage::f32) {
      const float* src = static_cast<const float*>(m.p) + at;
      for (int64_t j = 0; j < cols; ++j) d[j] = src[j * m.cs];
    } else {
      widenHalfRun(m.storage, static_cast<const uint16_t*>(m.p) + at, m.cs, d, cols);
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
        widenHalfRun(a.storage, src + (k0 + k) * a.cs + r0, 1, d, rows);
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
      widenHalfRun(b.storage, src + (j0 + j) * b.cs + k0, 1, columns + static_cast<int64_t>(j) * kc, kc);
    return mk.packColumnMajorB({columns, 1, kc}, 0, kc, 0, cols, dst);
  }
  // One depth step of the panel is row k of B's columns [j0, j0 + cols):
  // contiguous for row-major B, a strided read otherwise.
  for (int k = 0; k < kc; ++k) {
    float* d = dst + static_cast<int64_t>(k) * NR;
    widenHalfRun(b.storage, src + (k0 + k) * b.rs + j0 * b.cs, b.cs, d, cols);
    std::fill(d + cols, d + NR, 0.0f);
  }
}

}  // namespace kiln::interp::gemm
