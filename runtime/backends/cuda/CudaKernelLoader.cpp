#include "runtime/backends/cuda/CudaKernelLoader.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime.h"
#include "runtime/backends/gpu/CompiledLaunches.h"
#include "runtime/support/Log.h"

namespace kiln::hal::cuda {

namespace {


/// A compiled trace on the device: its module and one function per kernel.
/// Its first launch issues the kernels one by one; from the second on
/// (KILN_CUDA_GRAPHS), they launch as one CUDA graph, a chain of kernel
/// nodes built once: one driver call per step instead of one per kernel.
/// When the trace's buffers move (new outputs, another scratch block), the
/// nodes whose parameters changed are updated in the instantiated graph
/// before it launches; a different trace structure is another executable
/// with a graph of its own.
class CudaExecutable final : public exec::Executable {
 public:
  CudaExecutable(CudaDeviceHandle& device, CudaStream& stream, CUmodule module, const exec::KernelImage& image)
      : device_(device), stream_(stream), module_(module), dispatches_(image.dispatches),
        program_(image.launchProgram), inputs_(image.inputs), outputs_(image.outputs), scratch_(image.scratchBytes),
        sizes_(image.dynamicSizes), graphs_(settings().cuda_graphs && device.api->hasGraphs()) {
    // One flat array of every launch's parameter values, filled at each
    // launch, and the pointers the driver reads them through: no
    // allocation per step (a step's launch cost is what graphs cut).
    for (const exec::KernelDispatch& d : dispatches_) {
      first_.push_back(values_.size());
      values_.resize(values_.size() + d.args.size());
    }
    first_.push_back(values_.size());
    for (uint64_t& v : values_) params_.push_back(&v);
    grids_.resize(dispatches_.size());
  }

  /// Looks up the kernels; throws kiln::Error (the module is then unloaded
  /// by the destructor).
  void findFunctions() {
    std::map<std::string, CUfunction> found;
    for (const exec::KernelDispatch& d : dispatches_) {
      CUfunction& f = found[d.symbol];
      if (!f)
        device_.check(device_.api->moduleGetFunction(&f, module_, d.symbol.c_str()),
                      ("cuModuleGetFunction (" + d.symbol + ")").c_str());
      functions_.push_back(f);
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
    dropGraph();
    device_.api->moduleUnload(module_);
  }

  /// Arguments are device pointers: inputs, outputs, then the scratch
  /// buffer; a dynamic-shape kernel's host sizes follow. The driver copies
  /// the parameter values at each launch (and a graph keeps them in its
  /// nodes).
  void launch(void** args) const override {
    device_.makeCurrent();
    std::lock_guard<std::mutex> lock(mutex_);
    runLaunchProgram(*this, program_, dispatches_, args, inputs_, outputs_, sizes_, steps_);
    bool empty = false;  // a launch with nothing to do (a size-0 extent)
    for (std::size_t k = 0; k < dispatches_.size(); ++k) {
      const std::vector<exec::DispatchArg>& a = dispatches_[k].args;
      for (std::size_t i = 0; i < a.size(); ++i)
        values_[first_[k] + i] = launchArgument(a[i], args, inputs_, outputs_, steps_);
      grids_[k] = gridOf(dispatches_[k], steps_);
      empty |= grids_[k][0] == 0 || grids_[k][1] == 0 || grids_[k][2] == 0;
    }
    // A graph's nodes cannot skip a launch: such a step goes one by one.
    if (graphs_ && launched_ && !empty && (exec_ || buildGraph())) {
      launchGraph();
    } else {
      for (std::size_t k = 0; k < dispatches_.size(); ++k) {
        const exec::KernelDispatch& d = dispatches_[k];
        const std::array<uint32_t, 3>& grid = grids_[k];
        if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) continue;
        device_.check(device_.api->launchKernel(functions_[k], grid[0], grid[1], grid[2],
                                                static_cast<unsigned>(d.block[0]), static_cast<unsigned>(d.block[1]),
                                                static_cast<unsigned>(d.block[2]), 0, stream_.handle(),
                                                paramsOf(k), nullptr),
                      ("cuLaunchKernel (" + d.symbol + ")").c_str());
        ++device_.launches;
      }
    }
    launched_ = true;
  }
  std::size_t scratchBytes() const override { return scratch_; }
  int kernelCount() const override { return static_cast<int>(dispatches_.size()); }

 private:
  /// Kernel `k`'s parameter pointers into values_ (null: it takes none).
  void** paramsOf(std::size_t k) const { return first_[k] == first_[k + 1] ? nullptr : &params_[first_[k]]; }

