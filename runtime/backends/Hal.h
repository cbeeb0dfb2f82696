// The hardware abstraction layer: umbrella header and backend registry.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/backends/Allocator.h"
#include "runtime/backends/Driver.h"
#include "runtime/backends/Stream.h"

namespace kiln::hal {

/// Registers the built-in drivers (CPU; the test device when
/// KILN_TEST_DEVICES > 0; CUDA and Level Zero when their driver libraries
/// load). Idempotent and thread-safe; every accessor below
/// calls it first.
void initializeBackends();

/// Adds a driver; a second driver of the same kind replaces nothing and is
/// rejected with kiln::Error.
void registerDriver(std::unique_ptr<Driver> driver);
/// The driver for a device kind, or nullptr when none is registered.
Driver* findDriver(Device::Kind kind);
std::vector<Driver*> drivers();
/// The device context for `device`; throws kiln::Error naming the missing
/// driver or index when there is none.
DeviceContext& deviceContext(Device device);
/// Why no driver of `kind` is registered ("" when one is, or when none was
/// tried): e.g. "libcuda.so.1 not found ...; set KILN_CUDA_LIBRARY".
std::string unavailableReason(Device::Kind kind);
/// Waits for the runtime's work on every device (kiln::sync).
void synchronizeDevices();
/// The CPU device's allocator (caching host allocator).
Allocator& hostAllocator();

}  // namespace kiln::hal
