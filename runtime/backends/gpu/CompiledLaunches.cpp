#include "runtime/backends/gpu/CompiledLaunches.h"

namespace kiln::hal {

std::string checkLaunches(const exec::KernelImage& image) {
  if (image.dispatches.empty())
    return std::string("a ") + exec::binaryFormatName(image.format) + " binary without launches";
  for (const exec::KernelDispatch& d : image.dispatches)
    for (const exec::DispatchArg& a : d.args) {
      const bool inRange =
          (a.kind == exec::DispatchArg::Kind::Input && a.index >= 0 && a.index < image.inputs) ||
          (a.kind == exec::DispatchArg::Kind::Output && a.index >= 0 && a.index < image.outputs) ||
          (a.kind == exec::DispatchArg::Kind::Scratch && a.index >= 0 &&
           static_cast<std::size_t>(a.index) < image.scratchBytes) ||
          a.kind == exec::DispatchArg::Kind::Index;
      if (!inRange) return "launch of " + d.symbol + " has an argument beyond the kernel's buffers";
    }
  return {};
}

}  // namespace kiln::hal
