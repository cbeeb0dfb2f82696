//===- DynamicKernel.h - Dynamic-shape kernels on the CPU -------*- C++ -*-===//
//
// A trace structure run at many sizes gets one dynamic-shape kernel: the
// importer gives it `?` extents and trailing `index` arguments holding the
// sizes (see kDynamicSizesAttr). The bare-pointer entry cannot carry sizes,
// so the runtime passes them in an int64 array after the scratch buffer:
//
//   args = inputs..., outputs..., scratch, sizes  (sizes: int64_t[K])
//
// These steps adapt the bufferized kernel to that entry.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_DYNAMICKERNEL_H
#define KILN_JIT_TARGETS_CPU_DYNAMICKERNEL_H

#include <cstdint>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::jit::cpu {

/// Number of dynamic sizes of `graph` (node extents < 0; 0: a static kernel).
int64_t dynamicSizeCount(const trace::TraceGraph &graph);

/// Right after bufferization: moves the `numSizes` size arguments (after the
/// inputs) behind the out-params, so the kernel takes inputs, outputs, sizes
/// (the order buffer donation and the entry expect), and replaces
/// `memref.dim` of input and output arguments by constants or the size
/// arguments (from the graph's extents).
mlir::LogicalResult moveSizeArguments(mlir::func::FuncOp kernel, const trace::TraceGraph &graph,
                                      unsigned numSizes);

/// The extents of input or output argument `arg` (of memref type `type`,
/// identity layout) of a dynamic-shape kernel whose size arguments follow
/// its inputs and outputs: constants from the graph, or those size
/// arguments. Fails, with an error on the kernel, when the type does not
/// match the graph.
mlir::FailureOr<llvm::SmallVector<mlir::OpFoldResult>>
dynamicArgumentSizes(mlir::func::FuncOp kernel, const trace::TraceGraph &graph, unsigned arg, mlir::MemRefType type,
                     mlir::OpBuilder &b);

/// Before lowering to loops: gives each input and output argument with
/// dynamic extents a rank-0 type (a bare pointer) and rebuilds its memref at
/// the kernel's entry with memref.reinterpret_cast from the size arguments
/// (row-major strides).
mlir::LogicalResult bindDynamicArguments(mlir::func::FuncOp kernel, const trace::TraceGraph &graph,
                                         unsigned numSizes);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_DYNAMICKERNEL_H
