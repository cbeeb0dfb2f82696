// The C entry points compiled kernels call back into: parallel loops on the
// runtime's TBB pool, and the packed GEMMs (f32, bf16) the interpreter uses too.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "runtime/core/Half.h"
#include "runtime/exec/MatmulEpilogueFlags.h"
#include "runtime/exec/ParallelChunks.h"
#include "runtime/interp/Kernels.h"
#include "runtime/interp/gemm/Bf16Gemm.h"
#include "runtime/interp/gemm/Sgemm.h"

#define KILN_RT_EXPORT extern "C" __attribute__((visibility("default")))

/// f32 -> bf16, rounding to nearest even (NaN stays a quiet NaN), under the
/// name of the compiler runtime's conversion. Kiln's lowering converts in
/// integers, but on a CPU without AVX512-BF16 LLVM's code generator still
/// calls this where a bf16 value lives in a float register (a broadcast
/// scalar hoisted out of its loop is widened, then narrowed at each store),
/// and kernels link against GCC 12's libgcc, which lacks it (GCC 13 added it).
/// _Float16 comes back in xmm0's low half, as __bf16 does.
KILN_RT_EXPORT _Float16 __truncsfbf2(float f) {
  const uint16_t bits = kiln::core::floatToBf16(f);
  _Float16 result;
  std::memcpy(&result, &bits, sizeof bits);
  return result;
}

KILN_RT_EXPORT void kiln_rt_parallel_for(void (*body)(void*, int64_t, int64_t), void* ctx, int64_t n, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain) {
    body(ctx, 0, n);
    return;
  }
  // Chunks at multiples of kParallelChunkAlign for the grains that promise
  // it (the kernel's trampoline assumes it): TBB splits ranges in the middle.
  using kiln::exec::kParallelChunkAlign;
  if (kiln::exec::alignsChunks(grain)) {
    const int64_t blocks = (n + kParallelChunkAlign - 1) / kParallelChunkAlign;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks, grain / kParallelChunkAlign),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        body(ctx, r.begin() * kParallelChunkAlign, std::min(r.end() * kParallelChunkAlign, n));
                      });
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) { body(ctx, r.begin(), r.end()); });
}

namespace {
/// One GEMM per batch b of C[b] (=, or += with `accumulate`) A[b] * B[b] for
/// operands whose elements are `aBytes` and `bBytes` wide (f32, or f16 and
/// bf16 as their bits) into f32; `gemm(a, b, c, M, parallel)` runs one with
/// the strides given here, a and b at their batch's first element.
template <class Gemm>
void matmulBatches(int64_t aBytes, int64_t bBytes, int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr,
                   int64_t aOff, int64_t aBs, int64_t aRs, int64_t bPtr, int64_t bOff, int64_t bBs, int64_t cPtr,
                   int64_t cOff, int64_t cBs, int64_t cRs, Gemm&& gemm) {
  const char* a = reinterpret_cast<const char*>(aPtr) + aOff * aBytes;
  const char* b = reinterpret_cast<const char*>(bPtr) + bOff * bBytes;
  float* c = reinterpret_cast<float*>(cPtr) + cOff;
  // One B for every batch (a weight applied to each sequence) and A's and
  // C's batches stacked row after row: one GEMM of batch * M rows, which
  // packs B once instead of once per batch.
  if (batch > 1 && bBs == 0 && aBs == M * aRs && cBs == M * cRs) {
    M *= batch;
    batch = 1;
  }
  auto one = [&](int64_t i, bool parallel) {
    gemm(a + i * aBs * aBytes, b + i * bBs * bBytes, c + i * cBs, M, parallel);
  };
  // Small GEMMs of a batch (attention's per-head products) run one per
  // thread, as the interpreter runs them: each alone would not split.
  if (batch > 1 && M * N * K < kiln::interp::gemm::kSplitMultiplyAdds) {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, batch, 1), [&](const tbb::blocked_range<int64_t>& r) {
      for (int64_t i = r.begin(); i < r.end(); ++i) one(i, false);
    });
    return;
  }
  for (int64_t i = 0; i < batch; ++i) one(i, true);
}

