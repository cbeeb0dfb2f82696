//===- X86VectorIdioms.h - AVX-512 forms of vector idioms -------*- C++ -*-===//
//
// Operations the loop vectoriser leaves to x86 instruction selection,
// which lowers them in many more instructions than AVX-512 needs:
//  - llvm.maximum / llvm.minimum (NaN propagates, -0 < +0: the interpreter's
//    max and min) become vrangeps/vrangepd, which orders -0 below +0 in one
//    instruction, and a select of a + b where an operand is NaN: 3
//    instructions instead of 6 (vpmovd2m, two blends, vmaxps, vcmpunordps,
//    a masked move). As a loop's reduction (softmax's row max) the loop
//    keeps vrange alone and a mask of the lanes without NaN, and NaN is
//    put back after it: 2 instructions a vector, one on the carried chain.
//  - llvm.vector.reduce.fmaximum / fminimum (the reduction's last step)
//    become a tree of vrange over halves and one NaN test.
//  - llvm.ldexp(x, fptosi(r)) with r an integral value (roundeven, rint,
//    floor, ceil, trunc, round) becomes vscalefps(x, r): the same x * 2^r
//    without converting r to integers and back (the approximate exp's last
//    step; 2 instructions of its ~15 per vector).
// Each only where the function's target features have the instructions
// (AVX-512F and DQ; AVX-512VL for 256- and 128-bit vectors, and for the
// reductions' halves) and the vector type is f32 or f64. Run after the
// loop vectoriser
// (kKernelPassPipeline, HostTarget.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_X86VECTORIDIOMS_H
#define KILN_JIT_TARGETS_CPU_X86VECTORIDIOMS_H

namespace llvm {
class PassBuilder;
} // namespace llvm

namespace kiln::jit::cpu {

/// Registers `kiln-x86-vector-idioms` (a function pass) with `pb`'s
/// pipeline parser.
void registerX86VectorIdiomPasses(llvm::PassBuilder &pb);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_X86VECTORIDIOMS_H
