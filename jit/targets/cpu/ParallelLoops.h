//===- ParallelLoops.h - Innermost loops whose iterations are independent -*- C++ -*-===//
//
// A compiled optimizer step updates its parameters in place: the runtime
// passes a donated input's buffer as its output's (BufferDonation.h), so
// those two kernel arguments alias and cannot be `noalias`. LLVM's loop
// vectoriser then guards every loop over them with a runtime overlap check,
// which an exact alias fails: the Adam update of an MLP ran as scalar code
// (vdivss, vsqrtss), about 15 % of its compiled step. Kiln knows what LLVM
// cannot, that a donated pair is read and written at the same element, so it
// marks the innermost loops whose iterations touch disjoint elements as
// parallel (`llvm.loop.parallel_accesses` on the loop, `llvm.access.group` on
// its memory accesses) and LLVM vectorises them without the check.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_PARALLELLOOPS_H
#define KILN_JIT_TARGETS_CPU_PARALLELLOOPS_H

#include "mlir/IR/Operation.h"

namespace kiln::jit::cpu {

/// Gives each innermost scf.for under `root` whose iterations provably
/// touch disjoint elements an `llvm.loop_annotation` with a parallel access
/// group of its own. Such a loop has a straight-line body of loads, stores
/// and ops without memory effects, and every store writes one element per
/// iteration (the loop's variable is one of its indices, the others come
/// from outside the loop) that no other iteration's access touches: any
/// other access that may overlap it, including one of another function
/// argument (a donated pair shares a buffer), is to the same element in the
/// same iteration. With `f32Lanes` > 0, a marked loop over f32 data that
/// carries an f64 sum also asks LLVM for that many lanes (the f32 vector
/// width; LLVM would size the vectors by the f64 sum, halving the f32 work's
/// width: softmax and layer_norm rows). An innermost loop without
/// loop-carried values whose body is one long chain of float operations
/// also asks LLVM to interleave four vector iterations (eight with
/// `f32Lanes` 16), or two for a body of more than 64 of them (an scf.parallel of
/// that kind is first rewritten as the scf.for nest scf-to-cf would make).
/// Returns the number of loops marked parallel.
int markParallelLoops(mlir::Operation *root, unsigned f32Lanes = 0);

/// Where markParallelLoops puts a loop's annotation, and where scf-to-cf and
/// cf-to-llvm carry it: a discardable attribute of the loop (then of its
/// back edge).
inline constexpr const char *kLoopAnnotation = "llvm.loop_annotation";

/// The interleave count markParallelLoops gives the shortest latency-bound
/// bodies; codegen treats the functions that hold such a loop apart
/// (CodegenGate.h).
inline constexpr int64_t kLatencyBoundCopies = 4;

/// ... and with 512-bit vectors (32 registers; f32-lanes 16): chain8
/// (2^24 f32, 2 threads, AVX-512 Zen 4) ran in 5.85-5.99 ms with eight
/// copies against 6.31-6.48 with four (4 alternating runs of 3 repetitions
/// each: 0.99-1.02 of Eigen instead of 0.92-0.94), 7.1-7.4 with two or
/// three, 7.2 with six. Eight spilled on AVX2 (16 registers).
inline constexpr int64_t kLatencyBoundCopiesWide = 8;

/// After the lowering to the LLVM dialect: moves each branch's
/// `llvm.loop_annotation` (where scf-to-cf leaves a loop's annotation) into
/// the branch's loop annotation and puts the annotation's parallel access
/// groups on every memory access of the loop's blocks, which is what LLVM
/// requires before it treats the loop as parallel. Returns the number of
/// loops annotated.
int tagParallelAccesses(mlir::Operation *root);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_PARALLELLOOPS_H
