// Matmul: batches and dtypes. f32 runs the packed GEMM (gemm/Sgemm.h), with
// f16 and bf16 operands widened as it packs them; two bf16 operands the bf16
// GEMM (gemm/Bf16Gemm.h) into f32 or rounded to bf16 where the CPU has bf16
// units; the other dtypes a blocked loop.
#include <algorithm>
#include <type_traits>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "runtime/core/Half.h"
#include "runtime/interp/Dispatch.h"
#include "runtime/interp/Kernels.h"
#include "runtime/interp/gemm/Bf16Gemm.h"
#include "runtime/interp/gemm/Sgemm.h"

namespace kiln::interp {

namespace {

/// A strided matrix operand: element (r, c) at p[r*rs + c*cs].
template <class T>
struct Mat {
  const T* p;
  int64_t rs, cs;
};

/// Blocked i-k-j loop for f64 and integer types (integers wrap).
template <class T>
void gemmGeneric(int64_t M, int64_t N, int64_t K, Mat<T> a, Mat<T> b, T* c) {
  std::fill(c, c + M * N, T(0));
  constexpr int64_t kBlock = 64;
  for (int64_t i0 = 0; i0 < M; i0 += kBlock) {
    for (int64_t k0 = 0; k0 < K; k0 += kBlock) {
      const int64_t i1 = std::min(M, i0 + kBlock), k1 = std::min(K, k0 + kBlock);
      for (int64_t i = i0; i < i1; ++i) {
        T* ci = c + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          const T aik = a.p[i * a.rs + k * a.cs];
          const T* bk = b.p + k * b.rs;
          if constexpr (std::is_integral_v<T>) {
            using U = std::make_unsigned_t<T>;
            for (int64_t j = 0; j < N; ++j)
              ci[j] = static_cast<T>(static_cast<U>(ci[j]) + static_cast<U>(aik) * static_cast<U>(bk[j * b.cs]));
          } else {
            for (int64_t j = 0; j < N; ++j) ci[j] += aik * bk[j * b.cs];
          }
        }
      }
    }
  }
}

}  // namespace

void sgemmStrided(int64_t M, int64_t N, int64_t K, const float* a, int64_t rsA, int64_t csA, const float* b,
                  int64_t rsB, int64_t csB, float* c, int64_t rsC, int64_t csC, bool accumulate, bool parallel) {
  if (csC == 1) {
    gemm::sgemm(M, N, K, {a, rsA, csA}, {b, rsB, csB}, c, rsC, accumulate, parallel);
    return;
  }
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = accumulate ? c[i * rsC + j * csC] : 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += a[i * rsA + k * csA] * b[k * rsB + j * csB];
      c[i * rsC + j * csC] = acc;
    }
}

namespace {

/// The element offset in x of batch `bi` of a product of shape outShape
/// (x's batch dims equal outShape's).
int64_t batchElementOffset(const Arg& x, const Shape& outShape, int64_t bi) {
  int64_t off = 0;
  for (int d = outShape.rank() - 3; d >= 0; --d) {
    off += (bi % outShape[d]) * x.strides[d];
    bi /= outShape[d];
  }
  return off;
}

/// The batches of a matmul of outShape ([..., M, N]): calls
/// one(bi, aOffset, bOffset, parallel) for each batch bi, where the offsets
/// (elements) select batch bi of a and b. Small batched products
/// (`smallOnesPerThread` and fewer than kSplitMultiplyAdds each) run one per
/// thread, others one after the other, each split over the threads.
template <class F>
void forEachBatch(const Arg& a, const Arg& b, const Shape& outShape, bool smallOnesPerThread, F&& one) {
  const int r = outShape.rank();
  const int64_t M = outShape[r - 2], N = outShape[r - 1], K = a.shape[a.shape.rank() - 1];
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) batches *= outShape[d];
  if (batches == 0) return;
  const bool onePerThread = batches > 1 && (smallOnesPerThread || M * N * K < gemm::kSplitMultiplyAdds);
  auto run = [&](int64_t bi, bool parallel) {
    one(bi, batchElementOffset(a, outShape, bi), batchElementOffset(b, outShape, bi), parallel);
  };
  if (onePerThread) {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, batches, 1), [&](const tbb::blocked_range<int64_t>& rg) {
      for (int64_t bi = rg.begin(); bi < rg.end(); ++bi) run(bi, false);
    });
  } else {
    for (int64_t bi = 0; bi < batches; ++bi) run(bi, true);
  }
}

