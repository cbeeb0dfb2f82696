//===- ScalarOps.cpp - Scalar semantics of kiln ops -----------------------===//

#include "dialects/kiln/Conversion/KilnToLinalg/ScalarOps.h"
#include "dialects/kiln/IR/KilnAttributes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::kiln;
using ::kiln::core::OpKind;

static bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

Type ScalarBuilder::lowered(Type type) {
  if (auto intType = dyn_cast<IntegerType>(type);
      intType && !intType.isSignless())
    return IntegerType::get(type.getContext(), intType.getWidth());
  return type;
}

Value ScalarBuilder::floatConstant(Type type, double value) {
  return arith::ConstantOp::create(builder, loc, type,
                                   builder.getFloatAttr(type, value));
}

Value ScalarBuilder::intConstant(Type type, int64_t value) {
  return arith::ConstantOp::create(builder, loc, type,
                                   builder.getIntegerAttr(type, value));
}

Value ScalarBuilder::toCompute(Value value) {
  if (!isHalf(value.getType()))
    return value;
  if (value.getType().isBF16()) {
    // bf16 bits are the top half of the f32. Spelled in integers: LLVM
    // narrows floor/ceil/fabs(fpext bf16) to bf16 intrinsics whose
    // promotion calls __truncsfbf2, which the JIT cannot resolve.
    Type i32 = builder.getI32Type();
    Value bits = arith::BitcastOp::create(builder, loc,
                                          builder.getIntegerType(16), value);
    Value wide = arith::ExtUIOp::create(builder, loc, i32, bits);
    Value shifted =
        arith::ShLIOp::create(builder, loc, wide, intConstant(i32, 16));
    return arith::BitcastOp::create(builder, loc, builder.getF32Type(),
                                    shifted);
  }
  return arith::ExtFOp::create(builder, loc, builder.getF32Type(), value);
}

/// f32 -> bf16 rounding to nearest even in integer arithmetic, bit for bit
/// like the runtime's floatToBf16 (NaN stays a quiet NaN). LLVM lowers an
/// `fptrunc` to bfloat to a compiler-rt call (__truncsfbf2) on CPUs without
/// native bf16 conversions, which neither libgcc nor the JIT provides.
static Value truncateToBf16(OpBuilder &b, Location loc, Value f) {
  Type i32 = b.getI32Type(), i16 = b.getIntegerType(16);
  auto konst = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, i32, b.getIntegerAttr(i32, v));
  };
  Value bits = arith::BitcastOp::create(b, loc, i32, f);
  Value sixteen = konst(16);
  Value high = arith::ShRUIOp::create(b, loc, bits, sixteen);
  Value lsb = arith::AndIOp::create(b, loc, high, konst(1));
  Value bias = arith::AddIOp::create(b, loc, lsb, konst(0x7fff));
  Value rounded = arith::AddIOp::create(b, loc, bits, bias);
  rounded = arith::ShRUIOp::create(b, loc, rounded, sixteen);
  Value quiet = arith::OrIOp::create(b, loc, high, konst(0x40));
  Value isNaN = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, f, f);
  Value result = arith::SelectOp::create(b, loc, isNaN, quiet, rounded);
  Value truncated = arith::TruncIOp::create(b, loc, i16, result);
  return arith::BitcastOp::create(b, loc, b.getBF16Type(), truncated);
}

Value ScalarBuilder::fromCompute(Value value, Type type) {
  if (value.getType() == type)
    return value;
  if (type.isBF16()) {
    if (!value.getType().isF32())
      value =
          arith::TruncFOp::create(builder, loc, builder.getF32Type(), value);
    return truncateToBf16(builder, loc, value);
  }
  return arith::TruncFOp::create(builder, loc, type, value);
}

Value ScalarBuilder::isNaN(Value x) {
  return arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::UNO, x, x);
}

