#include "runtime/backends/gpu/CompiledLaunches.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::hal {

std::string checkLaunches(const exec::KernelImage& image) {
  if (image.dispatches.empty())
    return std::string("a ") + exec::binaryFormatName(image.format) + " binary without launches";
  if (std::string why = exec::checkLaunchProgram(image.launchProgram, image.dynamicSizes); !why.empty()) return why;
  const auto steps = static_cast<int64_t>(image.launchProgram.size());
  for (const exec::KernelDispatch& d : image.dispatches) {
    for (int32_t s : d.gridSteps)
      if (s < -1 || s >= steps) return "launch of " + d.symbol + " has a grid size beyond its launch program";
    for (const exec::DispatchArg& a : d.args)
      if (std::string why = exec::checkGpuDispatchArg(a, image.inputs, image.outputs, image.scratchBytes,
                                                      image.dynamicSizes > 0, steps);
          !why.empty())
        return "launch of " + d.symbol + " " + why;
  }
  return {};
}

std::array<uint32_t, 3> gridOf(const exec::KernelDispatch& d, const std::vector<int64_t>& values) {
  std::array<uint32_t, 3> grid{};
  for (int i = 0; i < 3; ++i) {
    const int64_t v = d.gridSteps[i] >= 0 ? values[static_cast<std::size_t>(d.gridSteps[i])] : d.grid[i];
    const int64_t most = i == 0 ? int64_t{0x7fffffff} : 65535;  // grid x, and y and z
    if (v > most)
      throw Error("launch of " + d.symbol + ": the kernel's sizes give it " + std::to_string(v) + " blocks along " +
                  "xyz"[i] + ", more than a GPU launches (" + std::to_string(most) +
                  "); run the trace at smaller sizes (or with KILN_JIT=off)");
    grid[i] = v < 1 ? 0u : static_cast<uint32_t>(v);
  }
  return grid;
}

void runLaunchProgram(const exec::Executable& exe, const std::vector<exec::LaunchExpr>& program,
                      const std::vector<exec::KernelDispatch>& dispatches, void** args, uint32_t inputs,
                      uint32_t outputs, int dynamicSizes, std::vector<int64_t>& values) {
  if (program.empty() || dynamicSizes <= 0) return;
  const auto* sizes = static_cast<const int64_t*>(args[inputs + outputs + 1]);
  exec::runLaunchProgram(program, sizes, values);
  const std::size_t scratchBytes = exe.dynamicScratchBytes(sizes);
  for (const exec::KernelDispatch& d : dispatches)
    for (const exec::DispatchArg& a : d.args) {
      if (a.kind != exec::DispatchArg::Kind::ScratchAt) continue;
      const int64_t offset = values[static_cast<std::size_t>(a.index)];
      if (offset < 0 || static_cast<uint64_t>(offset) > scratchBytes)
        throw Error("launch of " + d.symbol + ": its launch program puts a temporary " + std::to_string(offset) +
                    " bytes into " + std::to_string(scratchBytes) +
                    " bytes of scratch; the kernel is damaged: clear its cache entry (kiln-cache verify)");
    }
}

}  // namespace kiln::hal
