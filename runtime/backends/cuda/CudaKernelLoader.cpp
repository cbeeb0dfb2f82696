#include "runtime/backends/cuda/CudaKernelLoader.h"

#include <map>
#include <vector>

#include "kiln/error.h"
#include "runtime/backends/gpu/CompiledLaunches.h"

namespace kiln::hal::cuda {

namespace {

/// A compiled trace on the device: its module and one function per kernel.
class CudaExecutable final : public exec::Executable {
 public:
  CudaExecutable(CudaDeviceHandle& device, CudaStream& stream, CUmodule module, const exec::KernelImage& image)
      : device_(device), stream_(stream), module_(module), dispatches_(image.dispatches), inputs_(image.inputs),
        outputs_(image.outputs), scratch_(image.scratchBytes) {}

  /// Looks up the kernels; throws kiln::Error (the module is then unloaded
  /// by the destructor).
  void findFunctions() {
    for (const exec::KernelDispatch& d : dispatches_) {
      if (functions_.count(d.symbol)) continue;
      CUfunction f = nullptr;
      device_.check(device_.api->moduleGetFunction(&f, module_, d.symbol.c_str()),
                    ("cuModuleGetFunction (" + d.symbol + ")").c_str());
      functions_[d.symbol] = f;
    }
  }

  ~CudaExecutable() override {
    // A module must not be unloaded while a launch of it may still run.
    try {
      stream_.synchronize();
    } catch (const Error&) {
      // The stream failed; its work is over either way.
    }
    device_.makeCurrent();
    device_.api->moduleUnload(module_);
  }

  /// Arguments are device pointers: inputs, outputs, then the scratch
  /// buffer. The driver copies the parameter values at each launch.
  void launch(void** args) const override {
    device_.makeCurrent();
    std::vector<uint64_t> values;
    std::vector<void*> params;
    for (const exec::KernelDispatch& d : dispatches_) {
      values.assign(d.args.size(), 0);
      params.assign(d.args.size(), nullptr);
      for (std::size_t i = 0; i < d.args.size(); ++i) {
        values[i] = launchArgument(d.args[i], args, inputs_, outputs_);
        params[i] = &values[i];
      }
      device_.check(device_.api->launchKernel(functions_.at(d.symbol), static_cast<unsigned>(d.grid[0]),
                                              static_cast<unsigned>(d.grid[1]), static_cast<unsigned>(d.grid[2]),
                                              static_cast<unsigned>(d.block[0]), static_cast<unsigned>(d.block[1]),
                                              static_cast<unsigned>(d.block[2]), 0, stream_.handle(),
                                              params.empty() ? nullptr : params.data(), nullptr),
                    ("cuLaunchKernel (" + d.symbol + ")").c_str());
      ++device_.launches;
    }
  }
  std::size_t scratchBytes() const override { return scratch_; }
  int kernelCount() const override { return static_cast<int>(dispatches_.size()); }

 private:
  CudaDeviceHandle& device_;
  CudaStream& stream_;
  CUmodule module_;
  std::vector<exec::KernelDispatch> dispatches_;
  uint32_t inputs_, outputs_;
  std::size_t scratch_;
  std::map<std::string, CUfunction> functions_;
};

}  // namespace

int ptxVersionFor(int sm) {
  if (sm >= 120) return 87;
  if (sm >= 100) return 86;
  return 80;
}

CudaKernelLoader::CudaKernelLoader(CudaDeviceHandle& device, CudaStream& stream, std::string fingerprint)
    : device_(device), stream_(stream), fingerprint_(std::move(fingerprint)) {}

std::shared_ptr<exec::Executable> CudaKernelLoader::load(const exec::KernelImage& image, std::string* error) {
  if (image.format != exec::BinaryFormat::Ptx) {
    *error = std::string("a CUDA device loads PTX here, not ") + exec::binaryFormatName(image.format);
    return nullptr;
  }
  if (std::string why = checkLaunches(image); !why.empty()) {
    *error = why;
    return nullptr;
  }
  std::shared_ptr<CudaExecutable> exe;
  try {
    device_.makeCurrent();
    const std::string ptx(image.object);  // cuModuleLoadData reads PTX up to its terminating nul
    CUmodule module = nullptr;
    device_.check(device_.api->moduleLoadData(&module, ptx.c_str()), "cuModuleLoadData (compiled trace)");
    exe = std::make_shared<CudaExecutable>(device_, stream_, module, image);
    exe->findFunctions();
  } catch (const Error& e) {
    *error = e.what();
    return nullptr;
  }
  return exe;
}

}  // namespace kiln::hal::cuda