Value ScalarBuilder::maxOrMin(bool isMax, Type type, Value a, Value b) {
  if (isa<FloatType>(a.getType())) {
    Value better = arith::CmpFOp::create(
        builder, loc,
        isMax ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT, a, b);
    Value pick = arith::SelectOp::create(builder, loc, better, a, b);
    pick = arith::SelectOp::create(builder, loc, isNaN(b), b, pick);
    return arith::SelectOp::create(builder, loc, isNaN(a), a, pick);
  }
  if (type.isUnsignedInteger() || type.isInteger(1))
    return isMax ? Value(arith::MaxUIOp::create(builder, loc, a, b))
                 : Value(arith::MinUIOp::create(builder, loc, a, b));
  return isMax ? Value(arith::MaxSIOp::create(builder, loc, a, b))
               : Value(arith::MinSIOp::create(builder, loc, a, b));
}

Value ScalarBuilder::unary(OpKind kind, Type type, Value x,
                           bool nonPositiveOperand) {
  auto nonPositiveExp = [&](Value operand) -> Value {
    auto exp = math::ExpOp::create(builder, loc, operand);
    exp->setAttr(kNonPositiveOperandAttr, builder.getUnitAttr());
    return exp;
  };
  if (isa<FloatType>(type)) {
    Value v = toCompute(x);
    Type t = v.getType();
    Value r;
    switch (kind) {
    case OpKind::Neg:
      r = arith::NegFOp::create(builder, loc, v);
      break;
    case OpKind::Abs:
      r = math::AbsFOp::create(builder, loc, v);
      break;
    case OpKind::Exp:
      r = nonPositiveOperand ? nonPositiveExp(v)
                             : Value(math::ExpOp::create(builder, loc, v));
      break;
    case OpKind::Expm1:
      r = math::ExpM1Op::create(builder, loc, v);
      break;
    case OpKind::Log:
      r = math::LogOp::create(builder, loc, v);
      break;
    case OpKind::Log1p:
      r = math::Log1pOp::create(builder, loc, v);
      break;
    case OpKind::Log2:
      r = math::Log2Op::create(builder, loc, v);
      break;
    case OpKind::Erf:
      r = math::ErfOp::create(builder, loc, v);
      break;
    case OpKind::Sqrt:
      r = math::SqrtOp::create(builder, loc, v);
      break;
    case OpKind::Rsqrt: {
      Value root = math::SqrtOp::create(builder, loc, v);
      r = arith::DivFOp::create(builder, loc, floatConstant(t, 1.0), root);
      break;
    }
    case OpKind::Tanh:
      r = math::TanhOp::create(builder, loc, v);
      break;
    case OpKind::Sigmoid: {
      // With e = exp(-|x|) in [0, 1]: 1 / (1 + e) for x >= 0 and
      // e / (1 + e) below, so exp never overflows (the interpreter's
      // 1 / (1 + exp(-x)) came out 0 below -88.7 where the result is
      // denormal) and its operand is never positive. NaN stays NaN.
      Value negAbs = arith::NegFOp::create(
          builder, loc, math::AbsFOp::create(builder, loc, v));
      Value e = nonPositiveExp(negAbs);
      Value one = floatConstant(t, 1.0);
      Value denominator = arith::AddFOp::create(builder, loc, one, e);
      // The denominator lies in [1, 2] (or is NaN): never 0 nor infinite,
      // so the division may take a reciprocal estimate and a Newton step
      // (arcp, ninf, contract: on x86 an estimate and two FMAs, within an
      // ulp from AVX-512's 14-bit one, two from AVX2's 12-bit one) instead
      // of a full division, whose throughput bounded sigmoid-heavy loops.
      Value s = arith::DivFOp::create(builder, loc, one, denominator,
                                      arith::FastMathFlags::arcp | arith::FastMathFlags::ninf | arith::FastMathFlags::contract);
      Value negative = arith::CmpFOp::create(
          builder, loc, arith::CmpFPredicate::OLT, v, floatConstant(t, 0.0));
      r = arith::SelectOp::create(builder, loc, negative,
                                  arith::MulFOp::create(builder, loc, e, s), s);
      break;
    }
    case OpKind::Relu: {
      Value zero = floatConstant(t, 0.0);
      Value negative = arith::CmpFOp::create(
          builder, loc, arith::CmpFPredicate::OLT, v, zero);
      r = arith::SelectOp::create(builder, loc, negative, zero, v);
      break;
    }
    case OpKind::Sin:
    case OpKind::Cos: {
      // In f64: the f32 polynomial approximation reduces the argument with
      // a one-word pi and loses all accuracy beyond |x| ~ 1e3 (sin(65504)
      // came out 0); f64 sin/cos are libm calls, within an f32 ulp of the
      // interpreter's sinf/cosf once rounded.
      Value wide = t.isF64() ? v
                             : Value(arith::ExtFOp::create(
                                   builder, loc, builder.getF64Type(), v));
      Value w = kind == OpKind::Sin
                    ? Value(math::SinOp::create(builder, loc, wide))
                    : Value(math::CosOp::create(builder, loc, wide));
      r = t.isF64() ? w : Value(arith::TruncFOp::create(builder, loc, t, w));
      break;
    }
    case OpKind::Atan:
      r = math::AtanOp::create(builder, loc, v);
      break;
    case OpKind::Floor:
      r = math::FloorOp::create(builder, loc, v);
      break;
    case OpKind::Ceil:
      r = math::CeilOp::create(builder, loc, v);
      break;
    case OpKind::Round:
      r = math::RoundEvenOp::create(builder, loc, v);
      break;
    case OpKind::Sign: {
      // (0 < x) - (x < 0); NaN stays NaN.
      Value zero = floatConstant(t, 0.0);
      Value positive = arith::CmpFOp::create(
          builder, loc, arith::CmpFPredicate::OGT, v, zero);
      Value negative = arith::CmpFOp::create(
          builder, loc, arith::CmpFPredicate::OLT, v, zero);
      Value s = arith::SelectOp::create(builder, loc, negative,
                                        floatConstant(t, -1.0), zero);
      s = arith::SelectOp::create(builder, loc, positive, floatConstant(t, 1.0),
                                  s);
      r = arith::SelectOp::create(builder, loc, isNaN(v), v, s);
      break;
    }
    case OpKind::Reciprocal:
      r = arith::DivFOp::create(builder, loc, floatConstant(t, 1.0), v);
      break;
    case OpKind::Square:
      r = arith::MulFOp::create(builder, loc, v, v);
      break;
    default:
      return {};
    }
    return fromCompute(r, x.getType());
  }

  Type t = x.getType();
  bool isUnsigned = type.isUnsignedInteger();
  switch (kind) {
  case OpKind::Neg:
    return arith::SubIOp::create(builder, loc, intConstant(t, 0), x);
  case OpKind::Abs:
    return isUnsigned ? x : Value(math::AbsIOp::create(builder, loc, x));
  case OpKind::Square:
    return arith::MulIOp::create(builder, loc, x, x);
  case OpKind::Relu: {
    if (isUnsigned)
      return x;
    Value zero = intConstant(t, 0);
    Value negative =
        arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt, x, zero);
    return arith::SelectOp::create(builder, loc, negative, zero, x);
  }
  case OpKind::Sign: {
    Value zero = intConstant(t, 0);
    Value positive = arith::CmpIOp::create(
        builder, loc,
        isUnsigned ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt, x,
        zero);
    Value p = arith::ExtUIOp::create(builder, loc, t, positive);
    if (isUnsigned)
      return p;
    Value negative =
        arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt, x, zero);
    Value n = arith::ExtUIOp::create(builder, loc, t, negative);
    return arith::SubIOp::create(builder, loc, p, n);
  }
  case OpKind::LogicalNot:
    if (!type.isInteger(1))
      return {};
    return arith::XOrIOp::create(builder, loc, x, intConstant(t, 1));
  default:
    return {};
  }
}

