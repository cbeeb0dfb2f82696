//===- ElementwiseFusion.h - Linalg fusion with Kiln's control --*- C++ -*-===//
//
// Upstream linalg-fuse-elementwise-ops fuses every single-use elementwise
// producer into its consumer and folds reshapes by expanding loops. Two
// results of that are wrong for Kiln: a producer fused into a consumer that
// reads it through a broadcast is recomputed for every broadcast element (a
// tanh feeding the next matmul ran 256 times per element, and a rank-0
// reduction fused into a broadcast consumer kept adding into its
// accumulator: wrong results), and a matmul turned into a generic by reshape
// folding is never handed to the runtime's GEMM. This step runs the same
// patterns with a control that allows only fusions computing each produced
// element once and never touches named contractions. Two more choices are
// Kiln's own: a short arithmetic producer used by several consumers is
// recomputed in each instead of written out and read back (a batch norm's
// x - mu fed a reduction and a scale, a full pass over memory each), a
// reshape is not folded into a reduction over outer loops (it would stand
// between that reduction and its elementwise producer), and sibling
// reductions over the same outer loops that read a tensor the same way run
// as one generic (a batch norm's backward sums, one pass instead of three).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_ELEMENTWISEFUSION_H
#define KILN_JIT_TARGETS_CPU_ELEMENTWISEFUSION_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace kiln::jit::cpu {

/// Fuses elementwise linalg.generic producers into consumers that read each
/// produced element exactly once (the consumer's indexing map for it is a
/// permutation), copying short arithmetic producers with one full-size
/// input into each such consumer when they have several; folds reshapes
/// into generic ops by expansion (not into reductions over outer loops),
/// folds constants, and merges sibling reductions over outer loops that
/// share an input; named linalg ops (matmul, batch_matmul, fill, ...) are
/// never fused or generalised.
mlir::LogicalResult fuseElementwiseOps(mlir::ModuleOp module);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_ELEMENTWISEFUSION_H
