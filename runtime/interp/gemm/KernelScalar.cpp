// The portable micro-kernel, for CPUs without AVX2/FMA.
#include "runtime/interp/gemm/MicroKernel.h"

namespace kiln::interp::gemm {

namespace {

constexpr int kMR = 6, kNR = 16;

void microKernelScalar(int kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                       bool accumulate) {
  float acc[kMR * kNR] = {};
  for (int k = 0; k < kc; ++k)
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < kNR; ++j) acc[i * kNR + j] += ap[k * kMR + i] * bp[k * kNR + j];
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i * kNR + j] : acc[i * kNR + j];
}

}  // namespace

const MicroKernel& scalarMicroKernel() {
  static const MicroKernel k{Isa::scalar, kMR, kNR, /*kc=*/256, /*mc=*/72, /*nc=*/2048, microKernelScalar};
  return k;
}

}  // namespace kiln::interp::gemm
