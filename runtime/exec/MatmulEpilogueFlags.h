// The flags argument of kiln_rt_matmul_epilogue_f32/_bf16 and
// kiln_rt_matmul_widening_f32: the contract
// between those entry points (KernelRuntime.cpp) and the calls the CPU
// compiler writes (kiln-cpu-matmul-to-runtime-calls, jit/targets/cpu/
// CpuTransforms.cpp). The epilogue applies them in the order
// ((c * scale) + bias) + residual, then relu, then the rounding.
#pragma once

#include <cstdint>

namespace kiln::exec {

/// Adds bias[j * biasStride].
inline constexpr int64_t kEpilogueBias = 1;
/// Takes max(c, 0) (NaN stays NaN).
inline constexpr int64_t kEpilogueRelu = 2;
/// Rounds C to bf16 (the bf16 entry point only; C is then a bf16 buffer).
inline constexpr int64_t kEpilogueRoundToBf16 = 4;
/// Adds residual[i * residualRs + j].
inline constexpr int64_t kEpilogueResidual = 8;
/// Multiplies by the float whose bits are the low 32 of scaleBits.
inline constexpr int64_t kEpilogueScale = 16;

// How the f32 entry points' A and B are stored (kiln_rt_matmul_epilogue_f32,
// kiln_rt_matmul_widening_f32): bf16 or f16, widened to f32 as the GEMM packs
// them (a cast feeding the matmul, folded into it); f32 when neither is set.
inline constexpr int64_t kOperandABf16 = 32;
inline constexpr int64_t kOperandAF16 = 64;
inline constexpr int64_t kOperandBBf16 = 128;
inline constexpr int64_t kOperandBF16 = 256;
/// kiln_rt_matmul_widening_f32 adds the product to C (else it sets C).
inline constexpr int64_t kMatmulAccumulate = 512;

}  // namespace kiln::exec
