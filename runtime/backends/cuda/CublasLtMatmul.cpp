#include "runtime/backends/cuda/CublasLtMatmul.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "kiln/error.h"
#include "runtime/support/Log.h"
#include "runtime/support/DynamicSymbols.h"
#include "runtime/backends/cuda/CudaStream.h"

namespace kiln::hal::cuda {

namespace {

/// The cuBLASLt entry points Kiln uses (cublasLt.h for their types only).
struct LtApi {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtMatmulDescCreate) descCreate = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) descSet = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layoutSet = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) prefCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) prefDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) prefSet = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  std::string path;
};

using support::resolveSymbol;

/// The table, opened once per process; null with the reason in *why.
const LtApi* loadLtApi(const std::string& driverPath, std::string* why) {
  static LtApi api;
  static std::string reason;
  static bool ok = false;
  static std::once_flag once;
  std::call_once(once, [&] {
    const char* off = std::getenv("KILN_CUBLASLT");
    if (off && std::string(off) == "0") {
      reason = "KILN_CUBLASLT=0";
      return;
    }
    const char* configured = std::getenv("KILN_CUBLASLT_LIBRARY");
    std::vector<std::string> candidates;
    if (configured && *configured) {
      candidates.push_back(configured);
    } else if (driverPath != "libcuda.so.1") {
      // cuBLASLt would talk to the system's driver, not to this one.
      reason = "the CUDA driver is a substitute (" + driverPath +
               "); set KILN_CUBLASLT_LIBRARY to a cuBLASLt that works with it";
      return;
    } else {
      candidates = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    }
    void* handle = nullptr;
    for (const std::string& c : candidates)
      if ((handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        api.path = c;
        break;
      }
    if (!handle) {
      reason = "no cuBLASLt library found (tried " + candidates.front() +
               (candidates.size() > 1 ? " and older sonames" : "") +
               "): install the CUDA toolkit's libcublasLt or set KILN_CUBLASLT_LIBRARY";
      return;
    }
    std::string missing;
    resolveSymbol(handle, api.create, "cublasLtCreate", missing);
    resolveSymbol(handle, api.descCreate, "cublasLtMatmulDescCreate", missing);
    resolveSymbol(handle, api.descSet, "cublasLtMatmulDescSetAttribute", missing);
    resolveSymbol(handle, api.layoutCreate, "cublasLtMatrixLayoutCreate", missing);
    resolveSymbol(handle, api.layoutSet, "cublasLtMatrixLayoutSetAttribute", missing);
    resolveSymbol(handle, api.prefCreate, "cublasLtMatmulPreferenceCreate", missing);
    resolveSymbol(handle, api.prefDestroy, "cublasLtMatmulPreferenceDestroy", missing);
    resolveSymbol(handle, api.prefSet, "cublasLtMatmulPreferenceSetAttribute", missing);
    resolveSymbol(handle, api.heuristic, "cublasLtMatmulAlgoGetHeuristic", missing);
    resolveSymbol(handle, api.matmul, "cublasLtMatmul", missing);
    if (!missing.empty()) {
      reason = api.path + " lacks " + missing;
      return;
    }
    ok = true;
  });
  if (!ok && why) *why = reason;
  return ok ? &api : nullptr;
}

/// One operand as cuBLASLt sees it: a column-major matrix as stored and
/// whether the product takes its transpose.
struct ColumnMajor {
  int64_t rows = 0, cols = 0, ld = 0;
  bool transpose = false;
};

/// Row-major X[p,q] with element strides (sp, sq), as a column-major operand
/// whose op() is X^T (q x p): stored as X^T itself when sq is the unit stride,
/// as X (then transposed) when sp is; nothing else (broadcast or gapped rows
/// and columns) is a BLAS layout.
std::optional<ColumnMajor> transposedOperand(int64_t p, int64_t q, int64_t sp, int64_t sq) {
  if (sq == 1 || q == 1) {
    const int64_t ld = p == 1 ? std::max<int64_t>(q, 1) : sp;
    if (ld >= std::max<int64_t>(q, 1)) return ColumnMajor{q, p, ld, false};
  }
  if (sp == 1 || p == 1) {
    const int64_t ld = q == 1 ? std::max<int64_t>(p, 1) : sq;
    if (ld >= std::max<int64_t>(p, 1)) return ColumnMajor{p, q, ld, true};
  }
  return std::nullopt;
}

/// One batch axis after merging: its extent and the element stride of each
/// operand along it.
struct BatchAxis {
  int64_t size, a, b, out;
};

/// What a plan depends on: dtype, m, n, k, each operand's leading
/// dimension and transpose, the strided batch (count and steps), the
/// three alignments and the epilogue (cublasLtEpilogue_t).
using PlanKey = std::array<int64_t, 16>;
struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (int64_t v : key) {
      h ^= static_cast<uint64_t>(v);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation for Hopper

}  // namespace

struct CublasLtMatmul::State {
  CudaDeviceHandle& device;
  CudaStream& stream;
  std::mutex mutex;
  bool tried = false;
  const LtApi* api = nullptr;
  std::string why;
  cublasLtHandle_t handle = nullptr;
  CUdeviceptr workspace = 0;

  /// Descriptors and the heuristic's algorithm for one shape and layout;
  /// ok false: cuBLASLt offered no algorithm (tier 0 runs it).
  struct Plan {
    bool ok = false;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  std::unordered_map<PlanKey, Plan, PlanKeyHash> plans;
  /// Whether cuBLASLt's relu epilogue keeps NaN (probed once).
  bool reluProbed = false;
  std::atomic<bool> reluKeepsNaN{false};

  State(CudaDeviceHandle& d, CudaStream& s) : device(d), stream(s) {}

  bool ready() {
    if (tried) return api != nullptr;
    tried = true;
    api = loadLtApi(device.api->path, &why);
    if (!api) return false;
    device.makeCurrent();
    if (cublasStatus_t s = api->create(&handle); s != CUBLAS_STATUS_SUCCESS) {
      why = "cublasLtCreate failed (status " + std::to_string(static_cast<int>(s)) + ")";
      api = nullptr;
      return false;
    }
    if (CUresult r = device.api->memAlloc(&workspace, kWorkspaceBytes); r != CUDA_SUCCESS) {
      // (Out of memory at the first matmul: matmuls run on tier 0's kernel.)
      why = "cuMemAlloc of cuBLASLt's " + std::to_string(kWorkspaceBytes >> 20) + " MiB workspace failed (CUDA error " +
            std::to_string(static_cast<int>(r)) + ")";
      workspace = 0;
      api = nullptr;
      return false;
    }
    return true;
  }

  /// Throws naming the device, the operands (`shapes()`, built only then)
  /// and the call, unless `s` is success.
  template <class Shapes>
  void check(cublasStatus_t s, const char* what, const Shapes& shapes) const {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw Error(device.device.str() + ": matmul " + shapes() + ": " + what + " failed (cuBLAS status " +
                  std::to_string(static_cast<int>(s)) + ", from " + api->path + ")");
  }
};

CublasLtMatmul::CublasLtMatmul(CudaDeviceHandle& device, CudaStream& stream)
    : state_(std::make_unique<State>(device, stream)) {}

CublasLtMatmul::~CublasLtMatmul() {
  // The workspace goes back to the driver. The cuBLASLt handle and plan
  // descriptors are left to the process: a backend lives until exit, when
  // cuBLASLt's own runtime may already be torn down under them.
  if (state_->workspace) {
    state_->device.api->ctxSetCurrent(state_->device.context);
    state_->device.api->memFree(state_->workspace);
  }
}

const std::string& CublasLtMatmul::unavailableReason() const { return state_->why; }

bool CublasLtMatmul::run(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out,
                         const interp::MatmulEpilogue* epilogue) {
  if (epilogue && epilogue->relu && !fusesEpilogue(a.dtype, true)) return false;
  return enqueue(a, b, outShape, out, epilogue);
}

bool CublasLtMatmul::fusesEpilogue(DType t, bool relu) {
  if (t != DType::f32) return false;
  try {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->ready()) return false;
    if (!relu) return true;
    if (state_->reluProbed) return state_->reluKeepsNaN;
    state_->reluProbed = true;  // one probe; a relu asked for meanwhile is not fused
  } catch (const std::exception&) {
    return false;  // (a context that cannot be made current: the matmul itself will say)
  }
  state_->reluKeepsNaN = probeReluKeepsNaN();
  exec::log().info("{}: cuBLASLt's relu epilogue {}", state_->device.device.str(),
                   state_->reluKeepsNaN ? "keeps NaN: relus after matmuls run in the matmul's call"
                                        : "does not keep NaN: relus after matmuls run as kernels of their own");
  return state_->reluKeepsNaN;
}

bool CublasLtMatmul::probeReluKeepsNaN() {
  // Kiln's relu is x < 0 ? 0 : x: NaN stays NaN. (A product's sums start
  // from +0, so no -0 reaches the relu.) A product of 16 x 16 ones with a B
  // whose first 8 columns are NaN and the others -1 gives NaN and 0 columns.
  // On a stream of its own, so that it neither waits for the user's work
  // nor takes its errors.
  constexpr int64_t kSide = 16;
  constexpr size_t kBytes = kSide * kSide * sizeof(float);
  CudaDeviceHandle& device = state_->device;
  std::vector<float> b(kSide * kSide), result(kSide * kSide, 1.0f);
  for (int64_t r = 0; r < kSide; ++r)
    for (int64_t c = 0; c < kSide; ++c) b[r * kSide + c] = c < kSide / 2 ? std::nanf("") : -1.0f;
  const std::vector<float> a(kSide * kSide, 1.0f);
  bool ran = false;
  CUdeviceptr buffers = 0;
  try {
    device.makeCurrent();
    device.check(device.api->memAlloc(&buffers, 3 * kBytes), "cuMemAlloc (cuBLASLt relu probe)");
    char* base = reinterpret_cast<char*>(static_cast<uintptr_t>(buffers));
    CudaStream stream(device);
    stream.copy(base, a.data(), kBytes);
    stream.copy(base + kBytes, b.data(), kBytes);
    auto dense = [&](char* data) {
      interp::Arg arg;
      arg.data = data;
      arg.dtype = DType::f32;
      arg.shape = Shape{kSide, kSide};
      arg.strides[0] = kSide;
      arg.strides[1] = 1;
      return arg;
    };
    interp::MatmulEpilogue relu;
    relu.relu = true;
    ran = enqueue(dense(base), dense(base + kBytes), Shape{kSide, kSide}, base + 2 * kBytes, &relu, &stream);
    if (ran) stream.copy(result.data(), base + 2 * kBytes, kBytes);
    stream.synchronize();
  } catch (const std::exception&) {
    ran = false;
  }
  if (buffers) device.api->memFree(buffers);
  if (!ran) return false;
  for (int64_t r = 0; r < kSide; ++r)
    for (int64_t c = 0; c < kSide; ++c) {
      const float x = result[r * kSide + c];
      if (c < kSide / 2 ? !std::isnan(x) : x != 0.0f) return false;
    }
  return true;
}

bool CublasLtMatmul::enqueue(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out,
                             const interp::MatmulEpilogue* epilogue, CudaStream* on) {
  if (a.dtype != b.dtype) return false;
  // cuBLASLt's bias is a dense vector (and its relu probed before use).
  cublasLtEpilogue_t epilogueKind = CUBLASLT_EPILOGUE_DEFAULT;
  if (epilogue) {
    // No scale or residual: cuBLASLt adds beta * C before its bias, where
    // MatmulEpilogue adds the bias first, and how its alpha rounds has not
    // been checked on a GPU.
    if (epilogue->scaled || epilogue->residual) return false;
    if (a.dtype != DType::f32 || (epilogue->bias && epilogue->biasStride != 1 && outShape[outShape.rank() - 1] > 1) ||
        (epilogue->bias && reinterpret_cast<uintptr_t>(epilogue->bias) % 16 != 0))
      return false;
    epilogueKind = epilogue->bias ? (epilogue->relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                  : (epilogue->relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  }
  cudaDataType_t data;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // no TF32: f32 results as exact as the CPU's
  cudaDataType_t scale = CUDA_R_32F;
  switch (a.dtype) {
    case DType::f32: data = CUDA_R_32F; break;
    case DType::f16: data = CUDA_R_16F; break;
    case DType::bf16: data = CUDA_R_16BF; break;
    case DType::f64:
      data = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      scale = CUDA_R_64F;
      break;
    default: return false;
  }
  const int r = outShape.rank();
  if (r < 2 || outShape.numel() == 0) return false;
  int64_t m = outShape[r - 2];
  const int64_t n = outShape[r - 1], k = a.shape[r - 1];
  if (k == 0) return false;  // the tier-0 kernel writes the zeros
  // cuBLAS's product C^T = B^T A^T: its first operand is B, its second A.
  const std::optional<ColumnMajor> first = transposedOperand(k, n, b.strides[r - 2], b.strides[r - 1]);
  std::optional<ColumnMajor> second = transposedOperand(m, k, a.strides[r - 2], a.strides[r - 1]);
  if (!first || !second) return false;

  // Batch axes, size-1 ones dropped, neighbours merged where every operand
  // steps through them as through one axis.
  std::vector<BatchAxis> axes;
  int64_t outStride = m * n;
  std::vector<BatchAxis> reversed;
  for (int d = r - 3; d >= 0; --d) {
    const BatchAxis ax{outShape[d], a.strides[d], b.strides[d], outStride};
    outStride *= outShape[d];
    if (ax.size == 1) continue;
    if (!reversed.empty()) {
      BatchAxis& inner = reversed.back();
      if (ax.a == inner.a * inner.size && ax.b == inner.b * inner.size && ax.out == inner.out * inner.size) {
        inner.size *= ax.size;
        continue;
      }
    }
    reversed.push_back(ax);
  }
  axes.assign(reversed.rbegin(), reversed.rend());
  // The innermost axis is cuBLASLt's strided batch; outer ones are a loop.
  BatchAxis inner = axes.empty() ? BatchAxis{1, 0, 0, 0} : axes.back();
  if (!axes.empty()) axes.pop_back();
  // A batch of a's row blocks times one shared b (x[B,M,K] w[K,N]) is one
  // taller product.
  if (inner.size > 1 && inner.b == 0 && !second->transpose && inner.a == m * second->ld && inner.out == m * n) {
    m *= inner.size;
    second->cols = m;
    inner = BatchAxis{1, 0, 0, 0};
  }
  if (inner.size > INT32_MAX || inner.a < 0 || inner.b < 0) return false;

  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  if (!s.ready()) return false;
  const size_t elem = dtype_size(a.dtype);
  // Pointer alignment over every call of the loop, for the heuristic: the
  // largest power of two (at most 256) dividing each base and batch step.
  uint64_t aBits = 256 | reinterpret_cast<uintptr_t>(a.data) | inner.a * elem,
           bBits = 256 | reinterpret_cast<uintptr_t>(b.data) | inner.b * elem,
           dBits = 256 | reinterpret_cast<uintptr_t>(out) | inner.out * elem;
  for (const BatchAxis& ax : axes) {
    aBits |= ax.a * elem;
    bBits |= ax.b * elem;
    dBits |= ax.out * elem;
  }
  auto lowestBit = [](uint64_t bits) { return static_cast<uint32_t>(bits & (~bits + 1)); };
  const uint32_t alignA = lowestBit(aBits), alignB = lowestBit(bBits), alignD = lowestBit(dBits);

  auto shapes = [&] {  // for messages only
    std::ostringstream text;
    text << "[" << m << "x" << k << "] x [" << k << "x" << n << "] " << dtype_name(a.dtype);
    return text.str();
  };
  const PlanKey key = {static_cast<int64_t>(a.dtype), m, n, k, first->ld, first->transpose, second->ld,
                       second->transpose, inner.size, inner.a, inner.b, inner.out, alignA, alignB, alignD,
                       static_cast<int64_t>(epilogueKind)};
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    State::Plan p;
    const LtApi& api = *s.api;
    s.check(api.descCreate(&p.desc, compute, scale), "cublasLtMatmulDescCreate", shapes);
    const cublasOperation_t opA = first->transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
                            opB = second->transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    s.check(api.descSet(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA), "set TRANSA", shapes);
    s.check(api.descSet(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB), "set TRANSB", shapes);
    if (epilogueKind != CUBLASLT_EPILOGUE_DEFAULT)
      s.check(api.descSet(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogueKind, sizeof epilogueKind),
              "set EPILOGUE", shapes);
    auto layout = [&](cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t ld, int64_t batchStride) {
      s.check(api.layoutCreate(l, data, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
              "cublasLtMatrixLayoutCreate", shapes);
      if (inner.size > 1) {
        const int32_t count = static_cast<int32_t>(inner.size);
        s.check(api.layoutSet(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "set BATCH_COUNT",
                shapes);
        s.check(api.layoutSet(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batchStride, sizeof batchStride),
                "set STRIDED_BATCH_OFFSET", shapes);
      }
    };
    layout(&p.a, first->rows, first->cols, first->ld, inner.b);
    layout(&p.b, second->rows, second->cols, second->ld, inner.a);
    layout(&p.d, n, m, n, inner.out);
    cublasLtMatmulPreference_t pref = nullptr;
    s.check(api.prefCreate(&pref), "cublasLtMatmulPreferenceCreate", shapes);
    const uint64_t workspace = kWorkspaceBytes;
    api.prefSet(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    // cuBLAS's A is Kiln's b and its B Kiln's a.
    api.prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignB, sizeof alignB);
    api.prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignA, sizeof alignA);
    api.prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD, sizeof alignD);
    api.prefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, sizeof alignD);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    s.device.makeCurrent();
    const cublasStatus_t h = api.heuristic(s.handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
    api.prefDestroy(pref);
    p.ok = h == CUBLAS_STATUS_SUCCESS && found > 0 && result.workspaceSize <= kWorkspaceBytes;
    p.algo = result.algo;
    it = s.plans.emplace(key, p).first;
  }
  const State::Plan& p = it->second;
  if (!p.ok) return false;
  if (epilogue && epilogue->bias) {
    // Read when the call is made: the plan's descriptor serves every bias.
    const void* bias = epilogue->bias;
    s.check(s.api->descSet(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "set BIAS_POINTER",
            shapes);
  }

  const float alpha32 = 1, beta32 = 0;
  const double alpha64 = 1, beta64 = 0;
  const void* alpha = scale == CUDA_R_64F ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = scale == CUDA_R_64F ? static_cast<const void*>(&beta64) : &beta32;
  s.device.makeCurrent();
  // One call per index of the outer batch axes (usually none).
  std::vector<int64_t> index(axes.size(), 0);
  for (;;) {
    int64_t offA = 0, offB = 0, offD = 0;
    for (size_t i = 0; i < axes.size(); ++i) {
      offA += index[i] * axes[i].a;
      offB += index[i] * axes[i].b;
      offD += index[i] * axes[i].out;
    }
    char* d = out + offD * static_cast<int64_t>(elem);
    s.check(s.api->matmul(s.handle, p.desc, alpha, b.data + offB * static_cast<int64_t>(elem), p.a,
                          a.data + offA * static_cast<int64_t>(elem), p.b, beta, d, p.d, d, p.d, &p.algo,
                          reinterpret_cast<void*>(s.workspace), kWorkspaceBytes,
                          reinterpret_cast<cudaStream_t>((on ? *on : s.stream).handle())),
            "cublasLtMatmul", shapes);
    ++s.device.launches;
    size_t i = axes.size();
    while (i > 0 && ++index[i - 1] == axes[i - 1].size) index[--i] = 0;
    if (i == 0) break;
  }
  return true;
}

}  // namespace kiln::hal::cuda
