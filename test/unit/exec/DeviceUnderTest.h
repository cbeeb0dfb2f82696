// The device a differential suite checks against the CPU interpreter:
// KILN_DEFAULT_DEVICE (ctest runs the suites again with the test device).
#pragma once

#include <cstdlib>

#include "kiln/device.h"
#include "runtime/backends/Hal.h"
#include "runtime/exec/Executable.h"

namespace kiln {

/// The default device the process started with.
inline Device deviceUnderTest() {
  static const Device d = default_device();
  return d;
}

/// Whether the device under test compiles hot traces: it has a compile
/// target and this process has the compiler (scripts/gpu-check.sh ships
/// none). Otherwise its traces run in its tier 0, and the differential
/// suites compare its op library with the CPU's.
inline bool deviceUnderTestCompiles() {
  static const bool compiles =
      hal::deviceContext(deviceUnderTest()).compileTarget().has_value() && exec::loadCompiler() != nullptr;
  return compiles;
}

/// Whether compiled kernels compute on the device under test: the fake CUDA
/// driver with KILN_FAKE_CUDA_COMPILED=launch loads and checks them but
/// computes nothing (the suites then check that every trace compiles and
/// launches, not its values).
inline bool deviceUnderTestComputesCompiledKernels() {
  return !(deviceUnderTest().kind == Device::CUDA && std::getenv("KILN_FAKE_CUDA_COMPILED"));
}

/// Sets the default device for one scope.
class DefaultDevice {
 public:
  explicit DefaultDevice(Device d) : saved_(default_device()) { set_default_device(d); }
  ~DefaultDevice() { set_default_device(saved_); }
  DefaultDevice(const DefaultDevice&) = delete;
  DefaultDevice& operator=(const DefaultDevice&) = delete;

 private:
  Device saved_;
};

}  // namespace kiln
