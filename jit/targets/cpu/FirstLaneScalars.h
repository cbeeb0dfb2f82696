//===- FirstLaneScalars.h - First lanes of vector inductions ----*- C++ -*-===//
//
// The loop vectoriser widens an induction into a vector (<0, 1, ..., 15>
// plus the step each iteration) when a widened user needs it, and other
// users of its first lane extract lane 0 from that vector. Softmax's exp
// pass indexes its loads and the next row's prefetches (NextRowPrefetch.h)
// so: per two zmm of arithmetic, three vector adds and two extracts, on
// the ports the arithmetic needs, which made the prefetch a loss on Zen 5.
// `kiln-first-lane-scalars` computes each such first lane in scalars (a
// scalar induction beside the vector one, and the adds, multiplies and
// address computations on it), and instcombine then drops the vectors no
// one else reads. Run after the vectoriser and kiln-restore-prefetches
// (kKernelPassPipeline, HostTarget.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_FIRSTLANESCALARS_H
#define KILN_JIT_TARGETS_CPU_FIRSTLANESCALARS_H

namespace llvm {
class PassBuilder;
} // namespace llvm

namespace kiln::jit::cpu {

/// Registers `kiln-first-lane-scalars` (a function pass) with `pb`'s
/// pipeline parser.
void registerFirstLaneScalarPasses(llvm::PassBuilder &pb);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_FIRSTLANESCALARS_H
