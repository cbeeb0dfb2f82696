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
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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

/// Whether `accept` takes every use of `root` and of each view of it
/// (through view-like ops, whose source operand is the only use they may
/// make of it): false at the first other use.
inline bool allUsesThroughViews(mlir::Value root, llvm::function_ref<bool(mlir::OpOperand &)> accept) {
  llvm::SmallVector<mlir::Value> work{root};
  while (!work.empty()) {
    mlir::Value v = work.pop_back_val();
    for (mlir::OpOperand &use : v.getUses()) {
      if (accept(use))
        continue;
      auto view = llvm::dyn_cast<mlir::ViewLikeOpInterface>(use.getOwner());
      if (!view || view.getViewSource() != v)
        return false;
      for (mlir::Value result : use.getOwner()->getResults())
        work.push_back(result);
    }
  }
  return true;
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

/// Whether `base` is an argument of `kernel` listed in `sharedArgs`.
inline bool isSharedArg(mlir::Value base, mlir::Operation *kernel, const std::set<unsigned> &sharedArgs) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(base);
  return arg && arg.getOwner()->getParentOp() == kernel && sharedArgs.count(arg.getArgNumber());
}

/// Whether two distinct shared arguments may be one buffer. The runtime
/// passes one buffer for a donated pair only when the output's dtype and
/// shape are the input's (Engine.cpp), and then the whole of it: arguments
/// of different static types never share one.
inline bool mayShareOneBuffer(mlir::Value a, mlir::Value b) {
  auto ta = llvm::dyn_cast<mlir::MemRefType>(a.getType()), tb = llvm::dyn_cast<mlir::MemRefType>(b.getType());
  if (!ta || !tb || !ta.hasStaticShape() || !tb.hasStaticShape())
    return true;
  return ta.getShape() == tb.getShape() && ta.getElementType() == tb.getElementType();
}

/// Whether memrefs `a` and `b` of `kernel` may touch a common byte: their
/// extents are not provably disjoint, or both are arguments listed in
/// `sharedArgs` (donated pairs, which the runtime may pass one buffer for)
/// that may be one buffer.
inline bool mayOverlap(mlir::Value a, mlir::Value b, mlir::Operation *kernel, const std::set<unsigned> &sharedArgs) {
  const Extent ea = extentOf(a), eb = extentOf(b);
  if (isSharedArg(ea.base, kernel, sharedArgs) && isSharedArg(eb.base, kernel, sharedArgs) &&
      mayShareOneBuffer(ea.base, eb.base))
    return true;
  return !disjoint(ea, eb);
}

/// Whether `op` (with what it nests) may write a byte that `memref` may
/// touch: its effects are unknown, or one is a write without a value or to
/// a memref that may overlap it (mayOverlap; `sharedArgs` empty where no
/// buffers are donated).
inline bool mayWriteBytesOf(mlir::Operation *op, mlir::Value memref, mlir::Operation *kernel,
                            const std::set<unsigned> &sharedArgs) {
  std::optional<llvm::SmallVector<mlir::MemoryEffects::EffectInstance>> effects = mlir::getEffectsRecursively(op);
  if (!effects)
    return true;
  for (const mlir::MemoryEffects::EffectInstance &e : *effects) {
    if (!llvm::isa<mlir::MemoryEffects::Write>(e.getEffect()))
      continue;
    mlir::Value written = e.getValue();
    if (!written || !llvm::isa<mlir::MemRefType>(written.getType()) || mayOverlap(written, memref, kernel, sharedArgs))
      return true;
  }
  return false;
}

/// How a view splits its bytes into rows: (base argument, first byte, bytes,
/// rows). Only views that address exactly their source's bytes (memref.view
/// at a constant offset, expand_shape, collapse_shape) of a function argument
/// with a static identity layout qualify.
using RowLayout = std::tuple<mlir::Value, int64_t, int64_t, int64_t>;

inline std::optional<std::pair<mlir::Value, int64_t>> exactBase(mlir::Value memref) {
  if (llvm::isa<mlir::BlockArgument>(memref))
    return std::make_pair(memref, int64_t{0});
  mlir::Operation *def = memref.getDefiningOp();
  if (auto view = llvm::dyn_cast_or_null<mlir::memref::ViewOp>(def)) {
    auto source = exactBase(view.getSource());
    std::optional<int64_t> shift = mlir::getConstantIntValue(view.getByteShift());
    if (!source || !shift)
      return std::nullopt;
    return std::make_pair(source->first, source->second + *shift);
  }
  if (llvm::isa_and_nonnull<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp>(def))
    return exactBase(def->getOperand(0));
  return std::nullopt;
}

inline std::optional<RowLayout> rowLayout(mlir::Value memref) {
  auto type = llvm::dyn_cast<mlir::MemRefType>(memref.getType());
  if (!type || type.getRank() == 0 || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
      !type.getElementType().isIntOrFloat())
    return std::nullopt;
  auto base = exactBase(memref);
  if (!base)
    return std::nullopt;
  const int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return RowLayout{base->first, base->second, type.getNumElements() * (bits < 8 ? 1 : bits / 8),
                   type.getDimSize(0)};
}

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_MEMORYEXTENT_H
