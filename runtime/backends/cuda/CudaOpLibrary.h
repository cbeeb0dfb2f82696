// CudaOpLibrary: the tier-0 op library of one CUDA device. The shared
// Tier0OpLibrary picks each kernel and packs its parameters; this class
// loads the embedded PTX module of a kernel (KernelImages.h) into the
// device's context on its first launch and launches it on the device's
// default stream. Matmuls go to cuBLASLt where it takes them
// (CublasLtMatmul.h), else to the tier-0 kernel; so do the bias adds and
// relus that the interpreter fuses into them (its epilogues).
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/backends/gpu/Tier0OpLibrary.h"

namespace kiln::hal::cuda {

struct CudaDeviceHandle;
class CudaStream;
class CublasLtMatmul;

class CudaOpLibrary final : public Tier0OpLibrary {
 public:
  CudaOpLibrary(CudaDeviceHandle& device, CudaStream& stream, int smVersion);
  ~CudaOpLibrary() override;

  /// The SM version whose embedded PTX this device loads (0: none fits).
  int imageSmVersion() const { return imageSm_; }

  void matmul(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out) override;
  bool matmulHalf(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out) override;
  bool hasMatmulHalf(DType) const override { return true; }  // cuBLASLt's, where it loads
  /// cuBLASLt's epilogues (CublasLtMatmul.h): f32, a dense bias, relu
  /// where cuBLASLt's keeps NaN.
  bool matmulWithEpilogue(const interp::Arg& a, const interp::Arg& b, const interp::MatmulEpilogue& e,
                          const Shape& outShape, char* out) override;
  bool fusesMatmulEpilogue(DType t, bool relu) const override;

 protected:
  void dispatch(const std::string& entry, const std::vector<uint64_t>& params, int64_t workItems) override;
  const char* backendName() const override { return "CUDA"; }
  bool hasWarpReductions() const override { return true; }

 private:
  CUfunction function(const std::string& entry);

  CudaDeviceHandle& handle_;
  CudaStream& stream_;
  int imageSm_ = 0;
  /// Blocks per launch at most (CudaOpLibrary.cpp: blocksPerSm()); the
  /// grid's x limit where the SM count is unknown.
  int64_t maxBlocks_ = int64_t{1} << 20;
  std::mutex mutex_;
  std::unordered_map<std::string, CUfunction> functions_;
  std::vector<CUmodule> modules_;
  std::unique_ptr<CublasLtMatmul> blas_;
};

}  // namespace kiln::hal::cuda
