// libkiln_fake_cublaslt.so: the cuBLASLt entry points Kiln uses
// (runtime/backends/cuda/CublasLtMatmul.cpp), for the fake CUDA driver
// (FakeCuda.cpp), whose device memory is host memory. Tests load it through
// KILN_CUBLASLT_LIBRARY next to KILN_CUDA_LIBRARY, so that CI runs Kiln's
// cuBLASLt path: every descriptor is checked as cuBLASLt would (types,
// operation and layout shapes, leading dimensions, batches), and each matmul
// is computed as cuBLASLt defines it (column-major, op(A) op(B), strided
// batches) by a plain loop, enqueued on the call's stream through the fake
// driver (kiln_fake_cuda_enqueue_device_work) so that it runs in stream order
// with device memory open, as a kernel. A misuse
// returns the status cuBLASLt would (CUBLAS_STATUS_INVALID_VALUE, or
// NOT_SUPPORTED for attributes Kiln does not set).
//
// Epilogues DEFAULT, BIAS, RELU and RELU_BIAS: the bias (one per row of
// column-major D, of D's type) added to the rounded product, then the relu.
// cuBLASLt does not document its relu on NaN; this one maps NaN to 0 as
// CUDA's fmaxf does, or keeps it with KILN_FAKE_CUBLASLT_RELU=keep-nan, so
// that tests see Kiln's probe (CublasLtMatmul.h) take either answer.
#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/core/Half.h"
#include "test/cuda_driver/FakeCuda.h"

struct cublasLtContext {
  int magic = 0x1ab1a5;
};

namespace {

std::atomic<size_t> gMatmuls{0}, gBiasMatmuls{0}, gReluMatmuls{0};

// Descriptor fields, kept in the opaque structs' words.
enum LayoutWord { kType, kRows, kCols, kLd, kBatch, kStride };
enum DescWord { kCompute, kScale, kTransA, kTransB, kEpilogue, kBias };

double load(cudaDataType_t t, const void* p, int64_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_64F: return static_cast<const double*>(p)[i];
    case CUDA_R_16F: return kiln::core::halfToFloat(static_cast<const uint16_t*>(p)[i]);
    case CUDA_R_16BF: return kiln::core::bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default: std::abort();
  }
}

void store(cudaDataType_t t, void* p, int64_t i, double v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case CUDA_R_64F: static_cast<double*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<uint16_t*>(p)[i] = kiln::core::floatToHalf(static_cast<float>(v)); break;
    case CUDA_R_16BF: static_cast<uint16_t*>(p)[i] = kiln::core::floatToBf16(static_cast<float>(v)); break;
    default: std::abort();
  }
}

