// CublasLtMatmul: tier 0's matmul on a CUDA device through cuBLASLt.
//
// libcublasLt is opened with dlopen on first use (KILN_CUBLASLT_LIBRARY, else
// libcublasLt.so.13, .so.12, .so), as the driver is: Kiln never links it. It
// talks to the system's driver itself, so it is not used when Kiln's driver
// is a substitute (KILN_CUDA_LIBRARY, e.g. the test driver) unless
// KILN_CUBLASLT_LIBRARY names a library that goes with it; KILN_CUBLASLT=0
// turns it off. Without it, matmuls run on the tier-0 dot-product kernel.
//
// Row-major C[M,N] = A[M,K] B[K,N] is the column-major product
// C^T = B^T A^T, so each operand is handed over as stored, transposed or not
// by its unit stride; batch dims collapse to one strided batch where they can
// (broadcast batches have stride 0), else each outer index is its own call.
// Float types only (f32 without TF32, as on the CPU; f16 and bf16 accumulate
// in f32; f64); plans (descriptors and the heuristic's algorithm) are cached
// per shape, layout, alignment and epilogue.
//
// Epilogues (f32): cuBLASLt's BIAS, RELU and RELU_BIAS apply a bias along
// the row-major result's last axis and a relu in the GEMM's tile store.
// cuBLASLt does not say what its relu makes of NaN, which Kiln's relu keeps
// (NaN stays NaN); the first relu asked for runs one small product of NaNs
// on a stream of its own and reads it back, and relus are fused only where
// NaN came out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/shape.h"
#include "runtime/interp/Kernels.h"

namespace kiln::hal::cuda {

struct CudaDeviceHandle;
class CudaStream;

class CublasLtMatmul {
 public:
  CublasLtMatmul(CudaDeviceHandle& device, CudaStream& stream);
  ~CublasLtMatmul();
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;

  /// Enqueues out = a·b (a, b broadcast to outShape's batch dims; out dense)
  /// on the device's default stream. Returns false, enqueuing nothing, when
  /// cuBLASLt is unavailable or cannot take these operands (dtype, strides),
  /// so the caller runs its own kernel; throws kiln::Error when cuBLASLt
  /// fails a call it accepted.
  /// With `epilogue` (f32 only; its bias dense), out = epilogue(a·b).
  bool run(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out,
           const interp::MatmulEpilogue* epilogue = nullptr);

  /// Can run() apply a bias (and a relu, with `relu`) to results of type
  /// `t`? Loads cuBLASLt, and for a relu probes it once (above). Never
  /// throws: a failure answers false.
  bool fusesEpilogue(DType t, bool relu);

  /// Why cuBLASLt is not used on this device ("" when it is or has not been
  /// tried yet).
  const std::string& unavailableReason() const;

 private:
  /// run() without the relu probe's gate (the probe's own product), on
  /// `on` (null: the device's default stream).
  bool enqueue(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out,
               const interp::MatmulEpilogue* epilogue, CudaStream* on = nullptr);
  /// Runs a relu epilogue on products that are NaN and negative and reads
  /// them back: NaN kept, as Kiln's relu keeps it? False on any failure.
  bool probeReluKeepsNaN();

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::hal::cuda