void matmulF32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr, int64_t aOff, int64_t aBs, int64_t aRs,
               int64_t aCs, int64_t bPtr, int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
               int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs, bool accumulate) {
  matmulBatches(sizeof(float), sizeof(float), batch, M, N, K, aPtr, aOff, aBs, aRs, bPtr, bOff, bBs, cPtr, cOff, cBs,
                cRs, [&](const char* a, const char* b, float* c, int64_t m, bool parallel) {
                  kiln::interp::sgemmStrided(m, N, K, reinterpret_cast<const float*>(a), aRs, aCs,
                                             reinterpret_cast<const float*>(b), bRs, bCs, c, cRs, cCs, accumulate,
                                             parallel);
                });
}

/// A strided bf16 operand of one GEMM as dense f32, by the interpreter's cast
/// kernel (for a C whose columns are strided, which only the strided loop
/// of sgemmStrided writes).
std::vector<float> widenBf16(const uint16_t* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  kiln::interp::Arg in;
  in.data = reinterpret_cast<const char*>(p);
  in.dtype = kiln::DType::bf16;
  in.shape = kiln::Shape{rows, cols};
  in.strides[0] = rs;
  in.strides[1] = cs;
  std::vector<float> out(static_cast<size_t>(rows * cols));
  kiln::interp::castKernel(in, kiln::DType::f32, reinterpret_cast<char*>(out.data()));
  return out;
}

void matmulBf16(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr, int64_t aOff, int64_t aBs, int64_t aRs,
                int64_t aCs, int64_t bPtr, int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
                int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs, bool accumulate) {
  using namespace kiln::interp;
  const bool native = cCs == 1 && gemm::activeBf16Isa() != gemm::Bf16Isa::none;
  matmulBatches(sizeof(uint16_t), sizeof(uint16_t), batch, M, N, K, aPtr, aOff, aBs, aRs, bPtr, bOff, bBs, cPtr,
                cOff, cBs, cRs, [&](const char* aBytes, const char* bBytes, float* c, int64_t m, bool parallel) {
                            const auto* a = reinterpret_cast<const uint16_t*>(aBytes);
                            const auto* b = reinterpret_cast<const uint16_t*>(bBytes);
                            if (native) {
                              gemm::gemmBf16(m, N, K, {a, aRs, aCs}, {b, bRs, bCs}, c, cRs, accumulate, parallel);
                              return;
                            }
                            if (cCs == 1) {
                              // The f32 GEMM, widening the operands as it packs them.
                              gemm::sgemmWidening(m, N, K, {a, aRs, aCs, gemm::Storage::bf16},
                                                  {b, bRs, bCs, gemm::Storage::bf16}, c, cRs, accumulate, parallel);
                              return;
                            }
                            const std::vector<float> af = widenBf16(a, m, K, aRs, aCs), bf = widenBf16(b, K, N, bRs, bCs);
                            sgemmStrided(m, N, K, af.data(), K, 1, bf.data(), N, 1, c, cRs, cCs, accumulate, parallel);
                          });
}
}  // namespace

/// C[b] += A[b] * B[b] for each batch b. Pointers arrive as integers (the
/// aligned base pointers of memrefs); offsets and strides count elements.
KILN_RT_EXPORT void kiln_rt_matmul_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr, int64_t aOff,
                                       int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr, int64_t bOff, int64_t bBs,
                                       int64_t bRs, int64_t bCs, int64_t cPtr, int64_t cOff, int64_t cBs, int64_t cRs,
                                       int64_t cCs) {
  matmulF32(batch, M, N, K, aPtr, aOff, aBs, aRs, aCs, bPtr, bOff, bBs, bRs, bCs, cPtr, cOff, cBs, cRs, cCs, true);
}

/// C[b] = A[b] * B[b] for each batch b (the compiler calls it where C was
/// filled with zeros just before: no fill, no read of C).
KILN_RT_EXPORT void kiln_rt_matmul_set_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr,
                                           int64_t aOff, int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr,
                                           int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
                                           int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs) {
  matmulF32(batch, M, N, K, aPtr, aOff, aBs, aRs, aCs, bPtr, bOff, bBs, bRs, bCs, cPtr, cOff, cBs, cRs, cCs, false);
}

