// The CPU backend: host memory through the caching allocator, streams served
// by a worker thread each.
#pragma once

#include <memory>

#include "runtime/backends/Driver.h"

namespace kiln::hal {

std::unique_ptr<Driver> createCpuDriver();

}  // namespace kiln::hal