Value ScalarBuilder::intRemainder(Value a, Value b, bool isUnsigned,
                                  bool floored) {
  // x % 0 and x % -1 are 0 (no trap), like the interpreter: divide by 1
  // there and select 0.
  Type t = a.getType();
  Value zero = intConstant(t, 0), one = intConstant(t, 1);
  Value unsafe =
      arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, b, zero);
  if (!isUnsigned) {
    Value minusOne = arith::CmpIOp::create(
        builder, loc, arith::CmpIPredicate::eq, b, intConstant(t, -1));
    unsafe = arith::OrIOp::create(builder, loc, unsafe, minusOne);
  }
  Value divisor = arith::SelectOp::create(builder, loc, unsafe, one, b);
  Value r = isUnsigned
                ? Value(arith::RemUIOp::create(builder, loc, a, divisor))
                : Value(arith::RemSIOp::create(builder, loc, a, divisor));
  r = arith::SelectOp::create(builder, loc, unsafe, zero, r);
  if (!floored || isUnsigned)
    return r;
  Value nonzero =
      arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne, r, zero);
  Value rNegative =
      arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt, r, zero);
  Value bNegative =
      arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::slt, b, zero);
  Value signsDiffer = arith::XOrIOp::create(builder, loc, rNegative, bNegative);
  Value adjust = arith::AndIOp::create(builder, loc, nonzero, signsDiffer);
  Value moved = arith::AddIOp::create(builder, loc, r, b);
  return arith::SelectOp::create(builder, loc, adjust, moved, r);
}

