//===- GpuLaunches.cpp - Trace graphs to outlined GPU kernels -----------===//

#include "jit/targets/gpu/GpuLaunches.h"

#include <chrono>
#include <functional>
#include <optional>

#include "jit/Importer.h"
#include "jit/PipelineSupport.h"
#include "jit/targets/cpu/CpuTransforms.h"
#include "jit/targets/cpu/DynamicKernel.h"
#include "jit/targets/cpu/ElementwiseFusion.h"
#include "jit/targets/cpu/HostTarget.h"
#include "jit/targets/gpu/DynamicArguments.h"
#include "jit/targets/gpu/GpuStages.h"
#include "jit/targets/gpu/LaunchProgramBuilder.h"
#include "runtime/support/Settings.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit::gpu {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// The kernel's host part, read as launches: every gpu.launch_func, with
/// a constant block and a grid that is constant or (a dynamic-shape kernel)
/// computed from the sizes, its arguments the kernel's buffers (inputs,
/// outputs, views into the scratch buffer), constants and values computed
/// from the sizes (LaunchProgramBuilder). Anything else on the host is work
/// the GPU would not do: an error.
bool dispatchesOf(mlir::func::FuncOp kernel, const trace::TraceGraph &graph, unsigned numSizes, const char *target,
                  exec::CompileResult &result) {
  const unsigned numInputs = graph.inputs.size(), numOutputs = graph.outputs.size();
  mlir::Block &entry = kernel.getBody().front();
  LaunchProgramBuilder program(&entry, numInputs + numOutputs, numSizes);
  std::function<bool(mlir::Value, exec::DispatchArg &)> argOf = [&](mlir::Value v, exec::DispatchArg &out) -> bool {
    // A reshaped buffer (identity layout) is the same pointer.
    if (isReshape(v.getDefiningOp()))
      return argOf(v.getDefiningOp()->getOperand(0), out);
    if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v); arg && llvm::isa<mlir::MemRefType>(arg.getType())) {
      const unsigned i = arg.getArgNumber();
      if (i < numInputs)
        out = {exec::DispatchArg::Kind::Input, static_cast<int64_t>(i)};
      else if (i < numInputs + numOutputs)
        out = {exec::DispatchArg::Kind::Output, static_cast<int64_t>(i - numInputs)};
      else
        out = {exec::DispatchArg::Kind::Scratch, 0};  // the trailing scratch buffer
      return true;
    }
    if (auto view = v.getDefiningOp<mlir::memref::ViewOp>()) {
      if (auto shift = constantOf(view.getByteShift())) {
        out = {exec::DispatchArg::Kind::Scratch, *shift};
        return true;
      }
      auto step = numSizes > 0 ? program.stepOf(view.getByteShift()) : std::nullopt;
      if (!step)
        return false;
      out = {exec::DispatchArg::Kind::ScratchAt, *step};
      return true;
    }
    if (auto c = constantOf(v)) {
      out = {exec::DispatchArg::Kind::Index, *c};
      return true;
    }
    auto step = numSizes > 0 ? program.stepOf(v) : std::nullopt;
    if (!step)
      return false;
    out = {exec::DispatchArg::Kind::Value, *step};
    return true;
  };
  for (mlir::Operation &op : entry) {
    if (llvm::isa<mlir::arith::ConstantOp, mlir::memref::ViewOp, mlir::func::ReturnOp>(op) || isReshape(&op))
      continue;
    // The sizes' arithmetic: the launches read what they need of it.
    if (numSizes > 0 && op.getDialect() && op.getDialect()->getNamespace() == "arith" &&
        mlir::isMemoryEffectFree(&op))
      continue;
    auto launch = llvm::dyn_cast<mlir::gpu::LaunchFuncOp>(op);
    if (!launch) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << op.getName();
      result.error = std::string(target) + ": the kernel keeps host work the GPU pipeline does not map (" + text + ")";
      return false;
    }
    exec::KernelDispatch d;
    d.symbol = launch.getKernelName().str();
    const mlir::gpu::KernelDim3 grid = launch.getGridSizeOperandValues(),
                                block = launch.getBlockSizeOperandValues();
    const mlir::Value dims[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
    for (int i = 0; i < 6; ++i) {
      if (auto c = constantOf(dims[i])) {
        (i < 3 ? d.grid[i] : d.block[i - 3]) = *c;
        continue;
      }
      auto step = i < 3 && numSizes > 0 ? program.stepOf(dims[i]) : std::nullopt;
      if (!step) {
        result.error = std::string(target) + ": kernel " + d.symbol + " has a launch size known only at run time";
        return false;
      }
      d.gridSteps[i] = static_cast<int32_t>(*step);
    }
    for (mlir::Value v : launch.getKernelOperands()) {
      exec::DispatchArg a;
      if (!argOf(v, a)) {
        result.error = std::string(target) + ": an argument of kernel " + d.symbol +
                       " is neither a buffer, a constant nor computed from the sizes";
        return false;
      }
      d.args.push_back(a);
    }
    result.dispatches.push_back(std::move(d));
  }
  result.launchProgram = program.program();
  return true;
}

} // namespace

