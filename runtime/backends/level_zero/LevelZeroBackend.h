// The Level Zero backend: Intel GPUs through oneAPI Level Zero, the loader
// opened with dlopen (ZeApi.h). Each device is a context, an in-order
// immediate command list as its default stream and user streams
// (ZeStream.h), a stream-ordered caching allocator over USM device memory
// (ZeCachingAllocator.h) and its tier-0 op library of embedded SPIR-V
// kernels (ZeOpLibrary.h).
#pragma once

#include <memory>
#include <string>

#include "runtime/backends/Driver.h"

namespace kiln::hal {

/// The Level Zero driver, or null with the reason in *why (no loader, no
/// driver, no device).
std::unique_ptr<Driver> createLevelZeroDriver(std::string* why);

}  // namespace kiln::hal
