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
/// pairs) may alias one another. Returns the number of loops merged away.
int fuseRowLoops(mlir::func::FuncOp kernel, const std::set<unsigned> &sharedArgs);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_ROWFUSION_H
