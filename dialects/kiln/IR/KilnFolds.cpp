//===- KilnFolds.cpp - kiln folders ---------------------------------------===//
//
// Folders for recorded code: constants (splats of any size, other constants
// up to kMaxFoldedElements elements), algebraic identities that hold bit for
// bit (x + 0 for integers, x + -0.0 for floats, x - 0, x * 1, x * 0 for
// integers, -(-x)), and chains of shape ops (reshape of reshape, permute of
// permute, broadcast_to of broadcast_to, slice of slice) folded in place.
// Constant arithmetic follows the runtime: f16 and bf16 compute in f32.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::kiln;

/// Non-splat constants larger than this are not folded.
static constexpr int64_t kMaxFoldedElements = 64;

/// The semantics a float element type computes in: f16 and bf16 in f32.
static const llvm::fltSemantics &computeSemantics(FloatType type) {
  if (type.isF16() || type.isBF16())
    return APFloat::IEEEsingle();
  return type.getFloatSemantics();
}

static APFloat convertFloat(APFloat value, const llvm::fltSemantics &to) {
  bool losesInfo = false;
  value.convert(to, APFloat::rmNearestTiesToEven, &losesInfo);
  return value;
}

/// Rounds a value to `type`; f16 and bf16 round through f32, as the runtime
/// does.
static APFloat roundTo(APFloat value, FloatType type) {
  if (type.isF16() || type.isBF16())
    value = convertFloat(value, APFloat::IEEEsingle());
  return convertFloat(value, type.getFloatSemantics());
}

DenseElementsAttr FullOp::getSplatValue() {
  RankedTensorType type = getType();
  Type elementType = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    auto value = dyn_cast<FloatAttr>(getValue());
    if (!value)
      return {};
    return DenseElementsAttr::get(type, roundTo(value.getValue(), floatType));
  }
  auto value = dyn_cast<IntegerAttr>(getValue());
  if (!value || !elementType.isIntOrIndex())
    return {};
  APInt v = value.getValue();
  unsigned width = elementType.getIntOrFloatBitWidth();
  if (width == 1)
    return DenseElementsAttr::get(type, APInt(1, !v.isZero()));
  bool zeroExtend =
      value.getType().isUnsignedInteger() || value.getType().isInteger(1);
  return DenseElementsAttr::get(type, zeroExtend ? v.zextOrTrunc(width)
                                                 : v.sextOrTrunc(width));
}

OpFoldResult FullOp::fold(FoldAdaptor) { return getSplatValue(); }

//===----------------------------------------------------------------------===//
// Constant arithmetic.
//===----------------------------------------------------------------------===//

using FloatFn = function_ref<APFloat(ArrayRef<APFloat>)>;
using IntFn = function_ref<APInt(ArrayRef<APInt>)>;

/// Folds an elementwise op whose operands are all constants and whose
/// operands and result share one element type. Splats broadcast to any
/// shape; other constants must already have the result's shape.
static Attribute foldElementwise(ArrayRef<Attribute> operands,
                                 RankedTensorType resultType, FloatFn floatFn,
                                 IntFn intFn) {
  if (!resultType.hasStaticShape())
    return {};
  SmallVector<DenseElementsAttr> inputs;
  bool allSplat = true;
  for (Attribute attr : operands) {
    auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
    if (!dense ||
        dense.getType().getElementType() != resultType.getElementType())
      return {};
    if (!dense.isSplat() && dense.getType().getShape() != resultType.getShape())
      return {};
    allSplat &= dense.isSplat();
    inputs.push_back(dense);
  }
  if (!allSplat && resultType.getNumElements() > kMaxFoldedElements)
    return {};
  int64_t count = allSplat ? 1 : resultType.getNumElements();

  if (auto floatType = dyn_cast<FloatType>(resultType.getElementType())) {
    SmallVector<APFloat> results;
    for (int64_t i = 0; i < count; ++i) {
      SmallVector<APFloat> args;
      for (DenseElementsAttr input : inputs) {
        APFloat v = input.isSplat() ? input.getSplatValue<APFloat>()
                                    : input.getValues<APFloat>()[i];
        args.push_back(convertFloat(v, computeSemantics(floatType)));
      }
      results.push_back(roundTo(floatFn(args), floatType));
    }
    return DenseElementsAttr::get(resultType, results);
  }
  SmallVector<APInt> results;
  for (int64_t i = 0; i < count; ++i) {
    SmallVector<APInt> args;
    for (DenseElementsAttr input : inputs)
      args.push_back(input.isSplat() ? input.getSplatValue<APInt>()
                                     : input.getValues<APInt>()[i]);
    results.push_back(intFn(args));
  }
  return DenseElementsAttr::get(resultType, results);
}

