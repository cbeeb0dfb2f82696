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

/// Below this many multiply-adds (about 10 microseconds on one core)
/// splitting one GEMM over threads costs more than it saves, since the other
/// threads are often asleep between a framework's small ops: such GEMMs run
/// on the calling thread, and those of a batch one per thread. (2^18 made
/// the PyTorch backend's MLP step, 64x64x128 GEMMs, ~30 % slower in Kiln.)
inline constexpr int64_t kSplitMultiplyAdds = int64_t{1} << 20;

/// C[M,N] = A[M,K] * B[K,N], or C += A * B with `accumulate`. C's rows are
/// `ldc` apart, its columns contiguous. `parallel`: split the work over the
/// current TBB arena's threads (off when the caller already runs in parallel).
void sgemm(int64_t M, int64_t N, int64_t K, StridedMatrix a, StridedMatrix b, float* c, int64_t ldc, bool accumulate,
           bool parallel);

}  // namespace kiln::interp::gemm
