//===- KilnTypes.h - Kiln dtypes and shapes as MLIR types -------*- C++ -*-===//
//
// The bridge between runtime/core's DType/Shape and MLIR's builtin types,
// shared by the verifiers, the lowering and the Trace importer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNTYPES_H
#define KILN_IR_KILNTYPES_H

#include "kiln/dtype.h"
#include "kiln/shape.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mlir::kiln {

/// The Kiln dtype of an element type, or nullopt for a type Kiln lacks.
std::optional<::kiln::DType> getDType(Type elementType);

/// The element type of a dtype: u8 is `ui8`, bool is `i1`.
Type getElementType(MLIRContext *context, ::kiln::DType dtype);

/// The tensor type of a Kiln shape and dtype.
RankedTensorType getTensorType(MLIRContext *context, const ::kiln::Shape &shape,
                               ::kiln::DType dtype);

/// The Kiln shape of a static tensor type of rank <= kMaxRank (which every
/// verified kiln op has).
::kiln::Shape getShape(ShapedType type);

} // namespace mlir::kiln

#endif // KILN_IR_KILNTYPES_H
