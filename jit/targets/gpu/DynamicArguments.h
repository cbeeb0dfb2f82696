//===- DynamicArguments.h - Dynamic-extent buffers on GPUs ---*- C++ -*-===//
//
// SPIR-V addresses memory through typed pointers: it lowers loads of a
// memref with static strides only. A dynamic-shape kernel's N-D buffers
// have strides that depend on its sizes, so for SPIR-V they become 1-D
// memrefs (a pointer and a length) expanded to their shape where they are
// used; fold-memref-alias-ops then folds each expansion into the loads and
// stores, as row-major index arithmetic on the sizes. (NVPTX takes them as
// the host does: bare pointers reinterpreted with their sizes,
// cpu::bindDynamicArguments.)
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_GPU_DYNAMICARGUMENTS_H
#define KILN_JIT_TARGETS_GPU_DYNAMICARGUMENTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::jit::gpu {

/// Right after bufferization: a result of dynamic shape was computed into
/// an allocation and copied into its out-param (buffer-results-to-out-params
/// hoists static allocations only): the allocation becomes the out-param,
/// and the copy, a second kernel and a pass over memory, goes.
void forwardDynamicResults(mlir::func::FuncOp kernel, unsigned numInputs, unsigned numOutputs);

/// After cpu::moveSizeArguments and assignScratch: gives each input and
/// output argument with dynamic extents and rank above 1 a 1-D type of its
/// element count and expands it to its shape (from the size arguments,
/// which follow the inputs and outputs) at the kernel's entry.
mlir::LogicalResult bindFlatDynamicArguments(mlir::func::FuncOp kernel, const trace::TraceGraph &graph,
                                             unsigned numSizes);

/// Views of the scratch buffer with dynamic extents and rank above 1 become
/// 1-D views of their element count, expanded to their shape.
void flattenDynamicViews(mlir::func::FuncOp kernel);

/// memref.dim of views, reshapes and casts (the loops of a dynamic-shape
/// kernel ask their buffers for their extents) becomes the size operands
/// they were built with: host code the launch program can compute.
void resolveDynamicDims(mlir::func::FuncOp kernel);

} // namespace kiln::jit::gpu

#endif // KILN_JIT_TARGETS_GPU_DYNAMICARGUMENTS_H