/// Is `attr` a splat constant equal to `value` (floats compare bitwise, so
/// 0.0 and -0.0 differ)?
static bool isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type elementType = dense.getType().getElementType();
  if (isa<FloatType>(elementType)) {
    APFloat v =
        convertFloat(dense.getSplatValue<APFloat>(), APFloat::IEEEdouble());
    return v.bitwiseIsEqual(APFloat(value));
  }
  APInt v = dense.getSplatValue<APInt>();
  return v == APInt(v.getBitWidth(), static_cast<int64_t>(value),
                    /*isSigned=*/true, /*implicitTrunc=*/true);
}

/// `value` when it already has the op's result type (so dropping the other
/// operand needs no broadcast), else null.
static Value sameTypeAsResult(Value value, Operation *op) {
  return value.getType() == op->getResult(0).getType() ? value : Value();
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return foldElementwise(
      {adaptor.getInput()}, getType(),
      [](ArrayRef<APFloat> a) {
        APFloat r = a[0];
        r.changeSign();
        return r;
      },
      [](ArrayRef<APInt> a) { return -a[0]; });
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (Attribute folded = foldElementwise(
          {adaptor.getLhs(), adaptor.getRhs()}, getType(),
          [](ArrayRef<APFloat> a) { return a[0] + a[1]; },
          [](ArrayRef<APInt> a) { return a[0] + a[1]; }))
    return folded;
  // x + 0 == x for integers; for floats only x + -0.0 == x (-0.0 + 0.0 is
  // +0.0).
  double zero = isa<FloatType>(getType().getElementType()) ? -0.0 : 0.0;
  if (isSplatOf(adaptor.getRhs(), zero))
    if (Value x = sameTypeAsResult(getLhs(), *this))
      return x;
  if (isSplatOf(adaptor.getLhs(), zero))
    if (Value x = sameTypeAsResult(getRhs(), *this))
      return x;
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (Attribute folded = foldElementwise(
          {adaptor.getLhs(), adaptor.getRhs()}, getType(),
          [](ArrayRef<APFloat> a) { return a[0] - a[1]; },
          [](ArrayRef<APInt> a) { return a[0] - a[1]; }))
    return folded;
  if (isSplatOf(adaptor.getRhs(), 0.0))
    if (Value x = sameTypeAsResult(getLhs(), *this))
      return x;
  return {};
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (Attribute folded = foldElementwise(
          {adaptor.getLhs(), adaptor.getRhs()}, getType(),
          [](ArrayRef<APFloat> a) { return a[0] * a[1]; },
          [](ArrayRef<APInt> a) { return a[0] * a[1]; }))
    return folded;
  if (isSplatOf(adaptor.getRhs(), 1.0))
    if (Value x = sameTypeAsResult(getLhs(), *this))
      return x;
  if (isSplatOf(adaptor.getLhs(), 1.0))
    if (Value x = sameTypeAsResult(getRhs(), *this))
      return x;
  // x * 0 == 0 for integers (not floats: NaN, inf and signed zeros).
  Type elementType = getType().getElementType();
  if (isa<IntegerType>(elementType) && getType().hasStaticShape() &&
      (isSplatOf(adaptor.getLhs(), 0.0) || isSplatOf(adaptor.getRhs(), 0.0)))
    return DenseElementsAttr::get(
        getType(), APInt::getZero(elementType.getIntOrFloatBitWidth()));
  return {};
}

//===----------------------------------------------------------------------===//
// Cast.
//===----------------------------------------------------------------------===//

