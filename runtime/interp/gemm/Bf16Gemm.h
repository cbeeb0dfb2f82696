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

#include "runtime/interp/gemm/Sgemm.h"

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
/// active bf16 units (which must not be none), then the epilogue if one is
/// given. C's rows are `ldc` apart, its columns contiguous. `parallel`: split
/// over the current TBB arena's threads.
void gemmBf16(int64_t M, int64_t N, int64_t K, Bf16Matrix a, Bf16Matrix b, float* c, int64_t ldc, bool accumulate,
              bool parallel, const Epilogue* epilogue = nullptr);

/// C = bf16(epilogue(A * B)) with C in bf16 (raw bits, rows `ldc` apart,
/// columns contiguous), rounded to nearest even as core::floatToBf16 rounds
/// (NaN stays a quiet NaN): the bits of gemmBf16 into f32 followed by a cast,
/// without the f32 matrix. While K fits one depth pass of the kernel (K <=
/// 1024 on AMX) each 32 x 32 block is rounded from L1 as it is finished;
/// deeper products go through an f32 temporary.
void gemmBf16RoundedOut(int64_t M, int64_t N, int64_t K, Bf16Matrix a, Bf16Matrix b, uint16_t* c, int64_t ldc,
                        bool parallel, const Epilogue* epilogue = nullptr);

}  // namespace kiln::interp::gemm
