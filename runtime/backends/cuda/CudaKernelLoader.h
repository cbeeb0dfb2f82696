// CudaKernelLoader: tier 1 on one CUDA device. Maps the PTX the compiler made
// for the device's SM (jit/targets/nvptx), or the disk cache kept, with
// cuModuleLoadData (the driver JIT-compiles it for the GPU), and returns it
// as an Executable whose launch() issues its kernels on the device's default
// stream (the same stream as the tier-0 kernels, so no extra ordering): one
// by one the first time, then as one CUDA graph (KILN_CUDA_GRAPHS).
#pragma once

#include <string>

#include "runtime/backends/cuda/CudaStream.h"
#include "runtime/exec/Executable.h"

namespace kiln::hal::cuda {

class CudaKernelLoader final : public exec::KernelLoader {
 public:
  /// `fingerprint`: the device's CompileTarget::fingerprint().
  CudaKernelLoader(CudaDeviceHandle& device, CudaStream& stream, std::string fingerprint);
  const std::string& fingerprint() const override { return fingerprint_; }
  std::shared_ptr<exec::Executable> load(const exec::KernelImage& image, std::string* error) override;

 private:
  CudaDeviceHandle& device_;
  CudaStream& stream_;
  std::string fingerprint_;
};

/// The PTX ISA version Kiln compiles for a GPU of SM version `sm`: the oldest
/// that knows the SM (8.0 up to sm_90, 8.6 for sm_100, 8.7 for sm_120), so
/// the PTX loads on every driver that runs the GPU.
int ptxVersionFor(int sm);

}  // namespace kiln::hal::cuda
