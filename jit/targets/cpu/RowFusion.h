//===- RowFusion.h - One parallel loop over rows for row-wise nests -*- C++ -*-===//
//
// Softmax and layer_norm lower to several loop nests over the same rows
// (max, exp, sum, divide), each a separate pass over memory and a separate
// parallel dispatch. When every access that could conflict between two
// adjacent nests touches only the row of the current iteration, the nests
// can run as one loop over rows: each row's data stays in the L1 cache from
// the first nest to the last.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_ROWFUSION_H
#define KILN_JIT_TARGETS_CPU_ROWFUSION_H

#include <set>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// Merges adjacent top-level one-dimensional scf.parallel loops of `kernel`
/// with equal constant bounds when, for every pair of accesses of the two
/// bodies that may touch the same memory and one of which writes, both use
/// the loop's induction variable as the first index of views that split the
/// same bytes into the same rows. Arguments in `sharedArgs` (donated buffer
/// pairs) of one type may alias one another, as whole buffers (rows of the
/// same bytes of two of them are the same rows). Loads and stores between
/// the loops that touch nothing the first one writes, nor write what it
/// reads, move before it. Returns the number of loops merged away.
int fuseRowLoops(mlir::func::FuncOp kernel, const std::set<unsigned> &sharedArgs);

/// Inside each top-level scf.parallel of `kernel`, merges adjacent
/// innermost scf.for loops with equal constant bounds into one when the
/// second uses no result of the first and every pair of their accesses
/// that may touch the same memory (one a write) is to the same element in
/// the same iteration; ops between them without effects on the first
/// loop's memory move before it. A softmax row then takes three passes
/// (max; exp, store and sum; scale), a layer_norm row three (sum; centre,
/// store and sum of squares; scale). Arguments in `sharedArgs` (donated
/// buffer pairs) may be one buffer: a read of one and a write of the other
/// conflict unless they are the same element in the same iteration. Returns
/// the number of loops merged away.
int fuseLoopsInRows(mlir::func::FuncOp kernel, const std::set<unsigned> &sharedArgs);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_ROWFUSION_H
