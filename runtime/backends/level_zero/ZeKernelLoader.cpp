#include "runtime/backends/level_zero/ZeKernelLoader.h"

#include <map>
#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "runtime/backends/gpu/CompiledLaunches.h"

namespace kiln::hal::level_zero {

namespace {

/// A compiled trace on the device: its module and one kernel per launch.
class ZeExecutable final : public exec::Executable {
 public:
  ZeExecutable(ZeDeviceHandle& device, ZeStream& stream, ze_module_handle_t module, const exec::KernelImage& image)
      : device_(device), stream_(stream), module_(module), dispatches_(image.dispatches),
        program_(image.launchProgram), inputs_(image.inputs), outputs_(image.outputs), scratch_(image.scratchBytes),
        sizes_(image.dynamicSizes) {}

  /// Creates the kernels; throws kiln::Error (the module is then released
  /// by the destructor).
  void createKernels() {
    for (const exec::KernelDispatch& d : dispatches_) {
      if (kernels_.count(d.symbol)) continue;
      kernels_[d.symbol] =
          device_.createKernel(module_, d.symbol, static_cast<uint32_t>(d.block[0]), static_cast<uint32_t>(d.block[1]),
                               static_cast<uint32_t>(d.block[2]));
    }
  }

  ~ZeExecutable() override {
    // A kernel must not be destroyed while a launch of it may still run.
    try {
      stream_.synchronize();
    } catch (const Error&) {
      // The stream failed; its work is over either way.
    }
    for (auto& [name, k] : kernels_) device_.api->kernelDestroy(k);
    device_.api->moduleDestroy(module_);
  }

  /// Arguments are device pointers: inputs, outputs, then the scratch
  /// buffer; a dynamic-shape kernel's host sizes follow.
  void launch(void** args) const override {
    // A kernel's arguments are state of the kernel handle: set and appended
    // under one lock, so concurrent launches do not mix them.
    std::lock_guard<std::mutex> lock(mutex_);
    runLaunchProgram(*this, program_, dispatches_, args, inputs_, outputs_, sizes_, values_);
    // Every grid first: one no GPU launches fails the run before any kernel.
    grids_.resize(dispatches_.size());
    for (std::size_t k = 0; k < dispatches_.size(); ++k) grids_[k] = gridOf(dispatches_[k], values_);
    for (std::size_t k = 0; k < dispatches_.size(); ++k) {
      const exec::KernelDispatch& d = dispatches_[k];
      const std::array<uint32_t, 3>& grid = grids_[k];
      if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) continue;  // a size-0 extent: nothing to do
      ze_kernel_handle_t kernel = kernels_.at(d.symbol);
      for (std::size_t i = 0; i < d.args.size(); ++i) {
        const uint64_t value = launchArgument(d.args[i], args, inputs_, outputs_, values_);
        device_.check(device_.api->kernelSetArgumentValue(kernel, static_cast<uint32_t>(i), sizeof value, &value),
                      ("zeKernelSetArgumentValue (" + d.symbol + ")").c_str());
      }
      ze_group_count_t groups = {};
      groups.groupCountX = grid[0];
      groups.groupCountY = grid[1];
      groups.groupCountZ = grid[2];
      stream_.append([&](ze_command_list_handle_t l) {
        return device_.api->commandListAppendLaunchKernel(l, kernel, &groups, nullptr, 0, nullptr);
      }, "zeCommandListAppendLaunchKernel (" + d.symbol + ")");
      ++device_.launches;
    }
  }
  std::size_t scratchBytes() const override { return scratch_; }
  int kernelCount() const override { return static_cast<int>(dispatches_.size()); }

 private:
  ZeDeviceHandle& device_;
  ZeStream& stream_;
  ze_module_handle_t module_;
  std::vector<exec::KernelDispatch> dispatches_;
  std::vector<exec::LaunchExpr> program_;
  uint32_t inputs_, outputs_;
  std::size_t scratch_;
  int sizes_;
  std::map<std::string, ze_kernel_handle_t> kernels_;
  mutable std::mutex mutex_;
  mutable std::vector<int64_t> values_;  ///< the launch program's, guarded by mutex_
  mutable std::vector<std::array<uint32_t, 3>> grids_;  ///< this launch's, guarded by mutex_
};

}  // namespace

ZeKernelLoader::ZeKernelLoader(ZeDeviceHandle& device, ZeStream& stream, std::string fingerprint)
    : device_(device), stream_(stream), fingerprint_(std::move(fingerprint)) {}

std::shared_ptr<exec::Executable> ZeKernelLoader::load(const exec::KernelImage& image, std::string* error) {
  if (image.format != exec::BinaryFormat::Spirv) {
    *error = std::string("a Level Zero device runs SPIR-V, not ") + exec::binaryFormatName(image.format);
    return nullptr;
  }
  if (std::string why = checkLaunches(image); !why.empty()) {
    *error = why;
    return nullptr;
  }
  std::shared_ptr<ZeExecutable> exe;
  try {
    ze_module_handle_t module = device_.buildSpirvModule(image.object.data(), image.object.size(), "compiled trace");
    exe = std::make_shared<ZeExecutable>(device_, stream_, module, image);
    exe->createKernels();
  } catch (const Error& e) {
    *error = e.what();
    return nullptr;
  }
  return exe;
}

}  // namespace kiln::hal::level_zero