/// Does the f32 GEMM take operands of type `t` (widening f16 and bf16)?
bool sgemmTakes(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

gemm::Storage storageOf(DType t) {
  return t == DType::bf16 ? gemm::Storage::bf16 : t == DType::f16 ? gemm::Storage::f16 : gemm::Storage::f32;
}

/// Batch element `offset` of x (sgemmTakes its type) as a GEMM operand.
gemm::StoredMatrix storedOperand(const Arg& x, int64_t offset) {
  const int r = x.shape.rank();
  return {x.data + offset * static_cast<int64_t>(dtype_size(x.dtype)), x.strides[r - 2], x.strides[r - 1],
          storageOf(x.dtype)};
}

/// The f32 product of each batch on the packed GEMM (operands f32, bf16 or
/// f16: sgemmTakes), with `epilogue` (none when null) in its tile store;
/// `residual` (of the output's shape, its last axis contiguous), when given,
/// is the epilogue's residual, each batch its own.
void sgemmBatches(const Arg& a, const Arg& b, const Shape& outShape, char* out, const gemm::Epilogue* epilogue,
                  const Arg* residual = nullptr) {
  const int r = outShape.rank();
  const int64_t M = outShape[r - 2], N = outShape[r - 1], K = a.shape[a.shape.rank() - 1];
  float* op = reinterpret_cast<float*>(out);
  forEachBatch(a, b, outShape, false, [&](int64_t bi, int64_t aOff, int64_t bOff, bool parallel) {
    gemm::Epilogue batchEpilogue;
    if (residual) {
      batchEpilogue = *epilogue;
      batchEpilogue.residual = reinterpret_cast<const float*>(residual->data) + batchElementOffset(*residual, outShape, bi);
      batchEpilogue.residualRs = residual->strides[r - 2];
    }
    gemm::sgemmWidening(M, N, K, storedOperand(a, aOff), storedOperand(b, bOff), op + bi * M * N, N,
                        /*accumulate=*/false, parallel, residual ? &batchEpilogue : epilogue);
  });
}

}  // namespace

void matmulKernel(const Arg& a, const Arg& b, const Shape& outShape, char* out) {
  const int r = outShape.rank();
  const int64_t M = outShape[r - 2], N = outShape[r - 1], K = a.shape[a.shape.rank() - 1];
  if (a.dtype == DType::bf16 && b.dtype == DType::bf16 && matmulKernelTakesBf16()) {
    const auto* ap = reinterpret_cast<const uint16_t*>(a.data);
    const auto* bp = reinterpret_cast<const uint16_t*>(b.data);
    float* op = reinterpret_cast<float*>(out);
    forEachBatch(a, b, outShape, false, [&](int64_t bi, int64_t aOff, int64_t bOff, bool parallel) {
      gemm::gemmBf16(M, N, K, {ap + aOff, a.strides[r - 2], a.strides[r - 1]},
                     {bp + bOff, b.strides[r - 2], b.strides[r - 1]}, op + bi * M * N, N,
                     /*accumulate=*/false, parallel);
    });
    return;
  }
  if (sgemmTakes(a.dtype) && sgemmTakes(b.dtype)) {
    sgemmBatches(a, b, outShape, out, nullptr);
    return;
  }
  dispatchNumeric(a.dtype, [&]<class T>() {
    const T* ap = reinterpret_cast<const T*>(a.data);
    const T* bp = reinterpret_cast<const T*>(b.data);
    T* op = reinterpret_cast<T*>(out);
    forEachBatch(a, b, outShape, true, [&](int64_t bi, int64_t aOff, int64_t bOff, bool) {
      gemmGeneric<T>(M, N, K, {ap + aOff, a.strides[r - 2], a.strides[r - 1]},
                     {bp + bOff, b.strides[r - 2], b.strides[r - 1]}, op + bi * M * N);
    });
  });
}