Value ScalarBuilder::binary(OpKind kind, Type type, Value a, Value b) {
  if (isa<FloatType>(type)) {
    Value x = toCompute(a), y = toCompute(b);
    Value r;
    switch (kind) {
    case OpKind::Add:
      r = arith::AddFOp::create(builder, loc, x, y);
      break;
    case OpKind::Sub:
      r = arith::SubFOp::create(builder, loc, x, y);
      break;
    case OpKind::Mul:
      r = arith::MulFOp::create(builder, loc, x, y);
      break;
    case OpKind::Div:
      r = arith::DivFOp::create(builder, loc, x, y);
      break;
    case OpKind::Pow:
      r = math::PowFOp::create(builder, loc, x, y);
      break;
    case OpKind::Fmod:
    case OpKind::Remainder:
      r = arith::RemFOp::create(builder, loc, x, y);
      if (kind == OpKind::Remainder) {
        // Python's sign rule: a nonzero remainder whose sign differs from
        // the divisor's moves by one divisor (like the interpreter).
        Value zero = floatConstant(x.getType(), 0.0);
        Value nonzero = arith::CmpFOp::create(
            builder, loc, arith::CmpFPredicate::UNE, r, zero);
        Value rNegative = arith::CmpFOp::create(
            builder, loc, arith::CmpFPredicate::OLT, r, zero);
        Value yNegative = arith::CmpFOp::create(
            builder, loc, arith::CmpFPredicate::OLT, y, zero);
        Value signsDiffer =
            arith::XOrIOp::create(builder, loc, rNegative, yNegative);
        Value adjust =
            arith::AndIOp::create(builder, loc, nonzero, signsDiffer);
        Value moved = arith::AddFOp::create(builder, loc, r, y);
        r = arith::SelectOp::create(builder, loc, adjust, moved, r);
      }
      break;
    case OpKind::Maximum:
    case OpKind::Minimum:
      r = maxOrMin(kind == OpKind::Maximum, type, x, y);
      break;
    default:
      return {};
    }
    return fromCompute(r, a.getType());
  }

  switch (kind) {
  case OpKind::Add:
    return arith::AddIOp::create(builder, loc, a, b);
  case OpKind::Sub:
    return arith::SubIOp::create(builder, loc, a, b);
  case OpKind::Mul:
    return arith::MulIOp::create(builder, loc, a, b);
  case OpKind::Pow:
    return intPow(a, b, type.isUnsignedInteger());
  case OpKind::Fmod:
  case OpKind::Remainder:
    return intRemainder(a, b, type.isUnsignedInteger(),
                        /*floored=*/kind == OpKind::Remainder);
  case OpKind::Maximum:
  case OpKind::Minimum:
    return maxOrMin(kind == OpKind::Maximum, type, a, b);
  case OpKind::LogicalAnd:
    return arith::AndIOp::create(builder, loc, a, b);
  case OpKind::LogicalOr:
    return arith::OrIOp::create(builder, loc, a, b);
  default:
    return {};
  }
}

