//===- ElementAccess.cpp - The element accesses of innermost loops -*- C++ -*-===//

#include "jit/targets/cpu/ElementAccess.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace kiln::jit::cpu {

bool elementAccesses(Block &body, SmallVector<ElementAccess> &out) {
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() > 0)
      return false;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      out.push_back({load.getMemRef(), SmallVector<Value>(load.getIndices()), false});
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      out.push_back({store.getMemRef(), SmallVector<Value>(store.getIndices()), true});
    else if (!isMemoryEffectFree(&op))
      return false;
  }
  return true;
}

std::optional<CanonicalAccess> canonical(const ElementAccess &x) {
  auto type = dyn_cast<MemRefType>(x.memref.getType());
  if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
    return std::nullopt;
  CanonicalAccess c;
  c.element = type.getElementType();
  for (auto [extent, index] : llvm::zip(type.getShape(), x.indices)) {
    if (extent == 1) {
      std::optional<int64_t> k = getConstantIntValue(index);
      if (!k || *k != 0)
        return std::nullopt;
      continue;
    }
    c.shape.push_back(extent);
    c.indices.push_back(index);
  }
  Value v = x.memref;
  for (;;) {
    Operation *def = v.getDefiningOp();
    if (auto view = dyn_cast_or_null<memref::ViewOp>(def)) {
      std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
      if (!shift)
        return std::nullopt;
      c.offset += *shift;
      c.throughView = true;
      v = view.getSource();
      continue;
    }
    if (isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp>(def)) {
      v = def->getOperand(0);
      continue;
    }
    break;
  }
  c.root = v;
  return c;
}

} // namespace kiln::jit::cpu