namespace {

/// The bf16 product of each batch rounded to bf16 with `e`'s ops, each
/// rounded as its own bf16 op would be (gemm::Epilogue::bf16Steps);
/// `epilogue` holds e's scale and relu. e's residual, if any, checked by
/// the caller.
void bf16EpilogueBatches(const Arg& a, const Arg& b, const MatmulEpilogue& e, gemm::Epilogue epilogue,
                         const Shape& outShape, char* out) {
  const int r = outShape.rank();
  const int64_t M = outShape[r - 2], N = outShape[r - 1], K = a.shape[a.shape.rank() - 1];
  // The bias widened once (exactly: every bf16 is an f32).
  std::vector<float> bias;
  if (e.bias) {
    const auto* bp = reinterpret_cast<const uint16_t*>(e.bias);
    bias.resize(static_cast<size_t>(N));
    for (int64_t j = 0; j < N; ++j) bias[static_cast<size_t>(j)] = core::bf16ToFloat(bp[j * e.biasStride]);
    epilogue.bias = bias.data();
  }
  epilogue.bf16Steps = true;
  const auto* ap = reinterpret_cast<const uint16_t*>(a.data);
  const auto* bp = reinterpret_cast<const uint16_t*>(b.data);
  auto* op = reinterpret_cast<uint16_t*>(out);
  forEachBatch(a, b, outShape, false, [&](int64_t bi, int64_t aOff, int64_t bOff, bool parallel) {
    gemm::Epilogue batchEpilogue = epilogue;
    if (e.residual) {
      batchEpilogue.residualBf16 =
          reinterpret_cast<const uint16_t*>(e.residual->data) + batchElementOffset(*e.residual, outShape, bi);
      batchEpilogue.residualRs = e.residual->strides[r - 2];
    }
    gemm::gemmBf16RoundedOut(M, N, K, {ap + aOff, a.strides[r - 2], a.strides[r - 1]},
                             {bp + bOff, b.strides[r - 2], b.strides[r - 1]}, op + bi * M * N, N, parallel,
                             &batchEpilogue);
  });
}

}  // namespace

bool matmulEpilogueKernel(const Arg& a, const Arg& b, const MatmulEpilogue& e, const Shape& outShape, char* out) {
  const bool bf16 = a.dtype == DType::bf16 && b.dtype == DType::bf16 && matmulKernelTakesBf16();
  // Two bf16 operands without bf16 units: a bf16 product (a bf16 result
  // this f32 path would not round), declined.
  if (!bf16 && (!(sgemmTakes(a.dtype) && sgemmTakes(b.dtype)) || (a.dtype == DType::bf16 && b.dtype == DType::bf16)))
    return false;
  const int r = outShape.rank();
  const Arg* residual = e.residual ? &*e.residual : nullptr;
  const DType resultType = bf16 ? DType::bf16 : DType::f32;
  if (residual && (r < 2 || residual->dtype != resultType || !(residual->shape == outShape) ||
                   (outShape[r - 1] > 1 && residual->strides[r - 1] != 1)))
    return false;
  gemm::Epilogue epilogue;
  epilogue.scaled = e.scaled;
  epilogue.scale = e.scale;
  epilogue.relu = e.relu;
  if (bf16) {
    bf16EpilogueBatches(a, b, e, epilogue, outShape, out);
    return true;
  }
  epilogue.bias = reinterpret_cast<const float*>(e.bias);
  epilogue.biasStride = e.biasStride;
  sgemmBatches(a, b, outShape, out, &epilogue, residual);
  return true;
}

bool matmulBf16RoundedKernel(const Arg& a, const Arg& b, const Shape& outShape, char* out) {
  if (a.dtype != DType::bf16 || b.dtype != DType::bf16 || !matmulKernelTakesBf16()) return false;
  const int r = outShape.rank();
  const int64_t M = outShape[r - 2], N = outShape[r - 1], K = a.shape[a.shape.rank() - 1];
  const auto* ap = reinterpret_cast<const uint16_t*>(a.data);
  const auto* bp = reinterpret_cast<const uint16_t*>(b.data);
  auto* op = reinterpret_cast<uint16_t*>(out);
  forEachBatch(a, b, outShape, false, [&](int64_t bi, int64_t aOff, int64_t bOff, bool parallel) {
    gemm::gemmBf16RoundedOut(M, N, K, {ap + aOff, a.strides[r - 2], a.strides[r - 1]},
                             {bp + bOff, b.strides[r - 2], b.strides[r - 1]}, op + bi * M * N, N, parallel);
  });
  return true;
}

bool matmulKernelTakesBf16() { return gemm::activeBf16Isa() != gemm::Bf16Isa::none; }

}  // namespace kiln::interp
