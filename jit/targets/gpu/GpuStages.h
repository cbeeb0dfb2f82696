//===- GpuStages.h - The GPU pipelines' front-half stages ------*- C++ -*-===//
//
// The stages lowerToGpuLaunches (GpuLaunches.h) runs between the loops the
// linalg conversion leaves and the outlined kernels, in this order. Each is
// also a pass (Passes.td, `kiln-gpu-*`) that kiln-opt runs for its lit test
// in test/lit/Target/Gpu.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_GPU_GPUSTAGES_H
#define KILN_JIT_TARGETS_GPU_GPUSTAGES_H

#include <optional>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::jit::gpu {

/// A splat constant buffer (a `full` output) becomes a filled allocation:
/// device code cannot read host globals.
void splatGlobalsToFills(mlir::ModuleOp module, mlir::func::FuncOp kernel);

/// A reduction over a leading axis lowers to `scf.for k { scf.parallel j }`:
/// each j accumulates into its own element, so the nest is interchanged to
/// `scf.parallel j { scf.for k }`, one thread per element.
void hoistParallelLoops(mlir::func::FuncOp kernel);

/// Parallel loops nested in a serial loop that hoistParallelLoops could not
/// interchange become serial too: the serial loop runs as one one-thread
/// launch (launchSerialWork), and a launch cannot contain launches.
void serializeNestedParallelLoops(mlir::func::FuncOp kernel);

/// Row kernels: a run of top-level parallel nests over one row space that
/// holds a row reduction and the nests around it that work on the same
/// rows — softmax's max, exp, sum and division; layer_norm's mean,
/// variance and normalisation — becomes one launch of a block per row,
/// each nest in turn for the block's row (element-wise nests strided over
/// the block's threads, per-row work on thread 0, reductions in workgroup
/// memory), barriers between: one launch instead of one per nest, and a
/// row's intermediate values come back from the cache, not memory. Only
/// where running the nests row by row is exact (every store row-local,
/// nothing else touching its bytes but the same row of the same view), and
/// over a row space of static extents. Workgroup memory is a workgroup
/// attribution of the launch when `workgroupMemorySpace` is null (NVVM),
/// else a memref.alloc in that memory space (SPIR-V).
void launchRowKernels(mlir::func::FuncOp kernel, mlir::Attribute workgroupMemorySpace);

/// Row reductions along a contiguous last axis of 32 or more (those no row
/// kernel took) become launches of one block per row (256 threads, or the
/// power of two at or above a shorter row): strided partial results from
/// the operation's identity, a tree of halvings in workgroup memory with
/// barriers between, thread 0 combining into the accumulator. The loop
/// conversion gave a thread per row, whose loads are a row apart:
/// uncoalesced, and one thread's serial walk per row. The number of rows
/// may be dynamic (grid x).
void launchRowReductions(mlir::func::FuncOp kernel, mlir::Attribute workgroupMemorySpace);

/// Tiles every top-level scf.parallel of the kernel into blocks of threads,
/// large element-wise nests (2^20 iterations or more) with 4 elements a
/// thread, a block's width apart, a full block loading all 4 first.
void tileParallelLoops(mlir::func::FuncOp kernel);

/// Folds the tiled loops' steps and bounds to constants (and affine.min
/// bounds to a form with a constant result), as the conversion to launches
/// wants them, without the rest of canonicalization: that would merge each
/// loop of points with its loop of tiles (their bounds are independent) into
/// one loop, which maps onto blocks of one thread.
void foldTiledLoopBounds(mlir::func::FuncOp kernel);

/// Host-side work left after the parallel loops became launches (a
/// reduction over every axis is serial loops, its initial value a plain
/// store): each run of it becomes a one-thread launch, so the GPU does it in
/// order with the other kernels.
void launchSerialWork(mlir::func::FuncOp kernel);

/// Views, reshapes and index arithmetic move into the kernels that use them,
/// so a launch passes its base buffers (identity layouts, as bare pointers);
/// views into the scratch buffer only with `sinkScratchViews`. Scalar loads
/// move where they still read the same value (no write of their bytes in
/// between, nor in the launch unless it is one thread); others stay on the
/// host, which the launch program then refuses.
void sinkIntoLaunches(mlir::func::FuncOp kernel, bool sinkScratchViews);

/// Moves every kernel into the first gpu.module (one PTX module for the whole
/// trace), each named after the module outlining made for it (those names
/// are unique), and points the launches at it.
mlir::LogicalResult mergeGpuModules(mlir::ModuleOp module);

/// The value of an index or integer constant.
std::optional<int64_t> constantOf(mlir::Value v);

/// expand_shape/collapse_shape to an identity layout: a reshape of a dense
/// buffer, the same pointer to a bare-pointer kernel.
bool isReshape(mlir::Operation *op);

} // namespace kiln::jit::gpu

#endif // KILN_JIT_TARGETS_GPU_GPUSTAGES_H
