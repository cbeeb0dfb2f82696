//===- Passes.td - The GPU pipelines' own front-half steps -*- tablegen -*-===//
//
// The stages both GPU pipelines run between the linalg conversion's loops
// and the outlined kernels (jit/targets/gpu/GpuStages.h, and for
// dynamic-shape kernels DynamicArguments.h). lowerToGpuLaunches calls them
// as functions; kiln-opt runs them as these passes for their lit tests in
// test/lit/Target/Gpu, one named after each.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_GPU_PASSES_TD
#define KILN_JIT_TARGETS_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnGpuSplatGlobalsToFills : Pass<"kiln-gpu-splat-globals-to-fills", "::mlir::ModuleOp"> {
  let summary = "Splat constant buffers as filled allocations";
  let description = [{
    Each `memref.get_global` of a splat constant in a defined function
    becomes a `memref.alloc` filled with the splat value (`linalg.fill`):
    device code cannot read host globals. See `splatGlobalsToFills`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnGpuHoistParallelLoops : Pass<"kiln-gpu-hoist-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "scf.for k { scf.parallel j } as scf.parallel j { scf.for k }";
  let description = [{
    A reduction over a leading axis lowers to a serial loop around a
    parallel one, each j accumulating into its own element: the nest is
    interchanged so that it maps to one thread per element. See
    `hoistParallelLoops`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"];
}

def KilnGpuSerializeNestedParallelLoops
    : Pass<"kiln-gpu-serialize-nested-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "Parallel loops left inside serial loops become serial";
  let description = [{
    A serial loop runs as one one-thread launch (`kiln-gpu-launch-serial-work`)
    and a launch cannot contain launches, so the parallel loops inside it
    become `scf.for` nests. See `serializeNestedParallelLoops`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"];
}

def KilnGpuRowKernels : Pass<"kiln-gpu-row-kernels", "::mlir::func::FuncOp"> {
  let summary = "Softmax- and layer_norm-shaped runs of nests as one launch of a block per row";
  let description = [{
    A run of top-level parallel nests over one static row space that holds
    a row reduction becomes one `gpu.launch` of a block per row, each nest
    in turn for the block's row, `gpu.barrier` between them, where running
    them row by row is exact. Workgroup memory is a workgroup attribution.
    See `launchRowKernels`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnGpuRowReductions : Pass<"kiln-gpu-row-reductions", "::mlir::func::FuncOp"> {
  let summary = "Reductions along rows of 32 or more as a block per row";
  let description = [{
    Each top-level row reduction (`scf.parallel rows { scf.for k }` over a
    contiguous last axis of 32 or more) becomes a `gpu.launch` of one block
    per row: strided partial results, a tree of halvings in workgroup
    memory, thread 0 combining into the accumulator. The number of rows
    may be dynamic. See `launchRowReductions`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnGpuTileParallelLoops : Pass<"kiln-gpu-tile-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "Top-level parallel loops as loops of tiles of threads";
  let description = [{
    Tiles each top-level `scf.parallel` into a loop of blocks around a
    loop of threads (256 threads, 32 x 8 for two dimensions); a large
    element-wise nest (2^20 iterations or more, 4 tiles or more along its
    contiguous dimension) gives each thread 4 elements a block's width
    apart, loading all 4 before it computes. See `tileParallelLoops`.
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnGpuFoldTiledBounds : Pass<"kiln-gpu-fold-tiled-bounds", "::mlir::func::FuncOp"> {
  let summary = "Constant steps and affine.min bounds for the conversion to launches";
  let description = [{
    Folds the tiled loops' bounds (affine.min and affine.apply) without
    merging a loop of threads with its loop of blocks, as canonicalization
    would. See `foldTiledLoopBounds`.
  }];
}

def KilnGpuLaunchSerialWork : Pass<"kiln-gpu-launch-serial-work", "::mlir::func::FuncOp"> {
  let summary = "Host work left between launches as one-thread launches";
  let description = [{
    Each run of top-level operations other than launches, constants, views
    and the return (serial loops, plain stores) becomes a `gpu.launch` of
    one thread, so the GPU does it in order with the other kernels. See
    `launchSerialWork`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnGpuSinkIntoLaunches : Pass<"kiln-gpu-sink-into-launches", "::mlir::func::FuncOp"> {
  let summary = "Views, reshapes and index arithmetic into the launches that use them";
  let description = [{
    So that each launch passes base buffers (bare pointers) and integers.
    Views of the scratch buffer move only with `sink-scratch-views`
    (NVPTX; SPIR-V passes them as arguments of their own type). A scalar
    load (a value an earlier launch wrote) moves too, where it reads the
    same value in the launch: nothing between them may write its bytes, nor
    the launch itself unless it is one thread. See `sinkIntoLaunches`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"];
  let options = [
    Option<"sinkScratchViews", "sink-scratch-views", "bool", "true", "memref.view moves into the launches too">,
  ];
}

def KilnGpuMergeModules : Pass<"kiln-gpu-merge-modules", "::mlir::ModuleOp"> {
  let summary = "Every outlined kernel in the first gpu.module";
  let description = [{
    After `gpu-kernel-outlining`: one module for the whole trace (one PTX
    or SPIR-V binary), each kernel named after the module it came from, the
    launches pointed at it. See `mergeGpuModules`.
  }];
}

def KilnGpuForwardDynamicResults : Pass<"kiln-gpu-forward-dynamic-results", "::mlir::func::FuncOp"> {
  let summary = "Dynamic-shape results written into their out-params";
  let description = [{
    A result of dynamic shape computed into an allocation and then copied
    into its out-param (buffer-results-to-out-params hoists static
    allocations only): when the copy is the last use of the allocation and
    its views and the out-param's only use, the allocation becomes the
    out-param and the copy goes. See `forwardDynamicResults`.
  }];
  let options = [
    Option<"numInputs", "num-inputs", "unsigned", "0", "Input memrefs (the leading arguments)">,
    Option<"numOutputs", "num-outputs", "unsigned", "0", "Out-params (the arguments after the inputs)">,
  ];
}

def KilnGpuFlattenDynamicViews : Pass<"kiln-gpu-flatten-dynamic-views", "::mlir::func::FuncOp"> {
  let summary = "N-D views of dynamic extents as 1-D views expanded to their shape";
  let description = [{
    SPIR-V lowers loads of memrefs with static strides only: a view of the
    scratch buffer with dynamic extents and rank above 1 becomes a 1-D view
    of its element count and a `memref.expand_shape`, which
    fold-memref-alias-ops folds into the loads. See `flattenDynamicViews`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"];
}

def KilnGpuResolveDynamicDims : Pass<"kiln-gpu-resolve-dynamic-dims", "::mlir::func::FuncOp"> {
  let summary = "memref.dim of views, reshapes and casts as their size operands";
  let description = [{
    The loops of a dynamic-shape kernel ask their buffers for their
    extents; those become the sizes the buffers were built with, host code
    a launch program can compute. See `resolveDynamicDims`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"];
}

#endif // KILN_JIT_TARGETS_GPU_PASSES_TD
