// Kiln's bf16 GEMM: bf16 operands, f32 accumulation and result, on the CPU's
// bf16 dot-product units: AMX tiles (TDPBF16PS) where the CPU and the OS
// offer them, else AVX-512 BF16 (VDPBF16PS). On a CPU with neither the
// interpreter widens bf16 to f32 and runs the f32 GEMM (Sgemm.h) instead.
//
// Products of two bf16 values are exact in f32, so the result differs from
// the f32 GEMM of the widened operands only in the order of the sums, and in
// that the bf16 units treat denormal inputs as zero (as oneDNN's bf16 GEMM).
#pragma once

#include <cstdint>

namespace kiln::interp::gemm {

/// The bf16 dot-product units the bf16 GEMM can run on, weakest first.
enum class Bf16Isa { none, avx512bf16, amx };

const char* bf16IsaName(Bf16Isa isa);
/// Whether this CPU and OS can run `isa` (for AMX: the kernel granted this
/// process the tile data state, asked for on the first call).
bool cpuSupportsBf16(Bf16Isa isa);
/// The units the bf16 GEMM uses: the best supported, or KILN_GEMM_BF16
/// (none, avx512bf16, amx) when set to one the CPU supports.
Bf16Isa activeBf16Isa();
/// Test and benchmark hook: makes the bf16 GEMM use `isa` (clamped to what
/// the CPU supports) for the rest of the process; returns the one replaced.
Bf16Isa setActiveBf16Isa(Bf16Isa isa);

/// A strided bf16 matrix operand (raw bf16 bits): element (r, c) at
/// p[r*rs + c*cs].
struct Bf16Matrix {
  const uint16_t* p;
  int64_t rs, cs;
};

/// C[M,N] = A[M,K] * B[K,N] (or C += A * B with `accumulate`) in f32, on the
/// active bf16 units (which must not be none). C's rows are `ldc` apart, its
/// columns contiguous. `parallel`: split over the current TBB arena's threads.
void gemmBf16(int64_t M, int64_t N, int64_t K, Bf16Matrix a, Bf16Matrix b, float* c, int64_t ldc, bool accumulate,
              bool parallel);

}  // namespace kiln::interp::gemm
