//===- ReductionPromotion.h - Reduction accumulators in registers -*- C++ -*-===//
//
// Linalg reductions lowered to loops accumulate in memory: every iteration
// of the inner scf.for loads the accumulator element, combines it with the
// input and stores it back. LLVM cannot keep it in a register when the input
// and the accumulator are views of the same scratch buffer (it cannot prove
// they do not overlap), so the loop runs at the latency of a load-add-store
// chain and never vectorises. This step does what LLVM cannot prove: it
// carries the accumulator as an iteration argument.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_REDUCTIONPROMOTION_H
#define KILN_JIT_TARGETS_CPU_REDUCTIONPROMOTION_H

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

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_REDUCTIONPROMOTION_H