bool supportedType(uint64_t t) {
  return t == CUDA_R_32F || t == CUDA_R_64F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

/// The product's dimensions, or false where cuBLASLt would refuse the
/// descriptors: A (m x k after op), B (k x n), C and D (m x n), one type for
/// A and B and one for C and D, equal batch counts, a compute type that
/// fits the data (64F for doubles, 32F otherwise).
bool shapeOf(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
             cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, int64_t* m, int64_t* n, int64_t* k) {
  const uint64_t* A = a->data;
  const uint64_t* B = b->data;
  const bool ta = desc->data[kTransA] == CUBLAS_OP_T, tb = desc->data[kTransB] == CUBLAS_OP_T;
  *m = static_cast<int64_t>(ta ? A[kCols] : A[kRows]);
  *k = static_cast<int64_t>(ta ? A[kRows] : A[kCols]);
  const int64_t kb = static_cast<int64_t>(tb ? B[kCols] : B[kRows]);
  *n = static_cast<int64_t>(tb ? B[kRows] : B[kCols]);
  if (kb != *k) return false;
  for (cublasLtMatrixLayout_t l : {c, d})
    if (static_cast<int64_t>(l->data[kRows]) != *m || static_cast<int64_t>(l->data[kCols]) != *n) return false;
  if (A[kType] != B[kType] || c->data[kType] != d->data[kType]) return false;
  const bool doubles = A[kType] == CUDA_R_64F;
  if (doubles != (desc->data[kCompute] == CUBLAS_COMPUTE_64F)) return false;
  if (!doubles && desc->data[kCompute] != CUBLAS_COMPUTE_32F) return false;
  for (cublasLtMatrixLayout_t l : {b, c, d})
    if (l->data[kBatch] != A[kBatch]) return false;
  return true;
}

struct Job {
  cudaDataType_t ab, cd;
  uint64_t epilogue;
  const void* bias;
  bool reluKeepsNaN;
  int64_t m, n, k, batch;
  bool ta, tb;
  int64_t lda, ldb, ldd, sa, sb, sd;
  double alpha, beta;
  const void *a, *b;
  void* d;
};

void run(void* data) {
  const Job* j = static_cast<const Job*>(data);
  for (int64_t p = 0; p < j->batch; ++p)
    for (int64_t col = 0; col < j->n; ++col)
      for (int64_t row = 0; row < j->m; ++row) {
        double acc = 0;
        for (int64_t x = 0; x < j->k; ++x) {
          const int64_t ai = p * j->sa + (j->ta ? x + row * j->lda : row + x * j->lda);
          const int64_t bi = p * j->sb + (j->tb ? col + x * j->ldb : x + col * j->ldb);
          acc += load(j->ab, j->a, ai) * load(j->ab, j->b, bi);
        }
        const int64_t di = p * j->sd + row + col * j->ldd;
        const double old = j->beta != 0 ? load(j->cd, j->d, di) : 0;
        double v = j->alpha * acc + j->beta * old;
        if (j->epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
          // Each step rounded to D's type (f32: the bits of separate ops).
          store(j->cd, j->d, di, v);
          v = load(j->cd, j->d, di);
          if (j->bias) {
            store(j->cd, j->d, di, v + load(j->cd, j->bias, row));
            v = load(j->cd, j->d, di);
          }
          if (j->epilogue == CUBLASLT_EPILOGUE_RELU || j->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS)
            v = v != v ? (j->reluKeepsNaN ? v : 0.0) : (v < 0 ? 0.0 : v);
        }
        store(j->cd, j->d, di, v);
      }
  delete j;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  auto* d = new cublasLtMatmulDescOpaque_t{};
  d->data[kCompute] = compute;
  d->data[kScale] = scale;
  d->data[kTransA] = d->data[kTransB] = CUBLAS_OP_N;
  d->data[kEpilogue] = CUBLASLT_EPILOGUE_DEFAULT;
  d->data[kBias] = 0;
  *desc = d;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE) {
    uint32_t e = 0;
    if (size != sizeof e) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&e, buf, sizeof e);
    if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_RELU &&
        e != CUBLASLT_EPILOGUE_RELU_BIAS)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    desc->data[kEpilogue] = e;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER) {
    const void* p = nullptr;
    if (size != sizeof p) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&p, buf, sizeof p);
    desc->data[kBias] = reinterpret_cast<uintptr_t>(p);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr != CUBLASLT_MATMUL_DESC_TRANSA && attr != CUBLASLT_MATMUL_DESC_TRANSB) return CUBLAS_STATUS_NOT_SUPPORTED;
  int32_t op = 0;
  if (size != sizeof op) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&op, buf, sizeof op);
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
  desc->data[attr == CUBLASLT_MATMUL_DESC_TRANSA ? kTransA : kTransB] = static_cast<uint64_t>(op);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  // Column-major: a column holds `rows` elements, so ld >= rows.
  if (!supportedType(type) || rows == 0 || cols == 0 || ld < static_cast<int64_t>(rows))
    return CUBLAS_STATUS_INVALID_VALUE;
  auto* l = new cublasLtMatrixLayoutOpaque_t{};
  l->data[kType] = type;
  l->data[kRows] = rows;
  l->data[kCols] = cols;
  l->data[kLd] = static_cast<uint64_t>(ld);
  l->data[kBatch] = 1;
  l->data[kStride] = 0;
  *layout = l;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
    int32_t count = 0;
    if (size != sizeof count) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&count, buf, sizeof count);
    if (count < 1) return CUBLAS_STATUS_INVALID_VALUE;
    layout->data[kBatch] = static_cast<uint64_t>(count);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) {
    int64_t stride = 0;
    if (size != sizeof stride) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&stride, buf, sizeof stride);
    layout->data[kStride] = static_cast<uint64_t>(stride);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  int64_t m, n, k;
  if (!handle || requested < 1 || !shapeOf(desc, a, b, c, d, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t stream) {
  int64_t m, n, k;
  if (!handle || !shapeOf(desc, a, b, c, d, &m, &n, &k) || C != D) return CUBLAS_STATUS_INVALID_VALUE;
  const uint64_t epilogue = desc->data[kEpilogue];
  const bool biased = epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  if (biased && desc->data[kBias] == 0) return CUBLAS_STATUS_INVALID_VALUE;  // no bias pointer set
  static const KilnFakeCudaEnqueue launch = kilnFakeCudaEnqueue();
  if (!launch) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* j = new Job;
  j->ab = static_cast<cudaDataType_t>(a->data[kType]);
  j->cd = static_cast<cudaDataType_t>(d->data[kType]);
  j->epilogue = epilogue;
  j->bias = biased ? reinterpret_cast<const void*>(static_cast<uintptr_t>(desc->data[kBias])) : nullptr;
  const char* relu = std::getenv("KILN_FAKE_CUBLASLT_RELU");
  j->reluKeepsNaN = relu && std::strcmp(relu, "keep-nan") == 0;
  j->m = m;
  j->n = n;
  j->k = k;
  j->batch = static_cast<int64_t>(a->data[kBatch]);
  j->ta = desc->data[kTransA] == CUBLAS_OP_T;
  j->tb = desc->data[kTransB] == CUBLAS_OP_T;
  j->lda = static_cast<int64_t>(a->data[kLd]);
  j->ldb = static_cast<int64_t>(b->data[kLd]);
  j->ldd = static_cast<int64_t>(d->data[kLd]);
  j->sa = static_cast<int64_t>(a->data[kStride]);
  j->sb = static_cast<int64_t>(b->data[kStride]);
  j->sd = static_cast<int64_t>(d->data[kStride]);
  const bool doubles = desc->data[kScale] == CUDA_R_64F;
  j->alpha = doubles ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  j->beta = doubles ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  j->a = A;
  j->b = B;
  j->d = D;
  if (launch(stream, run, j) != CUDA_SUCCESS) {
    delete j;
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  ++gMatmuls;
  if (biased) ++gBiasMatmuls;
  if (epilogue == CUBLASLT_EPILOGUE_RELU || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) ++gReluMatmuls;
  return CUBLAS_STATUS_SUCCESS;
}

/// Test hook: matmuls enqueued so far.
size_t kiln_fake_cublaslt_matmuls() { return gMatmuls.load(); }
/// Test hooks: matmuls enqueued with a bias, and with a relu, epilogue.
size_t kiln_fake_cublaslt_bias_matmuls() { return gBiasMatmuls.load(); }
size_t kiln_fake_cublaslt_relu_matmuls() { return gReluMatmuls.load(); }

}  // extern "C"
