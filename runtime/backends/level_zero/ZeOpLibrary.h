// ZeOpLibrary: the tier-0 op library of one Level Zero device. The shared
// Tier0OpLibrary picks each kernel and packs its parameters; this class
// builds the embedded SPIR-V module of a kernel (SpirvImages.h) with
// zeModuleCreate on its first launch and appends it to the device's default
// command list (groups of 256 work items, grid-stride loops inside).
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/backends/gpu/Tier0OpLibrary.h"
#include "runtime/backends/level_zero/ZeApi.h"

namespace kiln::hal::level_zero {

struct ZeDeviceHandle;
class ZeStream;

class ZeOpLibrary final : public Tier0OpLibrary {
 public:
  ZeOpLibrary(ZeDeviceHandle& device, ZeStream& stream);
  ~ZeOpLibrary() override;

 protected:
  void dispatch(const std::string& entry, const std::vector<uint64_t>& params, int64_t workItems) override;
  const char* backendName() const override { return "Level Zero"; }

 private:
  ze_kernel_handle_t kernelLocked(const std::string& entry);

  ZeDeviceHandle& handle_;
  ZeStream& stream_;
  std::mutex mutex_;  ///< kernels' arguments are set and appended under it
  std::unordered_map<std::string, ze_kernel_handle_t> kernels_;
  std::vector<ze_module_handle_t> modules_;
};

}  // namespace kiln::hal::level_zero