namespace {
/// How the f32 entry points' operand A (`b`: B) is stored, from their flags.
kiln::interp::gemm::Storage operandStorage(int64_t flags, bool b) {
  using namespace kiln::exec;
  using kiln::interp::gemm::Storage;
  if (flags & (b ? kOperandBBf16 : kOperandABf16)) return Storage::bf16;
  return flags & (b ? kOperandBF16 : kOperandAF16) ? Storage::f16 : Storage::f32;
}

/// Bytes of an element stored as `s`.
int64_t storageBytes(kiln::interp::gemm::Storage s) {
  return s == kiln::interp::gemm::Storage::f32 ? sizeof(float) : sizeof(uint16_t);
}
}  // namespace

/// C[b] = A[b] * B[b] (or +=, with kMatmulAccumulate) for each batch b, with
/// A and/or B stored as bf16 or f16 (MatmulEpilogueFlags.h): the f32 GEMM,
/// widening them as it packs them, so the product of a cast operand without
/// the cast's f32 buffer (kiln-cpu-matmul-to-runtime-calls folds the cast
/// in). C's columns are contiguous (cCs == 1); arguments as
/// kiln_rt_matmul_f32's, offsets and strides in elements of each operand.
KILN_RT_EXPORT void kiln_rt_matmul_widening_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr,
                                                int64_t aOff, int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr,
                                                int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
                                                int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs, int64_t flags) {
  using namespace kiln::interp;
  const gemm::Storage as = operandStorage(flags, false), bs = operandStorage(flags, true);
  const bool accumulate = (flags & kiln::exec::kMatmulAccumulate) != 0;
  (void)cCs;  // 1: see above
  matmulBatches(storageBytes(as), storageBytes(bs), batch, M, N, K, aPtr, aOff, aBs, aRs, bPtr, bOff, bBs, cPtr, cOff,
                cBs, cRs, [&](const char* a, const char* b, float* c, int64_t m, bool parallel) {
                  gemm::sgemmWidening(m, N, K, {a, aRs, aCs, as}, {b, bRs, bCs, bs}, c, cRs, accumulate, parallel);
                });
}

namespace {
/// The epilogue of kiln_rt_matmul_epilogue_*'s flags (MatmulEpilogueFlags.h)
/// for an M x N result at [cBegin, cEnd): the scale, the bias (at biasPtr +
/// biasOff), the residual (at residualPtr + residualOff), relu; null for
/// none of them. A residual in C's bytes (the output was given its buffer: buffer donation)
/// is copied into `residualCopy` first: the GEMM writes C's partial sums
/// before its last depth pass reads the residual.
const kiln::interp::gemm::Epilogue* epilogueOf(kiln::interp::gemm::Epilogue& e, int64_t flags, int64_t biasPtr,
                                               int64_t biasOff, int64_t biasStride, int64_t residualPtr,
                                               int64_t residualOff, int64_t residualRs, int64_t scaleBits,
                                               int64_t M, int64_t N, const void* cBegin, const void* cEnd,
                                               std::vector<float>& residualCopy) {
  using namespace kiln::exec;
  if (flags & kEpilogueScale) {
    e.scaled = true;
    const uint32_t bits = static_cast<uint32_t>(scaleBits);
    std::memcpy(&e.scale, &bits, sizeof bits);
  }
  if (flags & kEpilogueBias) {
    e.bias = reinterpret_cast<const float*>(biasPtr) + biasOff;
    e.biasStride = biasStride;
  }
  if ((flags & kEpilogueResidual) && M > 0 && N > 0) {
    e.residual = reinterpret_cast<const float*>(residualPtr) + residualOff;
    e.residualRs = residualRs;
    const void* rBegin = e.residual;
    const void* rEnd = e.residual + (M - 1) * residualRs + N;
    if (std::less<const void*>()(rBegin, cEnd) && std::less<const void*>()(cBegin, rEnd)) {
      residualCopy.resize(static_cast<size_t>(M * N));
      for (int64_t i = 0; i < M; ++i)
        std::memcpy(residualCopy.data() + i * N, e.residual + i * residualRs, sizeof(float) * N);
      e.residual = residualCopy.data();
      e.residualRs = N;
    }
  }
  e.relu = (flags & kEpilogueRelu) != 0;
  return e.scaled || e.bias || e.residual || e.relu ? &e : nullptr;
}
}  // namespace

