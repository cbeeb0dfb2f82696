// What the GPU backends' kernel loaders (CUDA, Level Zero) share about the
// launches of a compiled trace (exec::KernelDispatch): which images they may
// map, what a dynamic-shape kernel's launch program computes from its sizes,
// and the value of each launch argument.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/exec/Executable.h"

namespace kiln::hal {

/// "" when `image` has launches, each argument is one of the kernel's
/// buffers (an input, an output, a byte inside the scratch buffer), an
/// integer or a step of its launch program, and that program reads only
/// earlier steps and the sizes the image takes; else why it cannot be
/// launched.
std::string checkLaunches(const exec::KernelImage& image);

/// The grid of dispatch `d`: its constants, or what the launch program
/// computed (`values`, runLaunchProgram's). An extent below 1 is 0: the
/// launch has nothing to do. Throws kiln::Error for a grid no GPU launches.
std::array<uint32_t, 3> gridOf(const exec::KernelDispatch& d, const std::vector<int64_t>& values);

/// A dynamic-shape kernel's launch program (`program`, of `exe`, whose
/// launches are `dispatches`) run on this launch's sizes: Executable::launch's
/// argument after the scratch buffer (`inputs` input and `outputs` output
/// buffers precede it; `dynamicSizes` of them), into `values`, one per
/// step. Throws kiln::Error when a ScratchAt argument lies outside the
/// scratch those sizes give `exe` (Executable::dynamicScratchBytes): a
/// damaged program. Nothing for a kernel without a program.
void runLaunchProgram(const exec::Executable& exe, const std::vector<exec::LaunchExpr>& program,
                      const std::vector<exec::KernelDispatch>& dispatches, void** args, uint32_t inputs,
                      uint32_t outputs, int dynamicSizes, std::vector<int64_t>& values);

/// The 8-byte value of argument `a`, given Executable::launch's arguments
/// (`inputs` input buffers, `outputs` output buffers, the scratch buffer)
/// and the launch program's `values`.
inline uint64_t launchArgument(const exec::DispatchArg& a, void** args, uint32_t inputs, uint32_t outputs,
                               const std::vector<int64_t>& values) {
  char* scratch = static_cast<char*>(args[inputs + outputs]);
  switch (a.kind) {
    case exec::DispatchArg::Kind::Input: return reinterpret_cast<uint64_t>(args[a.index]);
    case exec::DispatchArg::Kind::Output: return reinterpret_cast<uint64_t>(args[inputs + a.index]);
    case exec::DispatchArg::Kind::Scratch: return reinterpret_cast<uint64_t>(scratch + a.index);
    case exec::DispatchArg::Kind::Index: return static_cast<uint64_t>(a.index);
    case exec::DispatchArg::Kind::Value: return static_cast<uint64_t>(values[static_cast<std::size_t>(a.index)]);
    case exec::DispatchArg::Kind::ScratchAt:
      return reinterpret_cast<uint64_t>(scratch + values[static_cast<std::size_t>(a.index)]);
    case exec::DispatchArg::Kind::Sizes: break;  // refused by checkLaunches
  }
  return 0;
}


}  // namespace kiln::hal
