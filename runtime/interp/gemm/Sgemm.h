// Kiln's f32 GEMM: packed, cache-blocked, with a register-tiled micro-kernel
// per instruction set chosen at run time. The interpreter's matmul and the
// compiled kernels' runtime call (kiln_rt_matmul_f32) both end here.
#pragma once

#include <cstdint>

namespace kiln::interp::gemm {

/// The instruction sets the GEMM has micro-kernels for, weakest first.
enum class Isa { scalar, avx2, avx512 };

const char* isaName(Isa isa);
/// Whether this CPU (and OS) can run `isa`'s micro-kernel.
bool cpuSupports(Isa isa);
/// The ISA the GEMM uses: the best the CPU supports, or KILN_GEMM_ISA
/// (scalar, avx2, avx512) when set to one it supports.
Isa activeIsa();
/// Test and benchmark hook: makes the GEMM use `isa` (clamped to what the
/// CPU supports) for the rest of the process; returns the ISA it replaced.
Isa setActiveIsa(Isa isa);

/// A strided f32 matrix operand: element (r, c) at p[r*rs + c*cs].
struct StridedMatrix {
  const float* p;
  int64_t rs, cs;
};

/// How a GEMM operand's elements are stored: f32, or a half type that the
/// GEMM widens to f32 (exactly) as it packs the operand (sgemmWidening).
enum class Storage : uint8_t { f32, bf16, f16 };

/// A strided operand stored as `storage`: element (r, c) at p[r*rs + c*cs],
/// offsets counted in elements of its storage.
struct StoredMatrix {
  const void* p;
  int64_t rs, cs;
  Storage storage = Storage::f32;
};

/// Below this many multiply-adds (about 10 microseconds on one core)
/// splitting one GEMM over threads costs more than it saves, since the other
/// threads are often asleep between a framework's small ops: such GEMMs run
/// on the calling thread, and those of a batch one per thread. (2^18 made
/// the PyTorch backend's MLP step, 64x64x128 GEMMs, ~30 % slower in Kiln.)
inline constexpr int64_t kSplitMultiplyAdds = int64_t{1} << 20;

/// What the GEMM applies to each finished tile of C while it is still in L1,
/// instead of a second pass over C: c = c * scale (when `scaled`), then
/// c + bias[j * biasStride] (with a bias), then c + residual[i *
/// residualRs + j] (with a residual: a
/// matrix with contiguous columns, e.g. a layer's input added back), then
/// max(c, 0) (with `relu`; NaN stays NaN). In that order, each a rounded f32
/// operation: the bits of the separate ops.
struct Epilogue {
  const float* bias = nullptr;
  int64_t biasStride = 1;
  bool relu = false;
  const float* residual = nullptr;
  int64_t residualRs = 0;
  bool scaled = false;
  float scale = 1.0f;
  /// The roundings of separate bf16 ops (a bf16 product, then each op's
  /// result rounded to bf16): the sum first, then the scale's, the bias's
  /// and the residual's results; a bf16 residual is residualBf16 (rows
  /// residualRs apart). For the bf16 GEMM whose result is rounded to bf16
  /// (gemmBf16RoundedOut), which then rounds nothing.
  bool bf16Steps = false;
  const uint16_t* residualBf16 = nullptr;
};

/// C[M,N] = A[M,K] * B[K,N], or C += A * B with `accumulate`, then the
/// epilogue if one is given. C's rows are `ldc` apart, its columns
/// contiguous. `parallel`: split the work over the current TBB arena's
/// threads (off when the caller already runs in parallel).
void sgemm(int64_t M, int64_t N, int64_t K, StridedMatrix a, StridedMatrix b, float* c, int64_t ldc, bool accumulate,
           bool parallel, const Epilogue* epilogue = nullptr);

/// sgemm with operands stored as f32, bf16 or f16: the bits of sgemm on f32
/// copies of the operands, without making the copies. A half operand is
/// widened block by block as the GEMM packs it (HalfOperands.h), in L2; a
/// small product's, whole into the thread's kept scratch (at most 4 MiB).
/// What a cast from f16 or bf16 feeding a matmul costs: no f32 tensor and
/// no pass over memory of its own.
void sgemmWidening(int64_t M, int64_t N, int64_t K, StoredMatrix a, StoredMatrix b, float* c, int64_t ldc,
                   bool accumulate, bool parallel, const Epilogue* epilogue = nullptr);

/// Applies `e` to C[0:rows, 0:cols] (rows ldc apart), which is rows [i0,
/// i0 + rows) and columns [j0, j0 + cols) of the product.
void applyEpilogue(const Epilogue& e, float* c, int64_t ldc, int64_t rows, int64_t cols, int64_t i0, int64_t j0);

}  // namespace kiln::interp::gemm