mlir::OwningOpRef<mlir::ModuleOp> lowerToGpuLaunches(mlir::MLIRContext &context, const trace::TraceGraph &graph,
                                                     const std::string &name, const LaunchOptions &options,
                                                     const std::string &diagnostics, exec::CompileResult &result) {
  const std::string target = options.target;
  const std::string dumpDir = exec::irDumpDirectory();
  auto t0 = Clock::now();
  const std::string kernelName = "kernel_" + name;
  std::string error;
  auto module = importTraceGraph(context, graph, kernelName, error);
  if (!module) {
    result.error = error;
    return nullptr;
  }
  result.timings.importMs = msSince(t0);
  // KILN_DUMP_IR: <key>.<target>-<n>-<stage>.mlir after each stage.
  auto dump = [&](const char *stage) { dumpModule(dumpDir, name, (target + "-" + stage).c_str(), *module); };
  dump("0-kiln");
  auto fail = [&](const std::string &stage) -> mlir::OwningOpRef<mlir::ModuleOp> {
    result.error = target + ": stage " + stage + " failed: " + diagnostics;
    return nullptr;
  };

  auto t1 = Clock::now();
  if (!runPassPipeline(*module, cpu::kToLinalg) || mlir::failed(cpu::fuseElementwiseOps(*module)) ||
      !runPassPipeline(*module, cpu::kAfterFusion))
    return fail("kiln-to-linalg");
  dump("1-linalg");
  if (auto k = module->lookupSymbol<mlir::func::FuncOp>(kernelName))
    cpu::makeResultsDistinct(k);
  if (!runPassPipeline(*module, cpu::kBufferize))
    return fail("bufferize");
  auto kernel = module->lookupSymbol<mlir::func::FuncOp>(kernelName);
  if (!kernel)
    return fail("bufferize (no kernel function)");
  // Dynamic-shape kernels: the sizes follow the outputs (DynamicKernel.h),
  // the scratch buffer follows them.
  const auto numSizes = static_cast<unsigned>(cpu::dynamicSizeCount(graph));
  if (numSizes > 0 && mlir::failed(cpu::moveSizeArguments(kernel, graph, numSizes)))
    return fail("dynamic sizes");
  if (numSizes > 0)
    forwardDynamicResults(kernel, graph.inputs.size(), graph.outputs.size());
  splatGlobalsToFills(*module, kernel);
  int64_t scratchBytes = 0;
  // One slot per temporary: the row kernels' exactness test (rowByRowIsExact)
  // and the launches have not been checked with shared bytes on a GPU.
  if (mlir::failed(cpu::assignScratch(kernel, scratchBytes, numSizes > 0 ? &result.dynamicScratch : nullptr)))
    return fail("scratch");
  if (numSizes > 0) {
    if (options.flatDynamicArguments) {
      if (mlir::failed(bindFlatDynamicArguments(kernel, graph, numSizes)))
        return fail("dynamic arguments");
      flattenDynamicViews(kernel);
    } else if (mlir::failed(cpu::bindDynamicArguments(kernel, graph, numSizes))) {
      return fail("dynamic arguments");
    }
  }
  dump("2-bufferized");
  cpu::copiesToLinalg(kernel);
  if (!runPassPipeline(*module, "convert-linalg-to-parallel-loops,canonicalize,cse"))
    return fail("loops");
  if (numSizes > 0)
    resolveDynamicDims(kernel);
  dump("3-loops");  // what the kiln-gpu-* loop passes start from
  hoistParallelLoops(kernel);
  serializeNestedParallelLoops(kernel);
  launchRowKernels(kernel, options.workgroupMemorySpace);
  launchRowReductions(kernel, options.workgroupMemorySpace);
  tileParallelLoops(kernel);
  // Tiles onto blocks, points onto threads, the innermost (contiguous)
  // dimension onto x for coalesced access.
  if (!runPassPipeline(*module, "func.func(gpu-map-parallel-loops{mapping-policy=innermost-first})"))
    return fail("gpu mapping");
  foldTiledLoopBounds(kernel);
  if (!runPassPipeline(*module, "func.func(convert-parallel-loops-to-gpu)"))
    return fail("gpu mapping");
  launchSerialWork(kernel);
  if (numSizes > 0)
    resolveDynamicDims(kernel);  // the grids' extents
  if (!runPassPipeline(*module, "lower-affine,canonicalize,cse"))
    return fail("gpu launches");
  sinkIntoLaunches(kernel, options.sinkScratchViews);
  dump("4-launches");
  if (!runPassPipeline(*module, "gpu-kernel-outlining,canonicalize"))
    return fail("gpu outlining");
  if (mlir::failed(mergeGpuModules(*module)))
    return fail("merge gpu modules (no kernel was outlined)");
  dump("5-gpu");
  if (!dispatchesOf(kernel, graph, numSizes, options.target, result))
    return nullptr;
  result.dynamicSizes = static_cast<int>(numSizes);
  result.scratchBytes = static_cast<std::size_t>(scratchBytes);
  result.kernelCount = static_cast<int>(result.dispatches.size());
  result.timings.lowerMs = msSince(t1);
  return module;
}

} // namespace kiln::jit::gpu