/// One element converted with kiln.cast semantics (see KilnOps.td and the
/// runtime's cast kernel), or nullopt where the result is not a plain value
/// of the destination.
static std::optional<Attribute> castElement(Attribute element, Type to) {
  Type from = cast<TypedAttr>(element).getType();
  if (auto floatAttr = dyn_cast<FloatAttr>(element)) {
    // Float sources convert through f64 (f16 and bf16 through f32 first).
    APFloat v = convertFloat(floatAttr.getValue(), APFloat::IEEEdouble());
    if (auto floatTo = dyn_cast<FloatType>(to))
      return FloatAttr::get(floatTo, roundTo(v, floatTo));
    if (to.isInteger(1))
      return IntegerAttr::get(to, APInt(1, !v.isZero()));
    // Float to integer saturates and maps NaN to 0 in the runtime; only
    // fold values that are in range.
    unsigned width = to.getIntOrFloatBitWidth();
    APSInt result(width, /*isUnsigned=*/to.isUnsignedInteger());
    bool isExact = false;
    if (v.convertToInteger(result, APFloat::rmTowardZero, &isExact) &
        APFloat::opInvalidOp)
      return std::nullopt;
    return IntegerAttr::get(to, result);
  }
  auto intAttr = dyn_cast<IntegerAttr>(element);
  if (!intAttr)
    return std::nullopt;
  APInt v = intAttr.getValue();
  bool isUnsigned = from.isUnsignedInteger() || from.isInteger(1);
  if (auto floatTo = dyn_cast<FloatType>(to)) {
    // Integers round once, to f64 or to f32 (f16 and bf16 from that f32).
    APFloat d(floatTo.isF64() ? APFloat::IEEEdouble() : APFloat::IEEEsingle());
    d.convertFromAPInt(v, /*IsSigned=*/!isUnsigned,
                       APFloat::rmNearestTiesToEven);
    return FloatAttr::get(floatTo, roundTo(d, floatTo));
  }
  unsigned width = to.getIntOrFloatBitWidth();
  if (width == 1)
    return IntegerAttr::get(to, APInt(1, !v.isZero()));
  return IntegerAttr::get(to, isUnsigned ? v.zextOrTrunc(width)
                                         : v.sextOrTrunc(width));
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (!dense || !getType().hasStaticShape() ||
      (!dense.isSplat() && dense.getNumElements() > kMaxFoldedElements))
    return {};
  Type to = getType().getElementType();
  SmallVector<Attribute> elements;
  for (Attribute element :
       dense.isSplat()
           ? SmallVector<Attribute>{dense.getSplatValue<Attribute>()}
           : llvm::to_vector(dense.getValues<Attribute>())) {
    std::optional<Attribute> converted = castElement(element, to);
    if (!converted)
      return {};
    elements.push_back(*converted);
  }
  return DenseElementsAttr::get(getType(), elements);
}

//===----------------------------------------------------------------------===//
// Shape ops.
//===----------------------------------------------------------------------===//

/// A splat constant re-shaped to `type`, or null.
static Attribute reshapeSplat(Attribute input, ShapedType type) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(input);
  if (!dense || !dense.isSplat() || !type.hasStaticShape())
    return {};
  return dense.resizeSplat(type);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
      dense && getType().hasStaticShape())
    return dense.reshape(getType());
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult PermuteOp::fold(FoldAdaptor adaptor) {
  int64_t rank = getType().getRank();
  auto normalized = [rank](ArrayRef<int64_t> perm) {
    SmallVector<int64_t> r;
    for (int64_t p : perm)
      r.push_back(p < 0 ? p + rank : p);
    return r;
  };
  SmallVector<int64_t> perm = normalized(getPerm());
  if (llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    return getInput();
  if (Attribute splat = reshapeSplat(adaptor.getInput(), getType()))
    return splat;
  if (auto inner = getInput().getDefiningOp<PermuteOp>()) {
    // permute(permute(x, p1), p2)[i] reads x's axis p1[p2[i]].
    SmallVector<int64_t> innerPerm = normalized(inner.getPerm());
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(innerPerm[p]);
    setPerm(composed);
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (Attribute splat = reshapeSplat(adaptor.getInput(), getType()))
    return splat;
  // Broadcasts compose: broadcast_to(broadcast_to(x, a), b) is
  // broadcast_to(x, b).
  if (auto inner = getInput().getDefiningOp<BroadcastToOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> inShape = getInput().getType().getShape();
  ArrayRef<int64_t> outShape = getType().getShape();
  ArrayRef<int64_t> starts = getStarts(), steps = getSteps();
  bool identity = inShape == outShape;
  for (size_t i = 0; identity && i < inShape.size(); ++i)
    identity = outShape[i] == 0 ||
               (starts[i] == 0 && (steps[i] == 1 || outShape[i] == 1));
  if (identity)
    return getInput();
  if (Attribute splat = reshapeSplat(adaptor.getInput(), getType()))
    return splat;
  if (auto inner = getInput().getDefiningOp<SliceOp>()) {
    // Element k of the outer slice is inner element s2 + k*t2, which is input
    // element s1 + (s2 + k*t2)*t1.
    SmallVector<int64_t> newStarts, newSteps;
    for (size_t i = 0; i < outShape.size(); ++i) {
      if (outShape[i] == 0) {
        newStarts.push_back(0);
        newSteps.push_back(1);
        continue;
      }
      newStarts.push_back(inner.getStarts()[i] +
                          starts[i] * inner.getSteps()[i]);
      newSteps.push_back(outShape[i] == 1 ? 1 : steps[i] * inner.getSteps()[i]);
    }
    setStarts(newStarts);
    setSteps(newSteps);
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}
