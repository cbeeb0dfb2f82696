// The test device: a CPU-backed device kind that behaves like a discrete GPU.
// Its memory is not host-accessible (DeviceArena keeps it PROT_NONE outside
// the device's own stream work), its kernels (the CPU's, compiled or
// reference) run asynchronously on its streams, and freed memory is reused
// only after the stream work enqueued before the free. Every device path of
// the runtime (copies, launches, events, stream-ordered frees, host access
// refused) runs through it in CI, on machines without a GPU.
#pragma once

#include <memory>

#include "runtime/backends/Driver.h"

namespace kiln::hal {

/// A driver exposing `count` test devices (KILN_TEST_DEVICES).
std::unique_ptr<Driver> createTestDriver(int count);

}  // namespace kiln::hal
