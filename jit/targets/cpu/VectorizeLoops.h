//===- VectorizeLoops.h - Element loops as vector loops before LLVM -*- C++ -*-===//
//
// LLVM's loop vectoriser was the largest single cost of a first compile:
// on the transformer bench's 889-op training step (Xeon, one core) it and
// the cleanup of what it made took 67 of LLVM's 102 ms, which was a third of
// the time from a hot trace to its kernel, for loops Kiln already knows to
// be parallel, of static length and contiguous. Kiln writes those loops as
// vector loops itself, which costs a walk of each body; LLVM's vectoriser
// then skips them (`llvm.loop.isvectorized`) and still handles the rest
// (sums, strided and gathered accesses, dynamic lengths).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_VECTORIZELOOPS_H
#define KILN_JIT_TARGETS_CPU_VECTORIZELOOPS_H

#include "mlir/IR/Operation.h"

namespace kiln::jit::cpu {

/// Rewrites each innermost scf.for under `root` that kiln-cpu-mark-parallel-
/// loops marked parallel (a parallel access group in its annotation), that
/// carries no value, runs from a constant to a constant by 1 a multiple of
/// `lanes` times, and whose straight-line body holds only
///  - loads and stores where the loop's variable indexes a dimension of unit
///    stride followed only by dimensions of size 1 (collapsed into it before
///    the loop: [r, j, 0] of [8, 64, 1]) and the other indices do not change
///    in the loop, of elements of whole bytes (no i1, whose vectors are
///    bit-packed), stores not `nontemporal` (StreamingStores.h aligns those
///    in LLVM),
///  - loads whose indices do not change in the loop (broadcast),
///  - elementwise arith and math ops (not llvm.intr.ldexp, whose MLIR form
///    takes a scalar exponent only), and
///  - prefetches indexed like the loads (one per vector, as LLVM's marker
///    made them: NextRowPrefetch.h),
/// as a loop over vectors of `lanes` elements (times the interleave count
/// the annotation asks for, when the length divides: LLVM's code generator
/// splits the wide vectors into that many independent ones). Values that do
/// not change in the loop stay scalar and are broadcast where a vector op
/// uses them. The new loop keeps the annotation and is marked vectorised.
/// Returns the number of loops rewritten.
int vectorizeParallelLoops(mlir::Operation *root, unsigned lanes);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_VECTORIZELOOPS_H
