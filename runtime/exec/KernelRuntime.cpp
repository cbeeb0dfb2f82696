// The C entry points compiled kernels call back into: parallel loops on the
// runtime's TBB pool, and the packed GEMM the interpreter uses too.
#include <cstdint>
#include <cstring>
#include <vector>

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

namespace {
void matmulBatches(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr, int64_t aOff, int64_t aBs,
                   int64_t aRs, int64_t aCs, int64_t bPtr, int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs,
                   int64_t cPtr, int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs, bool accumulate) {
  const float* a = reinterpret_cast<const float*>(aPtr) + aOff;
  const float* b = reinterpret_cast<const float*>(bPtr) + bOff;
  float* c = reinterpret_cast<float*>(cPtr) + cOff;
  for (int64_t i = 0; i < batch; ++i)
    kiln::interp::sgemmStrided(M, N, K, a + i * aBs, aRs, aCs, b + i * bBs, bRs, bCs, c + i * cBs, cRs, cCs,
                               accumulate);
}
}  // namespace

/// C[b] += A[b] * B[b] for each batch b. Pointers arrive as integers (the
/// aligned base pointers of memrefs); offsets and strides count elements.
KILN_RT_EXPORT void kiln_rt_matmul_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr, int64_t aOff,
                                       int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr, int64_t bOff, int64_t bBs,
                                       int64_t bRs, int64_t bCs, int64_t cPtr, int64_t cOff, int64_t cBs, int64_t cRs,
                                       int64_t cCs) {
  matmulBatches(batch, M, N, K, aPtr, aOff, aBs, aRs, aCs, bPtr, bOff, bBs, bRs, bCs, cPtr, cOff, cBs, cRs, cCs, true);
}

/// C[b] = A[b] * B[b] for each batch b (the compiler calls it where C was
/// filled with zeros just before: no fill, no read of C).
KILN_RT_EXPORT void kiln_rt_matmul_set_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr,
                                           int64_t aOff, int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr,
                                           int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
                                           int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs) {
  matmulBatches(batch, M, N, K, aPtr, aOff, aBs, aRs, aCs, bPtr, bOff, bBs, bRs, bCs, cPtr, cOff, cBs, cRs, cCs,
                false);
}

/// MLIR's runtime hook for memref.copy between strided layouts (the same
/// contract as mlir's CRunnerUtils memrefCopy): copies element by element
/// walking both descriptors.
namespace {
struct UnrankedDescriptor {
  int64_t rank;
  void* descriptor;  // {T* allocated, T* aligned, int64 offset, int64 sizes[rank], int64 strides[rank]}
};
}  // namespace

KILN_RT_EXPORT void memrefCopy(int64_t elemSize, UnrankedDescriptor* src, UnrankedDescriptor* dst) {
  const int64_t rank = src->rank;
  auto fields = [](UnrankedDescriptor* d) { return reinterpret_cast<int64_t*>(static_cast<char*>(d->descriptor) + 2 * sizeof(void*)); };
  char* srcBase = *reinterpret_cast<char**>(static_cast<char*>(src->descriptor) + sizeof(void*));
  char* dstBase = *reinterpret_cast<char**>(static_cast<char*>(dst->descriptor) + sizeof(void*));
  const int64_t* sf = fields(src);
  const int64_t* df = fields(dst);
  const int64_t* sizes = sf + 1;
  const int64_t* srcStrides = sf + 1 + rank;
  const int64_t* dstStrides = df + 1 + rank;
  int64_t total = 1;
  for (int64_t d = 0; d < rank; ++d) total *= sizes[d];
  if (total == 0) return;
  char* s = srcBase + sf[0] * elemSize;
  char* t = dstBase + df[0] * elemSize;
  if (rank == 0) {
    std::memcpy(t, s, static_cast<size_t>(elemSize));
    return;
  }
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t n = 0; n < total; ++n) {
    int64_t so = 0, to = 0;
    for (int64_t d = 0; d < rank; ++d) {
      so += idx[d] * srcStrides[d];
      to += idx[d] * dstStrides[d];
    }
    std::memcpy(t + to * elemSize, s + so * elemSize, static_cast<size_t>(elemSize));
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}
