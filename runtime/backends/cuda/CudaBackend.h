// The CUDA backend: NVIDIA GPUs through the CUDA Driver API, opened with
// dlopen (CudaApi.h). Each device is its primary context, a default stream
// and user streams (CudaStream.h), a stream-ordered caching allocator
// (CudaCachingAllocator.h), pinned staging for host copies (PinnedStaging.h)
// and its tier-0 op library (CudaOpLibrary.h).
#pragma once

#include <memory>
#include <string>

#include "runtime/backends/Driver.h"

namespace kiln::hal {

/// The CUDA driver, or null with the reason in *why (no libcuda.so.1, a
/// driver too old, no device).
std::unique_ptr<Driver> createCudaDriver(std::string* why);

}  // namespace kiln::hal
