// ZeKernelLoader: tier 1 on one Level Zero device. Maps SPIR-V the compiler
// made for the device's target (jit/targets/spirv) or the disk cache kept,
// as a module with one kernel per launch, and returns it as an Executable
// whose launch() appends the launches to the device's default command list
// (the same in-order stream as the tier-0 kernels, so no extra ordering).
#pragma once

#include <string>

#include "runtime/backends/level_zero/ZeStream.h"
#include "runtime/exec/Executable.h"

namespace kiln::hal::level_zero {

class ZeKernelLoader final : public exec::KernelLoader {
 public:
  /// `fingerprint`: the device's CompileTarget::fingerprint().
  ZeKernelLoader(ZeDeviceHandle& device, ZeStream& stream, std::string fingerprint);
  const std::string& fingerprint() const override { return fingerprint_; }
  std::shared_ptr<exec::Executable> load(const exec::KernelImage& image, std::string* error) override;

 private:
  ZeDeviceHandle& device_;
  ZeStream& stream_;
  std::string fingerprint_;
};

}  // namespace kiln::hal::level_zero