Value ScalarBuilder::compare(OpKind kind, Type type, Value a, Value b) {
  if (isa<FloatType>(type)) {
    arith::CmpFPredicate predicate;
    switch (kind) {
    case OpKind::Eq:
      predicate = arith::CmpFPredicate::OEQ;
      break;
    case OpKind::Ne:
      predicate = arith::CmpFPredicate::UNE;
      break;
    case OpKind::Lt:
      predicate = arith::CmpFPredicate::OLT;
      break;
    case OpKind::Le:
      predicate = arith::CmpFPredicate::OLE;
      break;
    case OpKind::Gt:
      predicate = arith::CmpFPredicate::OGT;
      break;
    case OpKind::Ge:
      predicate = arith::CmpFPredicate::OGE;
      break;
    default:
      return {};
    }
    Value x = toCompute(a);
    Value y = toCompute(b);
    return arith::CmpFOp::create(builder, loc, predicate, x, y);
  }
  bool isUnsigned = type.isUnsignedInteger() || type.isInteger(1);
  arith::CmpIPredicate predicate;
  switch (kind) {
  case OpKind::Eq:
    predicate = arith::CmpIPredicate::eq;
    break;
  case OpKind::Ne:
    predicate = arith::CmpIPredicate::ne;
    break;
  case OpKind::Lt:
    predicate =
        isUnsigned ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt;
    break;
  case OpKind::Le:
    predicate =
        isUnsigned ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle;
    break;
  case OpKind::Gt:
    predicate =
        isUnsigned ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt;
    break;
  case OpKind::Ge:
    predicate =
        isUnsigned ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge;
    break;
  default:
    return {};
  }
  return arith::CmpIOp::create(builder, loc, predicate, a, b);
}

Value ScalarBuilder::floatToInt(Value d, Type to) {
  // The interpreter converts through f64 and saturates: NaN -> 0,
  // x <= min -> min, x >= max -> max, else truncation toward zero.
  unsigned width = to.getIntOrFloatBitWidth();
  bool isUnsigned = to.isUnsignedInteger();
  Type t = lowered(to);
  double lo, hi;
  int64_t loInt, hiInt;
  if (isUnsigned) {
    lo = 0;
    loInt = 0;
    hiInt = (int64_t(1) << width) - 1;
    hi = double(hiInt);
  } else {
    loInt = width == 64 ? std::numeric_limits<int64_t>::min()
                        : -(int64_t(1) << (width - 1));
    hiInt = width == 64 ? std::numeric_limits<int64_t>::max()
                        : (int64_t(1) << (width - 1)) - 1;
    lo = double(loInt);
    hi = double(hiInt);
  }
  Type f64 = builder.getF64Type();
  Value converted = isUnsigned
                        ? Value(arith::FPToUIOp::create(builder, loc, t, d))
                        : Value(arith::FPToSIOp::create(builder, loc, t, d));
  Value tooLow = arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::OLE,
                                       d, floatConstant(f64, lo));
  Value tooHigh = arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::OGE,
                                        d, floatConstant(f64, hi));
  Value r = arith::SelectOp::create(builder, loc, tooHigh,
                                    intConstant(t, hiInt), converted);
  r = arith::SelectOp::create(builder, loc, tooLow, intConstant(t, loInt), r);
  Value nan = isNaN(d);
  return arith::SelectOp::create(builder, loc, nan, intConstant(t, 0), r);
}

