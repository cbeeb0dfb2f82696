// The portable micro-kernel, for CPUs without AVX2/FMA.
#include "runtime/interp/gemm/MicroKernel.h"

namespace kiln::interp::gemm {

namespace {

constexpr int kMR = 6, kNR = 16;

void microKernelScalar(int kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
                       bool accumulate, const TileEpilogue* epilogue) {
  float acc[kMR * kNR] = {};
  for (int k = 0; k < kc; ++k)
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < kNR; ++j) acc[i * kNR + j] += ap[k * kMR + i] * bp[k * kNR + j];
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      float x = accumulate ? c[i * ldc + j] + acc[i * kNR + j] : acc[i * kNR + j];
      if (epilogue && epilogue->scaled) x *= epilogue->scale;
      if (epilogue && epilogue->bias) x += epilogue->bias[j];
      if (epilogue && epilogue->residual) x += epilogue->residual[i * epilogue->residualRs + j];
      if (epilogue && epilogue->relu) x = x < 0.0f ? 0.0f : x;
      c[i * ldc + j] = x;
    }
}

}  // namespace

const MicroKernel& scalarMicroKernel() {
  static const MicroKernel k{Isa::scalar, kMR, kNR, /*kc=*/256, /*mc=*/72, /*nc=*/2048, microKernelScalar};
  return k;
}

}  // namespace kiln::interp::gemm
