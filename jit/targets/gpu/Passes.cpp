//===- Passes.cpp - The GPU pipelines' own front-half steps as passes ----===//

#include "jit/targets/gpu/Passes.h"

#include "jit/targets/gpu/DynamicArguments.h"
#include "jit/targets/gpu/GpuStages.h"

namespace kiln::jit::gpu {

#define GEN_PASS_DEF_KILNGPUSPLATGLOBALSTOFILLS
#define GEN_PASS_DEF_KILNGPUHOISTPARALLELLOOPS
#define GEN_PASS_DEF_KILNGPUSERIALIZENESTEDPARALLELLOOPS
#define GEN_PASS_DEF_KILNGPUROWKERNELS
#define GEN_PASS_DEF_KILNGPUROWREDUCTIONS
#define GEN_PASS_DEF_KILNGPUTILEPARALLELLOOPS
#define GEN_PASS_DEF_KILNGPUFOLDTILEDBOUNDS
#define GEN_PASS_DEF_KILNGPULAUNCHSERIALWORK
#define GEN_PASS_DEF_KILNGPUSINKINTOLAUNCHES
#define GEN_PASS_DEF_KILNGPUMERGEMODULES
#define GEN_PASS_DEF_KILNGPUFORWARDDYNAMICRESULTS
#define GEN_PASS_DEF_KILNGPUFLATTENDYNAMICVIEWS
#define GEN_PASS_DEF_KILNGPURESOLVEDYNAMICDIMS
#include "jit/targets/gpu/Passes.h.inc"

namespace {

/// A pass over each defined function that runs `stage` on it.
#define KILN_GPU_FUNCTION_PASS(Name, call)                                                                             \
  struct Name : impl::KilnGpu##Name##Base<Name> {                                                                      \
    using Base::Base;                                                                                                  \
    void runOnOperation() override {                                                                                   \
      mlir::func::FuncOp fn = getOperation();                                                                          \
      if (!fn.isExternal())                                                                                            \
        call;                                                                                                          \
    }                                                                                                                  \
  };

KILN_GPU_FUNCTION_PASS(HoistParallelLoops, hoistParallelLoops(fn))
KILN_GPU_FUNCTION_PASS(SerializeNestedParallelLoops, serializeNestedParallelLoops(fn))
KILN_GPU_FUNCTION_PASS(RowKernels, launchRowKernels(fn, nullptr))
KILN_GPU_FUNCTION_PASS(RowReductions, launchRowReductions(fn, nullptr))
KILN_GPU_FUNCTION_PASS(TileParallelLoops, tileParallelLoops(fn))
KILN_GPU_FUNCTION_PASS(FoldTiledBounds, foldTiledLoopBounds(fn))
KILN_GPU_FUNCTION_PASS(LaunchSerialWork, launchSerialWork(fn))
KILN_GPU_FUNCTION_PASS(SinkIntoLaunches, sinkIntoLaunches(fn, sinkScratchViews))
KILN_GPU_FUNCTION_PASS(ForwardDynamicResults, forwardDynamicResults(fn, numInputs, numOutputs))
KILN_GPU_FUNCTION_PASS(FlattenDynamicViews, flattenDynamicViews(fn))
KILN_GPU_FUNCTION_PASS(ResolveDynamicDims, resolveDynamicDims(fn))

#undef KILN_GPU_FUNCTION_PASS

struct SplatGlobalsToFills : impl::KilnGpuSplatGlobalsToFillsBase<SplatGlobalsToFills> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<mlir::func::FuncOp>())
      if (!fn.isExternal())
        splatGlobalsToFills(getOperation(), fn);
  }
};

struct MergeModules : impl::KilnGpuMergeModulesBase<MergeModules> {
  void runOnOperation() override {
    if (mlir::failed(mergeGpuModules(getOperation()))) {
      getOperation().emitError("kiln: no outlined kernel, or a launch of a kernel no module has");
      signalPassFailure();
    }
  }
};

} // namespace

} // namespace kiln::jit::gpu