  /// Kernel `k`'s node parameters, read from values_.
  CUDA_KERNEL_NODE_PARAMS nodeParams(std::size_t k) const {
    const exec::KernelDispatch& d = dispatches_[k];
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = functions_[k];
    p.gridDimX = grids_[k][0];
    p.gridDimY = grids_[k][1];
    p.gridDimZ = grids_[k][2];
    p.blockDimX = static_cast<unsigned>(d.block[0]);
    p.blockDimY = static_cast<unsigned>(d.block[1]);
    p.blockDimZ = static_cast<unsigned>(d.block[2]);
    p.kernelParams = paramsOf(k);
    return p;
  }

  /// The kernels as a chain of graph nodes with the current values_,
  /// instantiated. False, with graphs turned off for this trace (it then
  /// launches kernel by kernel), when the driver refuses a step: graphs are
  /// an optimisation, never a reason for a step to fail.
  bool buildGraph() const {
    const CudaApi& api = *device_.api;
    CUresult r = api.graphCreate(&graph_, 0);
    CUgraphNode previous = nullptr;
    for (std::size_t k = 0; r == CUDA_SUCCESS && k < dispatches_.size(); ++k) {
      const CUDA_KERNEL_NODE_PARAMS p = nodeParams(k);
      CUgraphNode node = nullptr;
      r = api.graphAddKernelNode(&node, graph_, previous ? &previous : nullptr, previous ? 1 : 0, &p);
      nodes_.push_back(node);
      previous = node;
    }
    if (r == CUDA_SUCCESS) r = api.graphInstantiate(&exec_, graph_, 0);
    if (r != CUDA_SUCCESS) {
      exec::log().info("{}: a compiled trace's {} kernels launch one by one: building their CUDA graph failed: {}",
                       device_.device.str(), dispatches_.size(), api.describe(r));
      dropGraph();
      graphs_ = false;
      return false;
    }
    nodeValues_ = values_;
    nodeGrids_ = grids_;
    ++device_.graphsBuilt;
    return true;
  }

  /// Launches the graph, first updating the nodes whose parameters changed.
  void launchGraph() const {
    bool updated = false;
    for (std::size_t k = 0; k < dispatches_.size(); ++k) {
      const auto from = static_cast<std::ptrdiff_t>(first_[k]), to = static_cast<std::ptrdiff_t>(first_[k + 1]);
      if (std::equal(values_.begin() + from, values_.begin() + to, nodeValues_.begin() + from) &&
          grids_[k] == nodeGrids_[k])
        continue;
      const CUDA_KERNEL_NODE_PARAMS p = nodeParams(k);
      device_.check(device_.api->graphExecKernelNodeSetParams(exec_, nodes_[k], &p),
                    ("cuGraphExecKernelNodeSetParams (" + dispatches_[k].symbol + ")").c_str());
      std::copy(values_.begin() + from, values_.begin() + to, nodeValues_.begin() + from);
      nodeGrids_[k] = grids_[k];
      updated = true;
    }
    device_.check(device_.api->graphLaunch(exec_, stream_.handle()), "cuGraphLaunch (a compiled trace)");
    device_.launches += dispatches_.size();
    ++device_.graphLaunches;
    if (updated) ++device_.graphUpdates;
  }

  void dropGraph() const {
    if (exec_) device_.api->graphExecDestroy(exec_);
    if (graph_) device_.api->graphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    nodes_.clear();
    nodeValues_.clear();
    nodeGrids_.clear();
  }

  CudaDeviceHandle& device_;
  CudaStream& stream_;
  CUmodule module_;
  std::vector<exec::KernelDispatch> dispatches_;
  std::vector<exec::LaunchExpr> program_;  ///< a dynamic-shape kernel's launch program
  uint32_t inputs_, outputs_;
  std::size_t scratch_;
  int sizes_;
  std::vector<CUfunction> functions_;  ///< one per dispatch
  // Graph state, guarded by mutex_ (launch() is const and may be called
  // from several threads).
  mutable std::mutex mutex_;
  mutable bool graphs_;
  mutable bool launched_ = false;
  mutable CUgraph graph_ = nullptr;
  mutable CUgraphExec exec_ = nullptr;
  mutable std::vector<CUgraphNode> nodes_;
  // Launch state, guarded by mutex_ too: this launch's parameter values
  // (kernel k's from first_[k] to first_[k + 1]), pointers to each, and the
  // values exec_'s nodes hold (same layout).
  std::vector<std::size_t> first_;
  mutable std::vector<uint64_t> values_;
  mutable std::vector<void*> params_;
  mutable std::vector<uint64_t> nodeValues_;
  // This launch's launch-program values and grids, and the grids exec_'s
  // nodes hold.
  mutable std::vector<int64_t> steps_;
  mutable std::vector<std::array<uint32_t, 3>> grids_;
  mutable std::vector<std::array<uint32_t, 3>> nodeGrids_;
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
