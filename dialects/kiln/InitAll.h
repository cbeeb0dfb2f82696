//===- InitAll.h - Registration hub for kiln-opt and the JIT ----*- C++ -*-===//
//
// One place that registers the kiln dialect, its passes, and the upstream
// dialects, interfaces and passes Kiln's pipelines use. kiln-opt and the JIT
// both call these; nothing registers itself through static constructors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_INITALL_H
#define KILN_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::kiln {

/// Adds kiln and the upstream dialects of Kiln's pipelines (func, arith,
/// math, linalg, tensor, bufferization, memref, scf, affine, vector, cf,
/// index, ub, llvm), plus the external interface models upstream's
/// registerAllDialects attaches to them (bufferization, tiling, value bounds,
/// inlining) and upstream's extensions (ConvertToLLVM, ...). Smaller than
/// mlir::registerAllDialects, so loadAllAvailableDialects stays cheap.
void registerAllDialects(DialectRegistry &registry);

/// Registers kiln's passes and the upstream passes Kiln's pipelines use
/// (transforms, conversions, linalg, bufferization, affine, scf, memref,
/// arith, math, tensor, func, vector) with the global pass registry, so
/// textual pipelines and kiln-opt can name them. Idempotent.
void registerAllPasses();

} // namespace mlir::kiln

#endif // KILN_INITALL_H
