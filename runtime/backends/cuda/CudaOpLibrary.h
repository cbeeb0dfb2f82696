// CudaOpLibrary: the tier-0 op library of one CUDA device. The shared
// Tier0OpLibrary picks each kernel and packs its parameters; this class
// loads the embedded PTX module of a kernel (KernelImages.h) into the
// device's context on its first launch and launches it on the device's
// default stream.
#pragma once

#include <cuda.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/backends/gpu/Tier0OpLibrary.h"

namespace kiln::hal::cuda {

struct CudaDeviceHandle;
class CudaStream;

class CudaOpLibrary final : public Tier0OpLibrary {
 public:
  CudaOpLibrary(CudaDeviceHandle& device, CudaStream& stream, int smVersion);
  ~CudaOpLibrary() override;

  /// The SM version whose embedded PTX this device loads (0: none fits).
  int imageSmVersion() const { return imageSm_; }

 protected:
  void dispatch(const std::string& entry, const std::vector<uint64_t>& params, int64_t workItems) override;
  const char* backendName() const override { return "CUDA"; }

 private:
  CUfunction function(const std::string& entry);

  CudaDeviceHandle& handle_;
  CudaStream& stream_;
  int imageSm_ = 0;
  std::mutex mutex_;
  std::unordered_map<std::string, CUfunction> functions_;
  std::vector<CUmodule> modules_;
};

}  // namespace kiln::hal::cuda