Value ScalarBuilder::cast(Value x, Type from, Type to) {
  if (from == to)
    return x;
  Type f32 = builder.getF32Type(), f64 = builder.getF64Type();
  Type loweredTo = lowered(to);

  if (isa<FloatType>(from)) {
    Value v = toCompute(x); // f32 or f64
    if (auto floatTo = dyn_cast<FloatType>(to)) {
      if (floatTo.isF64())
        return v.getType().isF64()
                   ? v
                   : Value(arith::ExtFOp::create(builder, loc, f64, v));
      if (v.getType().isF64())
        v = arith::TruncFOp::create(builder, loc, f32, v);
      return fromCompute(v, to);
    }
    if (to.isInteger(1))
      return arith::CmpFOp::create(builder, loc, arith::CmpFPredicate::UNE, v,
                                   floatConstant(v.getType(), 0.0));
    if (!v.getType().isF64())
      v = arith::ExtFOp::create(builder, loc, f64, v);
    return floatToInt(v, to);
  }

  bool isUnsigned = from.isUnsignedInteger() || from.isInteger(1);
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  if (auto floatTo = dyn_cast<FloatType>(to)) {
    // One rounding, to f64 or to f32 (f16 and bf16 from that f32), as the
    // interpreter: a 64-bit integer through f64 would round twice.
    Type first = floatTo.isF64() ? f64 : f32;
    Value v = isUnsigned
                  ? Value(arith::UIToFPOp::create(builder, loc, first, x))
                  : Value(arith::SIToFPOp::create(builder, loc, first, x));
    if (floatTo.isF64())
      return v;
    if (v.getType().isF64())
      v = arith::TruncFOp::create(builder, loc, f32, v);
    return fromCompute(v, to);
  }
  if (to.isInteger(1))
    return arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne, x,
                                 intConstant(x.getType(), 0));
  unsigned toWidth = to.getIntOrFloatBitWidth();
  if (toWidth == fromWidth)
    return x; // i8 <-> ui8: same bits
  if (toWidth < fromWidth)
    return arith::TruncIOp::create(builder, loc, loweredTo, x);
  return isUnsigned ? Value(arith::ExtUIOp::create(builder, loc, loweredTo, x))
                    : Value(arith::ExtSIOp::create(builder, loc, loweredTo, x));
}

Value ScalarBuilder::randomBits(Value seed, Value counter) {
  Type i64 = builder.getI64Type();
  auto constant = [&](uint64_t v) {
    return arith::ConstantOp::create(builder, loc, i64,
                                     builder.getIntegerAttr(i64, APInt(64, v)));
  };
  auto xorShift = [&](Value z, uint64_t shift) -> Value {
    Value shifted = arith::ShRUIOp::create(builder, loc, z, constant(shift));
    return arith::XOrIOp::create(builder, loc, z, shifted);
  };
  auto times = [&](Value z, uint64_t factor) -> Value {
    Value c = constant(factor);
    return arith::MulIOp::create(builder, loc, z, c);
  };
  // z = seed + (counter + 1) * golden
  Value next = arith::AddIOp::create(builder, loc, counter, constant(1));
  Value z = arith::AddIOp::create(builder, loc, seed,
                                  times(next, 0x9E3779B97F4A7C15ull));
  z = times(xorShift(z, 30), 0xBF58476D1CE4E5B9ull);
  z = times(xorShift(z, 27), 0x94D049BB133111EBull);
  return xorShift(z, 31);
}

