//===- ScalarOps.h - Scalar semantics of kiln ops ---------------*- C++ -*-===//
//
// Builds the scalar arith/math computation of one kiln op inside a linalg
// body. Values carry the lowered element types (ui8 is signless i8); the
// kiln-level element type passed alongside says how to interpret them. The
// semantics mirror the runtime's interpreter (runtime/interp): f16 and bf16
// compute in f32, integers wrap, max/min propagate NaN, float-to-integer
// casts saturate with NaN to 0.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_KILNTOLINALG_SCALAROPS_H
#define KILN_CONVERSION_KILNTOLINALG_SCALAROPS_H

#include "mlir/IR/Builders.h"
#include "runtime/core/OpKind.h"

namespace mlir::kiln {

class ScalarBuilder {
public:
  ScalarBuilder(OpBuilder &builder, Location loc)
      : builder(builder), loc(loc) {}

  Value floatConstant(Type type, double value);
  Value intConstant(Type type, int64_t value);

  /// f16 and bf16 values extended to f32; others unchanged.
  Value toCompute(Value value);
  /// A computed value rounded back to the lowered type `type`.
  Value fromCompute(Value value, Type type);

  /// Unary op `kind` on `x`, whose kiln element type is `type`. Null for an
  /// op/type pair the verifier rejects. `nonPositiveOperand`: x is <= 0 or
  /// NaN, which an exp records (kNonPositiveOperandAttr).
  Value unary(::kiln::core::OpKind kind, Type type, Value x,
              bool nonPositiveOperand = false);
  /// Binary op `kind` (Binary category); operands and result have kiln
  /// element type `type`.
  Value binary(::kiln::core::OpKind kind, Type type, Value a, Value b);
  /// Comparison `kind` of operands of kiln element type `type`; gives i1.
  Value compare(::kiln::core::OpKind kind, Type type, Value a, Value b);
  /// kiln.cast of `x` from kiln element type `from` to `to`.
  Value cast(Value x, Type from, Type to);

  /// NaN-propagating max (or min) like the interpreter: the first NaN wins,
  /// otherwise `a > b ? a : b` (`a < b ? a : b`).
  Value maxOrMin(bool isMax, Type type, Value a, Value b);

  /// Integer power with wrapping; negative exponents (signed types) give 1
  /// for base 1, +-1 for base -1 and 0 otherwise, like the interpreter.
  Value intPow(Value base, Value exponent, bool isUnsigned);

  /// Integer fmod (truncated) or remainder (`floored`: the divisor's sign)
  /// with x % 0 = x % -1 = 0, like the interpreter.
  Value intRemainder(Value a, Value b, bool isUnsigned, bool floored);

  /// kiln::core::randomBits over i64 values (runtime/core/Random.h).
  Value randomBits(Value seed, Value counter);
  /// kiln::core::uniformAt as f64.
  Value uniformAt(Value seed, Value index);
  /// kiln::core::normalAt as f64 (math.log, math.sqrt and math.cos in f64).
  Value normalAt(Value seed, Value index);

  /// The lowered type of a kiln element type (ui8 -> i8).
  static Type lowered(Type type);

private:
  Value isNaN(Value x);
  /// Saturating conversion of an f64 to kiln integer type `to` (NaN -> 0).
  Value floatToInt(Value x, Type to);

  OpBuilder &builder;
  Location loc;
};

} // namespace mlir::kiln

#endif // KILN_CONVERSION_KILNTOLINALG_SCALAROPS_H
