//===- ScalarPromotion.h - Loop-invariant memory in registers ---*- C++ -*-===//
//
// Kernel temporaries are views of one scratch buffer, so LLVM cannot prove
// that a store to one temporary leaves another alone. Two costly results:
// a reduction's accumulator is loaded, combined and stored back on every
// iteration (a latency chain that never vectorises), and an elementwise loop
// that reads a per-row value (softmax's row max) reloads it every iteration
// and is not vectorised. These steps do what LLVM cannot prove, from the
// scratch layout Kiln chose (distinct arguments and disjoint scratch ranges
// do not overlap): accumulators become iteration arguments, and invariant
// loads move out of the inner loop.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_SCALARPROMOTION_H
#define KILN_JIT_TARGETS_CPU_SCALARPROMOTION_H

#include "mlir/IR/BuiltinOps.h"

namespace kiln::jit::cpu {

/// In every scf.for of `module` whose body loads one memref element at
/// loop-invariant indices and stores a value back to the same element, with
/// no other access in the body to memory that may overlap it, loads the
/// element once before the loop, carries it as an iteration argument and
/// stores it once after. Additions whose accumulator is wider than the value
/// added (f32 data summed in f64) are marked reassociable, so LLVM vectorises
/// them; narrower sums keep their order (the interpreter's). Returns the
/// number of accumulators promoted.
int promoteReductionAccumulators(mlir::ModuleOp module);

/// Turns every top-level multi-dimensional scf.parallel into a parallel loop
/// over its first dimension around scf.for loops over the others (the inner
/// dimensions run serially in one task anyway), then moves loads at
/// loop-invariant indices out of each innermost scf.for when nothing in the
/// loop may store to them. Returns the number of loads hoisted.
int hoistInvariantLoads(mlir::ModuleOp module);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_SCALARPROMOTION_H
