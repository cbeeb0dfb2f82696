// What the GPU backends' kernel loaders (CUDA, Level Zero) share about the
// launches of a compiled trace (exec::KernelDispatch): which images they may
// map, and the value of each launch argument.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/exec/Executable.h"

namespace kiln::hal {

/// "" when `image` has launches and each argument is one of the kernel's
/// buffers (an input, an output, a byte inside the scratch buffer) or an
/// integer; else why it cannot be launched.
std::string checkLaunches(const exec::KernelImage& image);

/// The 8-byte value of argument `a`, given Executable::launch's arguments
/// (`inputs` input buffers, `outputs` output buffers, the scratch buffer).
inline uint64_t launchArgument(const exec::DispatchArg& a, void** args, uint32_t inputs, uint32_t outputs) {
  switch (a.kind) {
    case exec::DispatchArg::Kind::Input: return reinterpret_cast<uint64_t>(args[a.index]);
    case exec::DispatchArg::Kind::Output: return reinterpret_cast<uint64_t>(args[inputs + a.index]);
    case exec::DispatchArg::Kind::Scratch:
      return reinterpret_cast<uint64_t>(static_cast<char*>(args[inputs + outputs]) + a.index);
    case exec::DispatchArg::Kind::Index: return static_cast<uint64_t>(a.index);
    case exec::DispatchArg::Kind::Sizes: break;  // refused by checkLaunches
  }
  return 0;
}

}  // namespace kiln::hal
