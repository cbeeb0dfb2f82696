// The C entry points compiled kernels call back into: parallel loops on the
// runtime's TBB pool, and the packed GEMM the interpreter uses too.
#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "runtime/interp/Kernels.h"

#define KILN_RT_EXPORT extern "C" __attribute__((visibility("default")))

KILN_RT_EXPORT void kiln_rt_parallel_for(void (*body)(void*, int64_t, int64_t), void* ctx, int64_t n, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain) {
    body(ctx, 0, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) { body(ctx, r.begin(), r.end()); });
}

/// C[b] += A[b] * B[b] for each batch b. Pointers arrive as integers (the
/// aligned base pointers of memrefs); offsets and strides count elements.
KILN_RT_EXPORT void kiln_rt_matmul_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr, int64_t aOff,
                                       int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr, int64_t bOff, int64_t bBs,
                                       int64_t bRs, int64_t bCs, int64_t cPtr, int64_t cOff, int64_t cBs, int64_t cRs,
                                       int64_t cCs) {
  const float* a = reinterpret_cast<const float*>(aPtr) + aOff;
  const float* b = reinterpret_cast<const float*>(bPtr) + bOff;
  float* c = reinterpret_cast<float*>(cPtr) + cOff;
  for (int64_t i = 0; i < batch; ++i)
    kiln::interp::sgemmAccumulate(M, N, K, a + i * aBs, aRs, aCs, b + i * bBs, bRs, bCs, c + i * cBs, cRs, cCs);
}
