//===- KilnDialect.h - The kiln dialect -------------------------*- C++ -*-===//
//
// The kiln dialect: Kiln's recorded primitives as MLIR ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNDIALECT_H
#define KILN_IR_KILNDIALECT_H

#include "kiln/shape.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Dialect.h"

namespace mlir::kiln {
/// Largest tensor rank Kiln supports (kiln::Shape::kMaxRank).
inline constexpr int64_t kMaxRank = ::kiln::Shape::kMaxRank;
} // namespace mlir::kiln

#include "dialects/kiln/IR/KilnDialect.h.inc"

#endif // KILN_IR_KILNDIALECT_H