/// C = epilogue(A * B) for one f32 GEMM (batch 1), the epilogue applied to
/// each tile of C as the GEMM finishes it (gemm::Epilogue; `flags` as
/// epilogueOf reads them). The compiler calls it for a 2-D matmul whose only
/// reader was an elementwise bias add, residual add and/or ReLU
/// (kiln-cpu-matmul-to-runtime-calls), into an output whose columns are
/// contiguous (cCs == 1); the residual's columns are contiguous too. A and B
/// may be stored as bf16 or f16 (flags kOperand*, as
/// kiln_rt_matmul_widening_f32).
KILN_RT_EXPORT void kiln_rt_matmul_epilogue_f32(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr,
                                                int64_t aOff, int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr,
                                                int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
                                                int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs, int64_t biasPtr,
                                                int64_t biasOff, int64_t biasStride, int64_t residualPtr,
                                                int64_t residualOff, int64_t residualRs, int64_t scaleBits,
                                                int64_t flags) {
  using namespace kiln::interp;
  const gemm::Storage as = operandStorage(flags, false), bs = operandStorage(flags, true);
  const char* a = reinterpret_cast<const char*>(aPtr) + aOff * storageBytes(as);
  const char* b = reinterpret_cast<const char*>(bPtr) + bOff * storageBytes(bs);
  float* c = reinterpret_cast<float*>(cPtr) + cOff;
  gemm::Epilogue e;
  std::vector<float> residualCopy;
  const gemm::Epilogue* epilogue = epilogueOf(e, flags, biasPtr, biasOff, biasStride, residualPtr, residualOff,
                                              residualRs, scaleBits, M, N, c, c + (M - 1) * cRs + N, residualCopy);
  (void)batch, (void)aBs, (void)bBs, (void)cBs, (void)cCs;  // batch 1, cCs 1: see above
  gemm::sgemmWidening(M, N, K, {a, aRs, aCs, as}, {b, bRs, bCs, bs}, c, cRs, /*accumulate=*/false,
                      /*parallel=*/true, epilogue);
}

