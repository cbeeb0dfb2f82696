//===- BoolBytes.h - Bool elements loaded and stored as bytes ---*- C++ -*-===//
//
// Kiln keeps a bool tensor one byte per element (0 or 1), and the MLIR
// lowering reads and writes its elements as LLVM's i1, whose store size is a
// byte but whose bit width is not. LLVM's loop vectoriser does not widen an
// access of such an irregular type: it scalarised every bool load in a
// vector loop (attention's causal mask: 16 byte loads and mask moves per
// vector, the largest part of the masked softmax's backward kernel). As i8
// accesses (a load and trunc to i1, a zext and store) the same bytes become
// one vector load or store and a compare.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_BOOLBYTES_H
#define KILN_JIT_TARGETS_CPU_BOOLBYTES_H

namespace llvm {
class PassBuilder;
} // namespace llvm

namespace kiln::jit::cpu {

/// Registers `kiln-bool-bytes` (a function pass: every scalar, non-atomic
/// i1 load becomes an i8 load truncated to i1, every such i1 store a zext
/// and an i8 store, with the access's alignment, volatility and metadata)
/// with `pb`'s pipeline parser. Run before the loop vectoriser
/// (kKernelPassPipeline, HostTarget.h).
void registerBoolBytesPasses(llvm::PassBuilder &pb);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_BOOLBYTES_H
