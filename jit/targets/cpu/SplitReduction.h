//===- SplitReduction.h - Full reductions as parallel partial sums -*- C++ -*-===//
//
// A reduction of a whole tensor to one value has no kept loop, so its loop
// nest had no parallel loop and ran on one thread, with an inner loop of the
// tensor's last extent: a compiled mean of 3.2 M floats took 2.0 ms where
// the interpreter's took 0.5 ms (a loss, a gradient's squared norm). Split
// into partial reductions over equal chunks of the flattened tensor (a
// parallel loop) and one short reduction of the partials, it runs on every
// thread with long contiguous inner loops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_SPLITREDUCTION_H
#define KILN_JIT_TARGETS_CPU_SPLITREDUCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// Elements below which a full reduction stays one serial loop.
inline constexpr int64_t kSplitReductionElements = int64_t{1} << 16;

/// In `fn` (tensors), every linalg.generic that reduces all its loops (at
/// least kSplitReductionElements iterations, static extents, inputs read
/// through identity maps, one result) has its loops merged into one and is
/// split by upstream linalg::splitReduction into a [chunks, elements/chunks]
/// generic whose chunk loop is parallel and a reduction of the chunks'
/// partial results. Returns the number of reductions split.
int splitFullReductions(mlir::func::FuncOp fn);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_SPLITREDUCTION_H