/// kiln_rt_matmul_epilogue_f32 with bf16 A and B: the bf16 GEMM, the
/// epilogue applied to each block of C in f32, then, with
/// kEpilogueRoundToBf16, C rounded to bf16 block by block (C is a bf16
/// buffer: offset and row stride count bf16 elements), else stored as f32. On a CPU without bf16 units (or
/// with KILN_GEMM_BF16=none) the f32 GEMM of the widened operands.
KILN_RT_EXPORT void kiln_rt_matmul_epilogue_bf16(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr,
                                                 int64_t aOff, int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr,
                                                 int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
                                                 int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs, int64_t biasPtr,
                                                 int64_t biasOff, int64_t biasStride, int64_t residualPtr,
                                                 int64_t residualOff, int64_t residualRs, int64_t scaleBits,
                                                 int64_t flags) {
  using namespace kiln::interp;
  const gemm::Bf16Matrix a{reinterpret_cast<const uint16_t*>(aPtr) + aOff, aRs, aCs};
  const gemm::Bf16Matrix b{reinterpret_cast<const uint16_t*>(bPtr) + bOff, bRs, bCs};
  (void)batch, (void)aBs, (void)bBs, (void)cBs, (void)cCs;  // batch 1, cCs 1, as kiln_rt_matmul_epilogue_f32
  const bool rounded = (flags & kiln::exec::kEpilogueRoundToBf16) != 0;
  const int64_t cElement = rounded ? sizeof(uint16_t) : sizeof(float);
  const char* cBegin = reinterpret_cast<const char*>(cPtr) + cOff * cElement;
  gemm::Epilogue e;
  std::vector<float> residualCopy;
  const gemm::Epilogue* epilogue =
      epilogueOf(e, flags, biasPtr, biasOff, biasStride, residualPtr, residualOff, residualRs, scaleBits, M, N,
                 cBegin, cBegin + ((M - 1) * cRs + N) * cElement, residualCopy);
  if (gemm::activeBf16Isa() != gemm::Bf16Isa::none) {
    if (rounded)
      gemm::gemmBf16RoundedOut(M, N, K, a, b, reinterpret_cast<uint16_t*>(cPtr) + cOff, cRs, /*parallel=*/true,
                               epilogue);
    else
      gemm::gemmBf16(M, N, K, a, b, reinterpret_cast<float*>(cPtr) + cOff, cRs, /*accumulate=*/false,
                     /*parallel=*/true, epilogue);
    return;
  }
  // No bf16 units (or KILN_GEMM_BF16=none): the f32 GEMM, widening the
  // operands as it packs them, into C or into an f32 temporary then rounded.
  const gemm::StoredMatrix aWide{a.p, aRs, aCs, gemm::Storage::bf16}, bWide{b.p, bRs, bCs, gemm::Storage::bf16};
  if (!rounded) {
    gemm::sgemmWidening(M, N, K, aWide, bWide, reinterpret_cast<float*>(cPtr) + cOff, cRs, /*accumulate=*/false,
                        /*parallel=*/true, epilogue);
    return;
  }
  std::vector<float> cf(static_cast<size_t>(M * N));
  gemm::sgemmWidening(M, N, K, aWide, bWide, cf.data(), N, /*accumulate=*/false, /*parallel=*/true, epilogue);
  uint16_t* c = reinterpret_cast<uint16_t*>(cPtr) + cOff;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) c[i * cRs + j] = kiln::core::floatToBf16(cf[static_cast<size_t>(i * N + j)]);
}

/// kiln_rt_matmul_f32 with bf16 A and B (f32 C): the bf16 GEMM where the
/// CPU has bf16 units, else the f32 GEMM of the widened operands.
KILN_RT_EXPORT void kiln_rt_matmul_bf16(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr, int64_t aOff,
                                        int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr, int64_t bOff,
                                        int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr, int64_t cOff,
                                        int64_t cBs, int64_t cRs, int64_t cCs) {
  matmulBf16(batch, M, N, K, aPtr, aOff, aBs, aRs, aCs, bPtr, bOff, bBs, bRs, bCs, cPtr, cOff, cBs, cRs, cCs, true);
}

/// kiln_rt_matmul_set_f32 with bf16 A and B (f32 C).
KILN_RT_EXPORT void kiln_rt_matmul_set_bf16(int64_t batch, int64_t M, int64_t N, int64_t K, int64_t aPtr,
                                            int64_t aOff, int64_t aBs, int64_t aRs, int64_t aCs, int64_t bPtr,
                                            int64_t bOff, int64_t bBs, int64_t bRs, int64_t bCs, int64_t cPtr,
                                            int64_t cOff, int64_t cBs, int64_t cRs, int64_t cCs) {
  matmulBf16(batch, M, N, K, aPtr, aOff, aBs, aRs, aCs, bPtr, bOff, bBs, bRs, bCs, cPtr, cOff, cBs, cRs, cCs, false);
}