/// (bits >> 40) + add, as f64 times 2^-24.
static Value scaledTop24(ScalarBuilder &s, OpBuilder &builder, Location loc,
                         Value bits, int64_t add) {
  Type i64 = builder.getI64Type(), f64 = builder.getF64Type();
  Value top =
      arith::ShRUIOp::create(builder, loc, bits, s.intConstant(i64, 40));
  if (add)
    top = arith::AddIOp::create(builder, loc, top, s.intConstant(i64, add));
  Value d = arith::UIToFPOp::create(builder, loc, f64, top);
  return arith::MulFOp::create(builder, loc, d,
                               s.floatConstant(f64, 0x1.0p-24));
}

Value ScalarBuilder::uniformAt(Value seed, Value index) {
  return scaledTop24(*this, builder, loc, randomBits(seed, index), 0);
}

Value ScalarBuilder::normalAt(Value seed, Value index) {
  Type i64 = builder.getI64Type(), f64 = builder.getF64Type();
  Value twice = arith::MulIOp::create(builder, loc, index, intConstant(i64, 2));
  Value next = arith::AddIOp::create(builder, loc, twice, intConstant(i64, 1));
  Value u1 = scaledTop24(*this, builder, loc, randomBits(seed, twice), 1);
  Value u2 = scaledTop24(*this, builder, loc, randomBits(seed, next), 0);
  // sqrt(-2 * log(u1)) * cos(2 pi * u2)
  Value logU1 = math::LogOp::create(builder, loc, u1);
  Value minusTwoLog =
      arith::MulFOp::create(builder, loc, floatConstant(f64, -2.0), logU1);
  Value radius = math::SqrtOp::create(builder, loc, minusTwoLog);
  Value angle = arith::MulFOp::create(
      builder, loc, floatConstant(f64, 6.283185307179586), u2);
  Value cosine = math::CosOp::create(builder, loc, angle);
  return arith::MulFOp::create(builder, loc, radius, cosine);
}

Value ScalarBuilder::intPow(Value base, Value exponent, bool isUnsigned) {
  // Square-and-multiply over every exponent bit, branch-free, wrapping like
  // the interpreter's intPow. (math.ipowi would need convert-math-to-funcs,
  // whose helper divides by zero for 0 ** negative.)
  Type t = base.getType();
  unsigned width = t.getIntOrFloatBitWidth();
  Value one = intConstant(t, 1);
  Value zero = intConstant(t, 0);
  Value result = one;
  Value power = base;
  for (unsigned bit = 0; bit < width; ++bit) {
    Value shifted =
        arith::ShRUIOp::create(builder, loc, exponent, intConstant(t, bit));
    Value low = arith::AndIOp::create(builder, loc, shifted, one);
    Value set = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne,
                                      low, zero);
    Value product = arith::MulIOp::create(builder, loc, result, power);
    result = arith::SelectOp::create(builder, loc, set, product, result);
    if (bit + 1 < width)
      power = arith::MulIOp::create(builder, loc, power, power);
  }
  if (isUnsigned)
    return result;
  // Negative exponents: 1 for base 1, +-1 for base -1, else 0.
  Value negative = arith::CmpIOp::create(
      builder, loc, arith::CmpIPredicate::slt, exponent, zero);
  Value minusOne = intConstant(t, -1);
  Value odd = arith::CmpIOp::create(
      builder, loc, arith::CmpIPredicate::ne,
      arith::AndIOp::create(builder, loc, exponent, one), zero);
  Value signedOne = arith::SelectOp::create(builder, loc, odd, minusOne, one);
  Value isOne =
      arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, base, one);
  Value isMinusOne = arith::CmpIOp::create(
      builder, loc, arith::CmpIPredicate::eq, base, minusOne);
  Value small =
      arith::SelectOp::create(builder, loc, isMinusOne, signedOne, zero);
  small = arith::SelectOp::create(builder, loc, isOne, one, small);
  return arith::SelectOp::create(builder, loc, negative, small, result);
}
