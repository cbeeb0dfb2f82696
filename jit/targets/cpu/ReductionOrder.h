//===- ReductionOrder.h - Reduction loops outside-in: kept, then reduced -*- C++ -*-===//
//
// A reduction's linalg.generic iterates in its input's dimension order, so a
// batch norm's per-channel sum over [N, C, H, W] (axes 0, 2, 3) became
// `for n { parallel c { for h { for w (56) } } }`: a parallel launch per
// image, 64 tasks of one 3136-element plane each, and an inner loop of 56
// whose vectorised sum ends in a horizontal add every row. The compiled sum
// ran at a third of the interpreter's speed, and a ResNet block's batch norms
// cost more than its convolutions' backward passes. Reordering the loops
// (kept dimensions outside, reduced ones inside, innermost still innermost)
// and merging adjacent reduced dimensions that are contiguous in memory
// gives `parallel c { for n { for hw (3136) } }`: one launch, long
// vectorised sums.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_REDUCTIONORDER_H
#define KILN_JIT_TARGETS_CPU_REDUCTIONORDER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// Whether `op` is a linalg.generic with a parallel loop inside a reduction
/// loop: it reduces outer loops (a batch norm's sum over N, H and W of
/// [N, C, H, W]), unlike a row reduction (softmax's) or a full one.
bool reducesOuterLoops(mlir::Operation *op);

/// In `fn` (bufferized), every linalg.generic whose innermost loop is a
/// reduction and that has a parallel loop after a reduction loop is
/// interchanged so that its parallel loops come first, in their order, then
/// its reduction loops, in theirs (the innermost stays innermost). Then
/// adjacent reduction loops that every operand's indexing map keeps
/// adjacent and in order are merged into one where all operands are static
/// memrefs with the identity layout. Returns the number of generics
/// reordered.
int orderReductionLoops(mlir::func::FuncOp fn);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_REDUCTIONORDER_H
