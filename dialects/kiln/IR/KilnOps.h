//===- KilnOps.h - kiln dialect ops -----------------------------*- C++ -*-===//
//
// Op classes generated from KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNOPS_H
#define KILN_IR_KILNOPS_H

#include "dialects/kiln/IR/KilnDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "runtime/core/ShapeRules.h"

namespace mlir::kiln {
/// The verifier of the unary, binary and comparison ops: the element type
/// obeys the op table's dtype rule (kiln::core::acceptsDType, the rule the
/// recorder and the lowering use) and operand shapes broadcast to the
/// result's.
LogicalResult verifyElementwiseOp(Operation *op);
} // namespace mlir::kiln

#define GET_OP_CLASSES
#include "dialects/kiln/IR/KilnOps.h.inc"

#endif // KILN_IR_KILNOPS_H
