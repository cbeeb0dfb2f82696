//===- MemoryExtent.h - Which bytes of which buffer a memref touches -*- C++ -*-===//
//
// Kernel memrefs are function arguments (distinct buffers) and views of them,
// temporaries being views at fixed byte offsets of the scratch argument.
// From that layout the CPU pipeline's own steps prove that two accesses do
// not overlap, which LLVM cannot (it sees one scratch pointer).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_MEMORYEXTENT_H
#define KILN_JIT_TARGETS_CPU_MEMORYEXTENT_H

#include <climits>
#include <cstdint>

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln::jit::cpu {

/// The bytes of a base buffer a memref may touch: [begin, end) of `base`
/// (a function argument, an allocation or a global), or all of it.
struct Extent {
  mlir::Value base;
  int64_t begin = 0, end = INT64_MAX;
};

inline Extent extentOf(mlir::Value memref) {
  mlir::Operation *def = memref.getDefiningOp();
  if (auto view = llvm::dyn_cast_or_null<mlir::memref::ViewOp>(def)) {
    Extent source = extentOf(view.getSource());
    std::optional<int64_t> shift = mlir::getConstantIntValue(view.getByteShift());
    mlir::MemRefType type = view.getType();
    if (shift && source.begin == 0 && source.end == INT64_MAX && type.hasStaticShape() &&
        type.getElementType().isIntOrFloat()) {
      const int64_t bits = type.getElementType().getIntOrFloatBitWidth();
      source.begin = *shift;
      source.end = *shift + type.getNumElements() * (bits < 8 ? 1 : bits / 8);
    }
    return source;
  }
  // Views that address a subset of their source.
  if (llvm::isa_and_nonnull<mlir::memref::SubViewOp, mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp, mlir::memref::CastOp,
                      mlir::memref::TransposeOp>(def))
    return extentOf(def->getOperand(0));
  // Any other view may address all of its base buffer.
  if (auto view = llvm::dyn_cast_or_null<mlir::ViewLikeOpInterface>(def)) {
    Extent source = extentOf(view.getViewSource());
    return {source.base};
  }
  return {memref};
}

/// Distinct function arguments are distinct buffers (the kernel ABI; the
/// runtime's donated pairs never involve an accumulator, which an
/// all-parallel writer cannot be), as are distinct allocations.
inline bool isBuffer(mlir::Value base) {
  return llvm::isa<mlir::BlockArgument>(base) || llvm::isa_and_nonnull<mlir::memref::AllocOp, mlir::memref::AllocaOp, mlir::memref::GetGlobalOp>(
                                         base.getDefiningOp());
}

inline bool disjoint(const Extent &a, const Extent &b) {
  if (!isBuffer(a.base) || !isBuffer(b.base))
    return false;
  if (a.base != b.base)
    return true;
  return a.end <= b.begin || b.end <= a.begin;
}

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_MEMORYEXTENT_H
