//===- ElementAccess.h - The element accesses of innermost loops -*- C++ -*-===//
//
// Loop transformations ask the same question of an innermost loop body: which
// element of which buffer each load and store touches in an iteration. Row
// fusion asks it of two loops (may they run as one?), parallel-loop marking
// of one (do its iterations touch disjoint elements?).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_ELEMENTACCESS_H
#define KILN_JIT_TARGETS_CPU_ELEMENTACCESS_H

#include <cstdint>
#include <optional>

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln::jit::cpu {

/// A load or store of an innermost loop body: memref and indices.
struct ElementAccess {
  mlir::Value memref;
  llvm::SmallVector<mlir::Value> indices;
  bool write;
};

/// The accesses of a loop whose body is straight-line code; false when it
/// holds a nested region or another op with memory effects.
bool elementAccesses(mlir::Block &body, llvm::SmallVector<ElementAccess> &out);

/// An access in a form that views of the same bytes share: the buffer it
/// views (through views at constant offsets and reshapes), the byte offset,
/// the element type, and the shape and indices without unit dimensions
/// (whose index must be the constant 0). `throughView`: the access reaches
/// its buffer through a memref.view, which only temporaries in the scratch
/// buffer do.
struct CanonicalAccess {
  mlir::Value root;
  int64_t offset = 0;
  mlir::Type element;
  llvm::SmallVector<int64_t> shape;
  llvm::SmallVector<mlir::Value> indices;
  bool throughView = false;
};

/// `x` in canonical form; nullopt for a memref without a static shape and
/// identity layout, or a view at an offset that is not a constant.
std::optional<CanonicalAccess> canonical(const ElementAccess &x);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_ELEMENTACCESS_H
