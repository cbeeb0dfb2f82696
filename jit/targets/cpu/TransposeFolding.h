//===- TransposeFolding.h - Matmuls read transposed operands in place -*- C++ -*-===//
//
// A backward pass multiplies by transposes (dX = dY * W^T, dW = X^T * dY),
// and the lowering materialises each one: a gather over the whole matrix
// into a temporary that one matmul reads. The runtime GEMM the matmul
// becomes (kiln-cpu-matmul-to-runtime-calls) takes any strides, so the
// matmul can read the source through a transposed view instead; in the MLP
// training step those copies were about 8 % of the compiled step.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_TRANSPOSEFOLDING_H
#define KILN_JIT_TARGETS_CPU_TRANSPOSEFOLDING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// On the bufferized kernel: for each f32 linalg.matmul or batch_matmul
/// (without user-defined maps) whose A or B operand is a temporary (or an
/// out-param used as one) that a linalg.transpose of its last two
/// dimensions filled, replaces the operand
/// with a memref.transpose view of the transpose's source and erases the
/// copy. Only when nothing between the copy and the matmul touches the
/// temporary or writes the source, the matmul reads the temporary only as
/// that operand, and the next op to touch the temporary after the matmul
/// overwrites all of it without reading it (or none does, for a temporary;
/// an out-param must be overwritten). Returns the number of copies folded.
int foldTransposesIntoMatmuls(mlir::func::FuncOp kernel);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_TRANSPOSEFOLDING_H
