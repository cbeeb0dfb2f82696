// The device a differential suite checks against the CPU interpreter:
// KILN_DEFAULT_DEVICE (ctest runs the suites again with the test device).
#pragma once

#include "kiln/device.h"
#include "runtime/backends/Hal.h"

namespace kiln {

/// The default device the process started with.
inline Device deviceUnderTest() {
  static const Device d = default_device();
  return d;
}

/// Whether the device under test compiles hot traces (a device without a
/// compile target, e.g. level_zero today, runs them in its tier 0: the
/// differential suites then compare its op library with the CPU's).
inline bool deviceUnderTestCompiles() { return hal::deviceContext(deviceUnderTest()).compileTarget().has_value(); }

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