/// conv2d of grouped f32 views (linalg.conv_2d_ngchw_gfchw on memrefs):
/// x [N, G, C/G, H, W], w [G, Co/G, C/G, kH, kW], out [N, G, Co/G, Ho, Wo],
/// each an aligned pointer, an offset and five strides (elements), then the
/// extents (x's unpadded), strides, dilations and paddings (top, left,
/// bottom, right; zeros outside x). With
/// `accumulate` the result is added to out, otherwise it replaces it.
KILN_RT_EXPORT void kiln_rt_conv2d_f32(int64_t xPtr, int64_t xOff, int64_t xs0, int64_t xs1, int64_t xs2, int64_t xs3,
                                       int64_t xs4, int64_t wPtr, int64_t wOff, int64_t ws0, int64_t ws1, int64_t ws2,
                                       int64_t ws3, int64_t ws4, int64_t oPtr, int64_t oOff, int64_t os0, int64_t os1,
                                       int64_t os2, int64_t os3, int64_t os4, int64_t n, int64_t groups, int64_t cg,
                                       int64_t h, int64_t w, int64_t cog, int64_t kh, int64_t kw, int64_t ho,
                                       int64_t wo, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t padTop,
                                       int64_t padLeft, int64_t padBottom, int64_t padRight, int64_t accumulate) {
  const float* x = reinterpret_cast<const float*>(xPtr) + xOff;
  const float* wt = reinterpret_cast<const float*>(wPtr) + wOff;
  float* out = reinterpret_cast<float*>(oPtr) + oOff;
  kiln::core::Conv2dParams p;
  p.strideH = sh, p.strideW = sw, p.dilationH = dh, p.dilationW = dw;
  p.padTop = padTop, p.padLeft = padLeft, p.padBottom = padBottom, p.padRight = padRight;
  // One call for all groups when each group's channels follow the last
  // group's (the usual expanded layout), else one call per group.
  const bool merged = xs1 == cg * xs2 && ws0 == cog * ws1 && os1 == cog * os2;
  const int64_t calls = merged ? 1 : groups;
  p.groups = merged ? groups : 1;
  const int64_t perCall = merged ? groups : 1;
  const int64_t xShape[4] = {n, cg * perCall, h, w}, xStrides[4] = {xs0, xs2, xs3, xs4};
  const int64_t wShape[4] = {cog * perCall, cg, kh, kw}, wStrides[4] = {ws1, ws2, ws3, ws4};
  const int64_t oShape[4] = {n, cog * perCall, ho, wo};
  std::vector<float> tmp;
  for (int64_t g = 0; g < calls; ++g) {
    const float* xg = x + g * xs1;
    const float* wg = wt + g * ws0;
    float* og = out + g * os1;
    if (!accumulate) {
      const int64_t oStrides[4] = {os0, os2, os3, os4};
      kiln::interp::conv2dF32(xg, xShape, xStrides, wg, wShape, wStrides, p, og, oShape, oStrides);
      continue;
    }
    // Accumulate: compute densely, then add.
    tmp.assign(static_cast<size_t>(oShape[0] * oShape[1] * ho * wo), 0.0f);
    const int64_t dense[4] = {oShape[1] * ho * wo, ho * wo, wo, 1};
    kiln::interp::conv2dF32(xg, xShape, xStrides, wg, wShape, wStrides, p, tmp.data(), oShape, dense);
    size_t k = 0;
    for (int64_t a = 0; a < oShape[0]; ++a)
      for (int64_t c = 0; c < oShape[1]; ++c)
        for (int64_t i = 0; i < ho; ++i)
          for (int64_t j = 0; j < wo; ++j) og[a * os0 + c * os2 + i * os3 + j * os4] += tmp[k++];
  }
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

namespace {

/// The first `rank` of a runtime call's extents (passed padded to 8).
kiln::Shape leadingExtents(const int64_t* extents, int64_t rank) {
  kiln::Shape shape;
  for (int64_t d = 0; d < rank; ++d) shape.push_back(extents[d]);
  return shape;
}

/// A runtime call's strided operand of `shape`: the buffer `ptr` (an
/// integer) at element offset `offset`, its element strides padded to 8.
kiln::interp::Arg stridedOperand(kiln::DType t, int64_t ptr, int64_t offset, const kiln::Shape& shape,
                                 const int64_t* strides) {
  kiln::interp::Arg a;
  a.data = reinterpret_cast<const char*>(ptr) + offset * static_cast<int64_t>(kiln::dtype_size(t));
  a.dtype = t;
  a.shape = shape;
  std::copy(strides, strides + shape.rank(), a.strides);
  return a;
}

}  // namespace

/// index_add in a compiled kernel (kiln-cpu-matmul-to-runtime-calls'
/// runtimeCallGenericsToCalls): out[.., index[j], ..] += source[.., j, ..] for j
/// in order, in place (out already holds the input), by the interpreter's
/// kernel: the same additions in the same order. `dtype` is kiln::DType's
/// number; extents and strides come padded to 8 axes; pointers arrive as
/// integers with element offsets. The engine checked the indices before the
/// launch.
KILN_RT_EXPORT void kiln_rt_index_add(int64_t dtype, int64_t rank, int64_t axis, int64_t n, int64_t e0, int64_t e1,
                                      int64_t e2, int64_t e3, int64_t e4, int64_t e5, int64_t e6, int64_t e7,
                                      int64_t outPtr, int64_t outOff, int64_t o0, int64_t o1, int64_t o2, int64_t o3,
                                      int64_t o4, int64_t o5, int64_t o6, int64_t o7, int64_t indexPtr,
                                      int64_t indexOff, int64_t indexStride, int64_t sourcePtr, int64_t sourceOff,
                                      int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t s4, int64_t s5,
                                      int64_t s6, int64_t s7) {
  using namespace kiln;
  const int64_t extents[8] = {e0, e1, e2, e3, e4, e5, e6, e7}, outStrides[8] = {o0, o1, o2, o3, o4, o5, o6, o7},
                sourceStrides[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
  const auto t = static_cast<DType>(dtype);
  const auto size = static_cast<int64_t>(dtype_size(t));
  const Shape shape = leadingExtents(extents, rank);
  std::vector<int64_t> index(static_cast<size_t>(n));
  const auto* indexBase = reinterpret_cast<const int64_t*>(indexPtr) + indexOff;
  for (int64_t j = 0; j < n; ++j) index[static_cast<size_t>(j)] = indexBase[j * indexStride];
  Shape sourceShape = shape;
  sourceShape[static_cast<int>(axis)] = n;
  const interp::Arg source = stridedOperand(t, sourcePtr, sourceOff, sourceShape, sourceStrides);
  interp::indexAddInto(reinterpret_cast<char*>(outPtr) + outOff * size, shape, outStrides, static_cast<int>(axis),
                       index.data(), n, source);
}

/// cumsum in a compiled kernel (runtimeCallGenericsToCalls): out = input,
/// then out[.., i, ..] += out[.., i - 1, ..] for i in order, by the
/// interpreter's kernels: the same additions in the same order. Arguments
/// as kiln_rt_index_add's; out may be the input's buffer (a running sum in
/// place reads each element before it writes it).
KILN_RT_EXPORT void kiln_rt_cumsum(int64_t dtype, int64_t rank, int64_t axis, int64_t e0, int64_t e1, int64_t e2,
                                   int64_t e3, int64_t e4, int64_t e5, int64_t e6, int64_t e7, int64_t outPtr,
                                   int64_t outOff, int64_t o0, int64_t o1, int64_t o2, int64_t o3, int64_t o4,
                                   int64_t o5, int64_t o6, int64_t o7, int64_t inPtr, int64_t inOff, int64_t i0,
                                   int64_t i1, int64_t i2, int64_t i3, int64_t i4, int64_t i5, int64_t i6,
                                   int64_t i7) {
  using namespace kiln;
  const int64_t extents[8] = {e0, e1, e2, e3, e4, e5, e6, e7}, outStrides[8] = {o0, o1, o2, o3, o4, o5, o6, o7},
                inStrides[8] = {i0, i1, i2, i3, i4, i5, i6, i7};
  const auto t = static_cast<DType>(dtype);
  const auto size = static_cast<int64_t>(dtype_size(t));
  const Shape shape = leadingExtents(extents, rank);
  char* out = reinterpret_cast<char*>(outPtr) + outOff * size;
  const interp::Arg in = stridedOperand(t, inPtr, inOff, shape, inStrides);
  if (in.data != out || !std::equal(inStrides, inStrides + rank, outStrides))
    interp::copyIntoKernel(in, out, outStrides);
  interp::cumsumInto(out, shape, outStrides, static_cast<int>(axis), t);
}
