//===- KilnToLinalg.cpp - kiln to linalg/tensor/arith/math ----------------===//
//
// One OpConversionPattern per op family. Element computations come from
// ScalarOps.h; this file builds the linalg/tensor structure around them.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/Conversion/KilnToLinalg/KilnToLinalg.h"

#include "dialects/kiln/Conversion/KilnToLinalg/ScalarOps.h"
#include "dialects/kiln/Conversion/Passes.h"
#include "dialects/kiln/IR/KilnAttributes.h"
#include "dialects/kiln/IR/KilnOps.h"
#include "dialects/kiln/IR/KilnTypes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <limits>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNCONVERTTOLINALG
#include "dialects/kiln/Conversion/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;
using ::kiln::core::OpKind;

//===----------------------------------------------------------------------===//
// Helpers.
//===----------------------------------------------------------------------===//

static RankedTensorType tensorTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

static bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

/// `dynamicSizes` holds one index value per dynamic extent of `type`.
static Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                         ValueRange dynamicSizes = {}) {
  return tensor::EmptyOp::create(b, loc, type, dynamicSizes);
}

static Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                          Value value, ValueRange dynamicSizes = {}) {
  return linalg::FillOp::create(
             b, loc, ValueRange{value},
             ValueRange{emptyTensor(b, loc, type, dynamicSizes)})
      .getResult(0);
}

/// Static extents of `type` and its dynamic ones from `dynamicSizes`.
static SmallVector<OpFoldResult> mixedSizes(OpBuilder &b,
                                            RankedTensorType type,
                                            ValueRange dynamicSizes) {
  SmallVector<OpFoldResult> sizes;
  size_t next = 0;
  for (int64_t extent : type.getShape())
    sizes.push_back(ShapedType::isDynamic(extent)
                        ? OpFoldResult(dynamicSizes[next++])
                        : OpFoldResult(b.getIndexAttr(extent)));
  return sizes;
}

/// The values among `sizes` (the dynamic extents), in order.
static SmallVector<Value> dynamicOf(ArrayRef<OpFoldResult> sizes) {
  SmallVector<Value> values;
  for (OpFoldResult size : sizes)
    if (auto value = dyn_cast<Value>(size))
      values.push_back(value);
  return values;
}

/// The sizes of `op`'s dynamic result extents (see kSizesAttr), in axis
/// order; empty for a static result; failure when the op does not say which
/// sizes they are.
static FailureOr<SmallVector<Value>> resultSizes(Operation *op,
                                                 RankedTensorType type) {
  SmallVector<Value> sizes;
  if (type.hasStaticShape())
    return sizes;
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>(kSizesAttr);
  auto func = op->getParentOfType<func::FuncOp>();
  if (!axes || !func || axes.size() != type.getRank())
    return failure();
  auto count = func->getAttrOfType<IntegerAttr>(kDynamicSizesAttr);
  Block *block = op->getBlock();
  if (!count || !block || block->getParentOp() != func.getOperation() ||
      static_cast<int64_t>(block->getNumArguments()) < count.getInt())
    return failure();
  const int64_t first = block->getNumArguments() - count.getInt();
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!type.isDynamicDim(d))
      continue;
    int64_t size = axes[d];
    if (size < 0 || size >= count.getInt())
      return failure();
    Value arg = block->getArgument(first + size);
    if (!arg.getType().isIndex())
      return failure();
    sizes.push_back(arg);
  }
  return sizes;
}

/// Zero of a lowered element type.
static Value zeroOf(ScalarBuilder &s, Type type) {
  return isa<FloatType>(type) ? s.floatConstant(type, 0.0)
                              : s.intConstant(type, 0);
}

/// Reads an operand of type `in` broadcast NumPy-style (trailing-aligned) to
/// `out`: an extent-1 axis that broadcasts reads index 0.
static AffineMap broadcastMap(RankedTensorType in, RankedTensorType out) {
  MLIRContext *context = in.getContext();
  int64_t offset = out.getRank() - in.getRank();
  SmallVector<AffineExpr> exprs;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (in.getDimSize(i) == 1 && out.getDimSize(offset + i) != 1)
      exprs.push_back(getAffineConstantExpr(0, context));
    else
      exprs.push_back(getAffineDimExpr(offset + i, context));
  }
  return AffineMap::get(out.getRank(), 0, exprs, context);
}

using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// A parallel linalg.generic producing `resultType` from `inputs` broadcast to
/// it; `body` computes one element from the inputs' elements.
static Value buildElementwise(OpBuilder &b, Location loc, ValueRange inputs,
                              RankedTensorType resultType, BodyFn body,
                              ValueRange dynamicSizes = {}) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(broadcastMap(tensorTypeOf(input), resultType));
  maps.push_back(b.getMultiDimIdentityMap(resultType.getRank()));
  SmallVector<utils::IteratorType> iterators(resultType.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs,
      ValueRange{emptyTensor(b, loc, resultType, dynamicSizes)}, maps,
      iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value element = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, element);
      });
  return generic.getResult(0);
}

/// `result`, computed in f32 for an f16/bf16 op (else in `type`'s own
/// element type, returned as it is), rounded to `type`.
static Value fromComputeType(OpBuilder &b, Location loc, Value result,
                             RankedTensorType type,
                             ValueRange dynamicSizes = {}) {
  Type elementType = type.getElementType();
  if (tensorTypeOf(result).getElementType() == elementType)
    return result;
  return buildElementwise(
      b, loc, {result}, type,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        return ScalarBuilder(nb, nloc).fromCompute(args[0], elementType);
      },
      dynamicSizes);
}

/// Row-major reshape between static shapes with the same element count:
/// one collapse_shape or expand_shape when that suffices, otherwise through
/// a 1-D tensor. With dynamic extents always through a 1-D tensor;
/// `targetSizes` then gives the target's extents (null when a rank-0 side
/// makes that impossible).
static Value reshapeTensor(OpBuilder &b, Location loc, Value source,
                           RankedTensorType targetType,
                           ArrayRef<OpFoldResult> targetSizes = {}) {
  RankedTensorType sourceType = tensorTypeOf(source);
  if (sourceType == targetType)
    return source;
  auto allAxes = [](int64_t rank) {
    ReassociationIndices group;
    for (int64_t i = 0; i < rank; ++i)
      group.push_back(i);
    return SmallVector<ReassociationIndices>{group};
  };
  if (!sourceType.hasStaticShape() || !targetType.hasStaticShape()) {
    if (sourceType.getRank() == 0 || targetType.getRank() == 0 ||
        targetSizes.size() != static_cast<size_t>(targetType.getRank()))
      return {};
    Value flat = source;
    if (sourceType.getRank() != 1)
      flat = tensor::CollapseShapeOp::create(b, loc, source,
                                             allAxes(sourceType.getRank()));
    if (targetType.getRank() == 1)
      return flat.getType() == targetType
                 ? flat
                 : Value(tensor::CastOp::create(b, loc, targetType, flat));
    return tensor::ExpandShapeOp::create(b, loc, targetType, flat,
                                         allAxes(targetType.getRank()),
                                         targetSizes);
  }
  if (sourceType.getRank() == 0)
    return tensor::ExpandShapeOp::create(b, loc, targetType, source,
                                         ArrayRef<ReassociationIndices>{});
  if (targetType.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, targetType, source,
                                           ArrayRef<ReassociationIndices>{});
  if (std::optional<SmallVector<ReassociationIndices>> reassociation =
          getReassociationIndicesForReshape(sourceType, targetType)) {
    if (sourceType.getRank() > targetType.getRank())
      return tensor::CollapseShapeOp::create(b, loc, targetType, source,
                                             *reassociation);
    return tensor::ExpandShapeOp::create(b, loc, targetType, source,
                                         *reassociation);
  }
  auto all = [](int64_t rank) {
    ReassociationIndices group;
    for (int64_t i = 0; i < rank; ++i)
      group.push_back(i);
    return SmallVector<ReassociationIndices>{group};
  };
  Value flat = source;
  if (sourceType.getRank() != 1)
    flat = tensor::CollapseShapeOp::create(
        b, loc,
        RankedTensorType::get({sourceType.getNumElements()},
                              sourceType.getElementType()),
        source, all(sourceType.getRank()));
  if (targetType.getRank() == 1)
    return flat;
  return tensor::ExpandShapeOp::create(b, loc, targetType, flat,
                                       all(targetType.getRank()));
}

/// `linalg.index` of loop `dim` as an i64.
static Value loopIndexI64(OpBuilder &b, Location loc, int64_t dim) {
  Value index = linalg::IndexOp::create(b, loc, dim);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

/// Clamps an i64 index into [0, extent - 1] and makes it an `index`.
static Value clampIndex(OpBuilder &b, Location loc, Value index,
                        int64_t extent) {
  ScalarBuilder s(b, loc);
  Type i64 = b.getI64Type();
  Value clamped =
      arith::MinSIOp::create(b, loc, index, s.intConstant(i64, extent - 1));
  clamped = arith::MaxSIOp::create(b, loc, clamped, s.intConstant(i64, 0));
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), clamped);
}

namespace {

/// Base of the kiln patterns: converts result types with the type converter.
template <typename OpTy> class KilnPattern : public OpConversionPattern<OpTy> {
public:
  using OpConversionPattern<OpTy>::OpConversionPattern;

protected:
  RankedTensorType convertType(Type type) const {
    return dyn_cast_or_null<RankedTensorType>(
        this->getTypeConverter()->convertType(type));
  }
};

//===----------------------------------------------------------------------===//
// Leaves.
//===----------------------------------------------------------------------===//

/// Splats with more elements than this are computed by a loop (a
/// linalg.generic yielding the scalar, which fusion moves into its consumers)
/// rather than stored: a stored constant becomes a global holding every
/// element in the kernel's object (16 MB for full({2048, 2048})), and
/// constant folders expand it element by element (out of memory for
/// full({2^31, 2^31})). Small ones stay arith.constant, which fusion folds
/// into each consumer's body.
static constexpr int64_t kMaxStoredSplatElements = 64;

class FullLowering : public KilnPattern<FullOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(FullOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    DenseElementsAttr splat = op.getSplatValue();
    if (!type || !splat)
      return rewriter.notifyMatchFailure(op, "value does not fit the type");
    if (splat.getType() != type)
      splat = splat.bitcast(type.getElementType());
    if (type.getNumElements() <= kMaxStoredSplatElements) {
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, splat);
      return success();
    }
    auto scalar = cast<TypedAttr>(splat.getSplatValue<Attribute>());
    rewriter.replaceOp(
        op, buildElementwise(rewriter, op.getLoc(), {}, type,
                             [&](OpBuilder &b, Location loc, ValueRange) {
                               return arith::ConstantOp::create(b, loc,
                                                                scalar)
                                   .getResult();
                             }));
    return success();
  }
};

/// `arith.constant`s of ui8 tensors (folded kiln constants) become i8.
class ArithConstantLowering : public KilnPattern<arith::ConstantOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(arith::ConstantOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!type || !dense)
      return rewriter.notifyMatchFailure(op, "not a dense tensor constant");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, type, dense.bitcast(type.getElementType()));
    return success();
  }
};

class ArangeLowering : public KilnPattern<ArangeOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ArangeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Type elementType = op.getType().getElementType();
    double start = op.getStartAttr().getValueAsDouble();
    double step = op.getStepAttr().getValueAsDouble();
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    Value result = buildElementwise(
        rewriter, op.getLoc(), {}, type,
        [&](OpBuilder &b, Location loc, ValueRange) {
          ScalarBuilder s(b, loc);
          Type f64 = b.getF64Type();
          Value i =
              arith::SIToFPOp::create(b, loc, f64, loopIndexI64(b, loc, 0));
          Value scaled =
              arith::MulFOp::create(b, loc, i, s.floatConstant(f64, step));
          Value v = arith::AddFOp::create(b, loc, s.floatConstant(f64, start),
                                          scaled);
          return s.cast(v, f64, elementType);
        },
        *sizes);
    rewriter.replaceOp(op, result);
    return success();
  }
};

template <typename OpTy, bool isNormal>
class RandomLowering : public KilnPattern<OpTy> {
public:
  using KilnPattern<OpTy>::KilnPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = this->convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Type elementType = op.getType().getElementType();
    int64_t seed = static_cast<int64_t>(op.getSeed());
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    // Row-major strides give each element its linear index (the counter);
    // with dynamic extents they are computed once, before the loops.
    Location opLoc = op.getLoc();
    Type i64Type = rewriter.getI64Type();
    SmallVector<OpFoldResult> extents = mixedSizes(rewriter, type, *sizes);
    SmallVector<Value> strides(type.getRank());
    {
      ScalarBuilder s(rewriter, opLoc);
      Value stride = s.intConstant(i64Type, 1);
      for (int64_t d = type.getRank() - 1; d >= 0; --d) {
        strides[d] = stride;
        if (d == 0)
          break;
        Value extent;
        if (auto value = dyn_cast<Value>(extents[d]))
          extent = arith::IndexCastOp::create(rewriter, opLoc, i64Type, value);
        else
          extent = s.intConstant(i64Type, type.getDimSize(d));
        stride = arith::MulIOp::create(rewriter, opLoc, stride, extent);
      }
    }
    Value result =
        buildElementwise(rewriter, op.getLoc(), {}, type,
                         [&](OpBuilder &b, Location loc, ValueRange) {
                           ScalarBuilder s(b, loc);
                           Type i64 = b.getI64Type();
                           Value linear = s.intConstant(i64, 0);
                           for (int64_t d = 0; d < type.getRank(); ++d) {
                             Value index = loopIndexI64(b, loc, d);
                             Value offset = arith::MulIOp::create(
                                 b, loc, index, strides[d]);
                             linear =
                                 arith::AddIOp::create(b, loc, linear, offset);
                           }
                           Value seedValue = s.intConstant(i64, seed);
                           Value v = isNormal ? s.normalAt(seedValue, linear)
                                              : s.uniformAt(seedValue, linear);
                           return s.cast(v, b.getF64Type(), elementType);
                         },
                         *sizes);
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Elementwise ops.
//===----------------------------------------------------------------------===//

/// The op table's dtype rule (core::acceptsDType), which the ODS constraints
/// agree with; a pattern never builds a body it cannot finish.
static bool isSupported(OpKind kind, Type type) {
  std::optional<::kiln::DType> dtype = getDType(type);
  return dtype && ::kiln::core::acceptsDType(kind, *dtype);
}

/// The one lowering of the unary, binary and comparison ops: a parallel
/// linalg.generic over the broadcast operands whose body is the op's scalar
/// semantics (ScalarBuilder). One instance is registered per op-table row of
/// those categories, rooted at `kiln.<mnemonic>`.
class ElementwiseLowering : public ConversionPattern {
public:
  ElementwiseLowering(const TypeConverter &typeConverter, MLIRContext *context,
                      OpKind kind)
      : ConversionPattern(typeConverter,
                          "kiln." + std::string(::kiln::core::opName(kind)),
                          /*benefit=*/1, context),
        kind(kind) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (op->getNumResults() != 1 || op->getNumOperands() == 0)
      return rewriter.notifyMatchFailure(op, "not an elementwise op");
    auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    auto operandType = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
    if (!resultType || !operandType)
      return rewriter.notifyMatchFailure(op, "operands are not ranked tensors");
    RankedTensorType type = dyn_cast_or_null<RankedTensorType>(
        getTypeConverter()->convertType(resultType));
    // Kiln-level element types: they say how to read the lowered values.
    Type elementType = operandType.getElementType();
    if (!type || !isSupported(kind, elementType))
      return rewriter.notifyMatchFailure(op, "unsupported element type");
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    const ::kiln::core::OpCategory category = ::kiln::core::opCategory(kind);
    bool built = true;
    Value result = buildElementwise(
        rewriter, op->getLoc(), operands, type,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          ScalarBuilder s(b, loc);
          Value element;
          if (category == ::kiln::core::OpCategory::Unary)
            element = s.unary(kind, elementType, args[0],
                              op->hasAttr(kNonPositiveOperandAttr));
          else if (category == ::kiln::core::OpCategory::Binary)
            element = s.binary(kind, elementType, args[0], args[1]);
          else
            element = s.compare(kind, elementType, args[0], args[1]);
          if (!element) {
            // Keep the body valid; the pattern reports failure below.
            built = false;
            element = zeroOf(s, type.getElementType());
          }
          return element;
        },
        *sizes);
    if (!built) // the conversion rolls back what the pattern created
      return rewriter.notifyMatchFailure(op, "no scalar semantics for the op");
    rewriter.replaceOp(op, result);
    return success();
  }

private:
  OpKind kind;
};

class WhereLowering : public KilnPattern<WhereOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(WhereOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    Value result = buildElementwise(
        rewriter, op.getLoc(), adaptor.getOperands(), type,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          if (!args[1].getType().isBF16())
            return arith::SelectOp::create(b, loc, args[0], args[1], args[2]);
          // A bfloat `select` is promoted through f32 by LLVM's x86 backend,
          // which calls __truncsfbf2 (unavailable to the JIT): select bits.
          Type i16 = b.getIntegerType(16);
          Value x = arith::BitcastOp::create(b, loc, i16, args[1]);
          Value y = arith::BitcastOp::create(b, loc, i16, args[2]);
          Value bits = arith::SelectOp::create(b, loc, args[0], x, y);
          return arith::BitcastOp::create(b, loc, b.getBF16Type(), bits);
        },
        *sizes);
    rewriter.replaceOp(op, result);
    return success();
  }
};

class CastLowering : public KilnPattern<CastOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(CastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Type from = op.getInput().getType().getElementType();
    Type to = op.getType().getElementType();
    if (adaptor.getInput().getType() == type) {
      // Same lowered type (identity, or i8 <-> ui8): nothing to compute.
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    Value result =
        buildElementwise(rewriter, op.getLoc(), adaptor.getOperands(), type,
                         [&](OpBuilder &b, Location loc, ValueRange args) {
                           return ScalarBuilder(b, loc).cast(args[0], from, to);
                         },
                         *sizes);
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

/// The kept-axes map and iterator types of a reduction over `reduced`.
static void reductionLoops(int64_t rank, ArrayRef<bool> reduced,
                           MLIRContext *context, AffineMap &keptMap,
                           SmallVector<utils::IteratorType> &iterators) {
  SmallVector<AffineExpr> kept;
  for (int64_t d = 0; d < rank; ++d) {
    iterators.push_back(reduced[d] ? utils::IteratorType::reduction
                                   : utils::IteratorType::parallel);
    if (!reduced[d])
      kept.push_back(getAffineDimExpr(d, context));
  }
  keptMap = AffineMap::get(rank, 0, kept, context);
}

/// The largest (or smallest) value of a lowered element type; infinities for
/// floats.
static Value extremeOf(ScalarBuilder &s, Type type, bool isUnsigned,
                       bool largest) {
  if (isa<FloatType>(type))
    return s.floatConstant(type,
                           largest ? std::numeric_limits<double>::infinity()
                                   : -std::numeric_limits<double>::infinity());
  unsigned width = type.getIntOrFloatBitWidth();
  APInt value = isUnsigned ? (largest ? APInt::getMaxValue(width)
                                      : APInt::getMinValue(width))
                           : (largest ? APInt::getSignedMaxValue(width)
                                      : APInt::getSignedMinValue(width));
  return s.intConstant(type, value.getSExtValue());
}

template <typename OpTy, OpKind kind>
class ReduceLowering : public KilnPattern<OpTy> {
public:
  using KilnPattern<OpTy>::KilnPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = this->convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    RankedTensorType inputType = tensorTypeOf(input);
    int64_t rank = inputType.getRank();
    Type kilnType = op.getType().getElementType();
    Type elementType = type.getElementType();
    bool isFloat = isa<FloatType>(elementType);
    bool isSumOrProd = kind == OpKind::ReduceSum || kind == OpKind::ReduceProd;

    SmallVector<bool> reduced(rank, op.getAxes().empty());
    for (int64_t axis : op.getAxes())
      if (axis < rank)
        reduced[axis] = true;
    AffineMap keptMap;
    SmallVector<utils::IteratorType> iterators;
    reductionLoops(rank, reduced, rewriter.getContext(), keptMap, iterators);

    // Like the interpreter, float sums and products accumulate in f64;
    // max/min compare in the compute type.
    Type accType = elementType;
    if (isFloat)
      accType = isSumOrProd           ? rewriter.getF64Type()
                : isHalf(elementType) ? rewriter.getF32Type()
                                      : elementType;
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    SmallVector<int64_t> accShape;
    SmallVector<Value> accSizes;
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d])
        continue;
      accShape.push_back(inputType.getDimSize(d));
      if (inputType.isDynamicDim(d))
        accSizes.push_back(tensor::DimOp::create(rewriter, loc, input, d));
    }
    auto accTensorType = RankedTensorType::get(accShape, accType);

    ScalarBuilder s(rewriter, loc);
    // Bools order false < true: unsigned, like the interpreter.
    bool isUnsigned = kilnType.isUnsignedInteger() || kilnType.isInteger(1);
    Value identity;
    switch (kind) {
    case OpKind::ReduceSum:
      identity = zeroOf(s, accType);
      break;
    case OpKind::ReduceProd:
      identity =
          isFloat ? s.floatConstant(accType, 1.0) : s.intConstant(accType, 1);
      break;
    default:
      identity = extremeOf(s, accType, isUnsigned,
                           /*largest=*/kind == OpKind::ReduceMin);
      break;
    }
    Value init = filledTensor(rewriter, loc, accTensorType, identity, accSizes);

    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{accTensorType}, ValueRange{input},
        ValueRange{init},
        ArrayRef<AffineMap>{rewriter.getMultiDimIdentityMap(rank), keptMap},
        iterators, [&](OpBuilder &b, Location nloc, ValueRange args) {
          ScalarBuilder sb(b, nloc);
          Value x = sb.toCompute(args[0]);
          Value acc = args[1];
          if (x.getType() != acc.getType())
            x = arith::ExtFOp::create(b, nloc, acc.getType(), x);
          Value r;
          switch (kind) {
          case OpKind::ReduceSum:
            r = isFloat ? Value(arith::AddFOp::create(b, nloc, acc, x))
                        : Value(arith::AddIOp::create(b, nloc, acc, x));
            break;
          case OpKind::ReduceProd:
            r = isFloat ? Value(arith::MulFOp::create(b, nloc, acc, x))
                        : Value(arith::MulIOp::create(b, nloc, acc, x));
            break;
          default:
            // Floats: IEEE 754-2019 maximum/minimum. NaN wins, as in the
            // interpreter, and +0 > -0, so the result (sign of zero
            // included) does not depend on the order of the elements, and
            // the reduction may be reassociated and vectorised.
            if (isFloat)
              r = kind == OpKind::ReduceMax
                      ? Value(arith::MaximumFOp::create(b, nloc, acc, x))
                      : Value(arith::MinimumFOp::create(b, nloc, acc, x));
            else
              r = sb.maxOrMin(kind == OpKind::ReduceMax, kilnType, acc, x);
            break;
          }
          linalg::YieldOp::create(b, nloc, r);
        });
    Value result = generic.getResult(0);

    if (accType != elementType) {
      auto rounded = RankedTensorType::get(accShape, elementType);
      result =
          buildElementwise(rewriter, loc, {result}, rounded,
                           [&](OpBuilder &b, Location nloc, ValueRange args) {
                             return ScalarBuilder(b, nloc).cast(
                                 args[0], args[0].getType(), kilnType);
                           },
                           accSizes);
    }
    Value reshaped = reshapeTensor(rewriter, loc, result, type,
                                   mixedSizes(rewriter, type, *sizes));
    if (!reshaped)
      return rewriter.notifyMatchFailure(op, "unsupported dynamic reshape");
    rewriter.replaceOp(op, reshaped);
    return success();
  }
};

template <typename OpTy, bool isMax>
class ArgReduceLowering : public KilnPattern<OpTy> {
public:
  using KilnPattern<OpTy>::KilnPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = this->convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    RankedTensorType inputType = tensorTypeOf(input);
    int64_t rank = inputType.getRank();
    int64_t axis = rank == 0 ? -1 : (op.getAxis() + rank) % rank;
    Type kilnType = op.getInput().getType().getElementType();
    Type elementType = inputType.getElementType();
    Type valueType = isHalf(elementType) ? rewriter.getF32Type() : elementType;

    SmallVector<bool> reduced(rank, false);
    if (axis >= 0)
      reduced[axis] = true;
    AffineMap keptMap;
    SmallVector<utils::IteratorType> iterators;
    reductionLoops(rank, reduced, rewriter.getContext(), keptMap, iterators);
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    SmallVector<int64_t> keptShape;
    SmallVector<Value> keptSizes;
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[d])
        continue;
      keptShape.push_back(inputType.getDimSize(d));
      if (inputType.isDynamicDim(d))
        keptSizes.push_back(tensor::DimOp::create(rewriter, loc, input, d));
    }
    auto valuesType = RankedTensorType::get(keptShape, valueType);
    auto indicesType = RankedTensorType::get(keptShape, rewriter.getI64Type());

    // Start from the worst value at index 0 and take strictly better
    // elements, so ties keep the first index; the first NaN is the extreme.
    // With select_last_index take equal ones too (and later NaNs), so ties
    // keep the last index.
    const bool selectLast = op.getSelectLastIndex();
    ScalarBuilder s(rewriter, loc);
    bool isUnsigned = kilnType.isUnsignedInteger() || kilnType.isInteger(1);
    Value values =
        filledTensor(rewriter, loc, valuesType,
                     extremeOf(s, valueType, isUnsigned, /*largest=*/!isMax),
                     keptSizes);
    Value indices = filledTensor(rewriter, loc, indicesType,
                                 s.intConstant(rewriter.getI64Type(), 0),
                                 keptSizes);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{valuesType, indicesType}, ValueRange{input},
        ValueRange{values, indices},
        ArrayRef<AffineMap>{rewriter.getMultiDimIdentityMap(rank), keptMap,
                            keptMap},
        iterators, [&](OpBuilder &b, Location nloc, ValueRange args) {
          ScalarBuilder sb(b, nloc);
          Value x = sb.toCompute(args[0]);
          Value best = args[1], bestIndex = args[2];
          Value index = axis >= 0 ? loopIndexI64(b, nloc, axis)
                                  : sb.intConstant(b.getI64Type(), 0);
          Value take;
          if (isa<FloatType>(x.getType())) {
            arith::CmpFPredicate order =
                selectLast ? (isMax ? arith::CmpFPredicate::OGE
                                    : arith::CmpFPredicate::OLE)
                           : (isMax ? arith::CmpFPredicate::OGT
                                    : arith::CmpFPredicate::OLT);
            Value better = arith::CmpFOp::create(b, nloc, order, x, best);
            Value xIsNaN =
                arith::CmpFOp::create(b, nloc, arith::CmpFPredicate::UNO, x, x);
            Value bestIsNumber = arith::CmpFOp::create(
                b, nloc, arith::CmpFPredicate::ORD, best, best);
            if (selectLast) {
              // The last NaN is the extreme.
              Value numberBetter =
                  arith::AndIOp::create(b, nloc, bestIsNumber, better);
              take = arith::OrIOp::create(b, nloc, xIsNaN, numberBetter);
            } else {
              Value candidate = arith::OrIOp::create(b, nloc, xIsNaN, better);
              take = arith::AndIOp::create(b, nloc, bestIsNumber, candidate);
            }
          } else {
            arith::CmpIPredicate predicate;
            if (selectLast)
              predicate = isUnsigned ? (isMax ? arith::CmpIPredicate::uge
                                              : arith::CmpIPredicate::ule)
                                     : (isMax ? arith::CmpIPredicate::sge
                                              : arith::CmpIPredicate::sle);
            else
              predicate = isUnsigned ? (isMax ? arith::CmpIPredicate::ugt
                                              : arith::CmpIPredicate::ult)
                                     : (isMax ? arith::CmpIPredicate::sgt
                                              : arith::CmpIPredicate::slt);
            take = arith::CmpIOp::create(b, nloc, predicate, x, best);
          }
          Value newBest = arith::SelectOp::create(b, nloc, take, x, best);
          Value newIndex =
              arith::SelectOp::create(b, nloc, take, index, bestIndex);
          linalg::YieldOp::create(b, nloc, ValueRange{newBest, newIndex});
        });
    Value reshaped = reshapeTensor(rewriter, loc, generic.getResult(1), type,
                                   mixedSizes(rewriter, type, *sizes));
    if (!reshaped)
      return rewriter.notifyMatchFailure(op, "unsupported dynamic reshape");
    rewriter.replaceOp(op, reshaped);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Matmul.
//===----------------------------------------------------------------------===//

class MatmulLowering : public KilnPattern<MatmulOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(MatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Location loc = op.getLoc();
    Type elementType = type.getElementType();
    Type computeType =
        isHalf(elementType) ? rewriter.getF32Type() : elementType;
    // bf16 operands stay bf16 (linalg.matmul extends them in its body): the
    // CPU target hands them to its bf16 GEMM, which sums in f32. f16 ones
    // are widened first.
    Type operandType = elementType.isBF16() ? elementType : computeType;
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    SmallVector<OpFoldResult> extents = mixedSizes(rewriter, type, *sizes);
    int64_t batchRank = type.getRank() - 2;
    ArrayRef<int64_t> batch = type.getShape().take_front(batchRank);
    int64_t batchSize = 1;
    for (int64_t extent : batch)
      batchSize = ShapedType::isDynamic(extent) || ShapedType::isDynamic(batchSize)
                      ? ShapedType::kDynamic
                      : batchSize * extent;
    int64_t m = type.getDimSize(batchRank), n = type.getDimSize(batchRank + 1);
    RankedTensorType lhsType = tensorTypeOf(adaptor.getLhs());
    int64_t k = lhsType.getShape().back();
    OpFoldResult kExtent =
        ShapedType::isDynamic(k)
            ? OpFoldResult(Value(tensor::DimOp::create(
                  rewriter, loc, adaptor.getLhs(), lhsType.getRank() - 1)))
            : OpFoldResult(rewriter.getIndexAttr(k));

    // The product in the result's shape and type.
    auto finish = [&](Value result) -> LogicalResult {
      result = reshapeTensor(
          rewriter, loc, result,
          RankedTensorType::get(type.getShape(), computeType), extents);
      if (!result)
        return rewriter.notifyMatchFailure(op, "unsupported dynamic reshape");
      rewriter.replaceOp(op, fromComputeType(rewriter, loc, result, type, *sizes));
      return success();
    };
    ScalarBuilder s(rewriter, loc);

    // A batch of rows times one matrix (activations times a weight): one
    // matmul over all the rows. Broadcasting the matrix copied it into every
    // batch and left a batch of small products, each packing the same
    // matrix again (a training step's dense layers, forward and backward).
    RankedTensorType rhsType = tensorTypeOf(adaptor.getRhs());
    if (batchRank > 0 && rhsType.getRank() == 2 &&
        lhsType.getRank() == type.getRank() && type.hasStaticShape() &&
        lhsType.hasStaticShape() && lhsType.getShape().drop_back(2) == batch &&
        lhsType.getElementType() == operandType &&
        rhsType.getElementType() == operandType) {
      Value rows =
          reshapeTensor(rewriter, loc, adaptor.getLhs(),
                        RankedTensorType::get({batchSize * m, k}, operandType));
      auto accType = RankedTensorType::get({batchSize * m, n}, computeType);
      Value init = filledTensor(rewriter, loc, accType, zeroOf(s, computeType));
      return finish(linalg::MatmulOp::create(rewriter, loc, TypeRange{accType},
                                             ValueRange{rows, adaptor.getRhs()},
                                             ValueRange{init})
                        .getResult(0));
    }

    // Operands broadcast to the full batch shape (and extended to f32 for
    // f16), then the batch dimensions collapsed into one.
    auto prepare = [&](Value operand, int64_t rows, int64_t cols,
                       OpFoldResult rowsExtent,
                       OpFoldResult colsExtent) -> Value {
      SmallVector<int64_t> shape(batch);
      shape.append({rows, cols});
      auto fullType = RankedTensorType::get(shape, operandType);
      SmallVector<OpFoldResult> fullExtents(extents.begin(),
                                            extents.begin() + batchRank);
      fullExtents.append({rowsExtent, colsExtent});
      if (operand.getType() != fullType)
        operand = buildElementwise(
            rewriter, loc, {operand}, fullType,
            [&](OpBuilder &b, Location nloc, ValueRange args) {
              return operandType == computeType
                         ? ScalarBuilder(b, nloc).toCompute(args[0])
                         : args[0];
            },
            dynamicOf(fullExtents));
      if (batchRank <= 1)
        return operand;
      if (fullType.hasStaticShape())
        return reshapeTensor(
            rewriter, loc, operand,
            RankedTensorType::get({batchSize, rows, cols}, operandType));
      ReassociationIndices batchAxes;
      for (int64_t d = 0; d < batchRank; ++d)
        batchAxes.push_back(d);
      SmallVector<ReassociationIndices> groups{
          batchAxes, {batchRank}, {batchRank + 1}};
      return tensor::CollapseShapeOp::create(rewriter, loc, operand, groups);
    };
    Value lhs = prepare(adaptor.getLhs(), m, k, extents[batchRank], kExtent);
    Value rhs =
        prepare(adaptor.getRhs(), k, n, kExtent, extents[batchRank + 1]);

    SmallVector<int64_t> accShape;
    SmallVector<OpFoldResult> accExtents;
    if (batchRank > 0) {
      accShape.push_back(batchSize);
      accExtents.push_back(
          ShapedType::isDynamic(batchSize)
              ? OpFoldResult(Value(tensor::DimOp::create(rewriter, loc, lhs, 0)))
              : OpFoldResult(rewriter.getIndexAttr(batchSize)));
    }
    accShape.append({m, n});
    accExtents.append({extents[batchRank], extents[batchRank + 1]});
    auto accType = RankedTensorType::get(accShape, computeType);
    Value init = filledTensor(rewriter, loc, accType, zeroOf(s, computeType),
                              dynamicOf(accExtents));
    Value result =
        batchRank == 0
            ? linalg::MatmulOp::create(rewriter, loc, TypeRange{accType},
                                       ValueRange{lhs, rhs}, ValueRange{init})
                  .getResult(0)
            : linalg::BatchMatmulOp::create(rewriter, loc, TypeRange{accType},
                                            ValueRange{lhs, rhs},
                                            ValueRange{init})
                  .getResult(0);
    return finish(result);
  }
};

//===----------------------------------------------------------------------===//
// Shape ops.
//===----------------------------------------------------------------------===//

class ReshapeLowering : public KilnPattern<ReshapeOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    Value result = reshapeTensor(rewriter, op.getLoc(), adaptor.getInput(),
                                 type, mixedSizes(rewriter, type, *sizes));
    if (!result)
      return rewriter.notifyMatchFailure(op, "unsupported dynamic reshape");
    rewriter.replaceOp(op, result);
    return success();
  }
};

class PermuteLowering : public KilnPattern<PermuteOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(PermuteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    SmallVector<int64_t> perm;
    for (int64_t p : op.getPerm())
      perm.push_back(p < 0 ? p + type.getRank() : p);
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    Value init = emptyTensor(rewriter, op.getLoc(), type, *sizes);
    auto transpose = linalg::TransposeOp::create(
        rewriter, op.getLoc(), adaptor.getInput(), init, perm);
    rewriter.replaceOp(op, transpose->getResult(0));
    return success();
  }
};

class BroadcastToLowering : public KilnPattern<BroadcastToOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(BroadcastToOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    Value result = buildElementwise(
        rewriter, op.getLoc(), adaptor.getOperands(), type,
        [](OpBuilder &, Location, ValueRange args) { return args[0]; },
        *sizes);
    rewriter.replaceOp(op, result);
    return success();
  }
};

class SliceLowering : public KilnPattern<SliceOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    if (type.getRank() == 0) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    MLIRContext *context = rewriter.getContext();
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "dynamic extents without sizes");
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, type, adaptor.getInput(),
        getAsIndexOpFoldResult(context, op.getStarts()),
        mixedSizes(rewriter, type, *sizes),
        getAsIndexOpFoldResult(context, op.getSteps()));
    return success();
  }
};

class ConcatLowering : public KilnPattern<ConcatOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    ValueRange inputs = adaptor.getInputs();
    if (inputs.size() == 1) {
      rewriter.replaceOp(op, inputs.front());
      return success();
    }
    int64_t rank = type.getRank();
    int64_t axis = (op.getAxis() + rank) % rank;
    rewriter.replaceOpWithNewOp<tensor::ConcatOp>(op, type, axis, inputs);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Index ops.
//===----------------------------------------------------------------------===//

/// A result that reads nothing: empty, or zeros when the indexed axis of the
/// input is empty (every index is then invalid, which the runtime reports
/// before launch; compiled code must still not read out of bounds).
static Value indexFallback(OpBuilder &b, Location loc, RankedTensorType type) {
  if (type.hasStaticShape() && type.getNumElements() == 0)
    return emptyTensor(b, loc, type);
  ScalarBuilder s(b, loc);
  return filledTensor(b, loc, type, zeroOf(s, type.getElementType()));
}

class IndexSelectLowering : public KilnPattern<IndexSelectOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(IndexSelectOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Location loc = op.getLoc();
    Value input = adaptor.getInput(), index = adaptor.getIndex();
    RankedTensorType inputType = tensorTypeOf(input);
    int64_t inputRank = inputType.getRank();
    int64_t indexRank = tensorTypeOf(index).getRank();
    int64_t axis = (op.getAxis() + inputRank) % inputRank;
    int64_t extent = inputType.getDimSize(axis);
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes) || ShapedType::isDynamic(extent))
      return rewriter.notifyMatchFailure(op, "dynamic indexed axis");
    if ((type.hasStaticShape() && type.getNumElements() == 0) || extent == 0) {
      rewriter.replaceOp(op, indexFallback(rewriter, loc, type));
      return success();
    }
    // Result axes [axis, axis + indexRank) walk the index tensor.
    SmallVector<AffineExpr> indexExprs;
    for (int64_t d = 0; d < indexRank; ++d)
      indexExprs.push_back(rewriter.getAffineDimExpr(axis + d));
    AffineMap indexMap =
        AffineMap::get(type.getRank(), 0, indexExprs, rewriter.getContext());
    SmallVector<utils::IteratorType> iterators(type.getRank(),
                                               utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, ValueRange{index},
        ValueRange{emptyTensor(rewriter, loc, type, *sizes)},
        ArrayRef<AffineMap>{indexMap,
                            rewriter.getMultiDimIdentityMap(type.getRank())},
        iterators, [&](OpBuilder &b, Location nloc, ValueRange args) {
          SmallVector<Value> at;
          for (int64_t d = 0; d < axis; ++d)
            at.push_back(linalg::IndexOp::create(b, nloc, d));
          at.push_back(clampIndex(b, nloc, args[0], extent));
          for (int64_t d = axis + 1; d < inputRank; ++d)
            at.push_back(linalg::IndexOp::create(b, nloc, d - 1 + indexRank));
          Value element = tensor::ExtractOp::create(b, nloc, input, at);
          linalg::YieldOp::create(b, nloc, element);
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// The loops of a generic that walks j along `axis` for each element of a
/// rank-`rank` result (index_add's rows, cumsum's prefix): the result's
/// loops, then j (the reduction); `j` maps a loop to j alone, `along` to
/// the result's position with j at `axis`, `result` to the position.
struct AlongAxisLoops {
  AffineMap j, along, result;
  SmallVector<utils::IteratorType> iterators;
};

static AlongAxisLoops alongAxisLoops(MLIRContext *ctx, int64_t rank, int64_t axis) {
  const unsigned loops = static_cast<unsigned>(rank) + 1;
  SmallVector<AffineExpr> resultExprs, alongExprs;
  for (int64_t d = 0; d < rank; ++d) {
    resultExprs.push_back(getAffineDimExpr(d, ctx));
    alongExprs.push_back(getAffineDimExpr(d == axis ? rank : d, ctx));
  }
  AlongAxisLoops l{AffineMap::get(loops, 0, {getAffineDimExpr(rank, ctx)}, ctx),
                   AffineMap::get(loops, 0, alongExprs, ctx), AffineMap::get(loops, 0, resultExprs, ctx),
                   SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel)};
  l.iterators.push_back(utils::IteratorType::reduction);
  return l;
}

/// index_add's generic: `input` copied into a tensor of its own (the input
/// may be a kernel argument, which bufferization would otherwise let this
/// op write in place: the caller's tensor), then the masked reduction over
/// j that adds source's slice j at row index[j], marked kIndexAddAttr.
/// `elementType` is the kiln op's (the additions' semantics: signedness).
static Value buildIndexAdd(OpBuilder &b, Location loc, RankedTensorType type,
                           ValueRange sizes, Value input, Value index,
                           Value source, int64_t axis, Type elementType) {
  Value init = linalg::CopyOp::create(b, loc, input,
                                      emptyTensor(b, loc, type, sizes))
                   .getResult(0);
  // Loops: the result's axes, then j over the index (the reduction).
  AlongAxisLoops l = alongAxisLoops(b.getContext(), type.getRank(), axis);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{index, source}, ValueRange{init},
      ArrayRef<AffineMap>{l.j, l.along, l.result}, l.iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        // Only a row index names gets an addition: the others keep their
        // bits (no + 0 that would turn -0 into +0).
        Value row = linalg::IndexOp::create(nb, nloc, axis);
        Value target = arith::IndexCastOp::create(nb, nloc, nb.getIndexType(), args[0]);
        Value hit = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq, row, target);
        ScalarBuilder s(nb, nloc);
        Value sum = s.binary(::kiln::core::OpKind::Add, elementType, args[2], args[1]);
        linalg::YieldOp::create(nb, nloc, ValueRange{arith::SelectOp::create(nb, nloc, hit, sum, args[2])});
      });
  generic->setAttr(kIndexAddAttr, b.getI64IntegerAttr(axis));
  return generic.getResult(0);
}

class IndexAddLowering : public KilnPattern<IndexAddOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(IndexAddOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Value input = adaptor.getInput(), source = adaptor.getSource();
    RankedTensorType sourceType = tensorTypeOf(source);
    const int64_t rank = type.getRank();
    const int64_t axis = (op.getAxis() + rank) % rank;
    if (ShapedType::isDynamic(type.getDimSize(axis)))
      return rewriter.notifyMatchFailure(op, "dynamic indexed axis");
    // Nothing to add: the input itself.
    if ((type.hasStaticShape() && type.getNumElements() == 0) ||
        (sourceType.hasStaticShape() && sourceType.getNumElements() == 0)) {
      rewriter.replaceOp(op, input);
      return success();
    }
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "result sizes");
    rewriter.replaceOp(op, buildIndexAdd(rewriter, op.getLoc(), type, *sizes, input,
                                         adaptor.getIndex(), source, axis,
                                         getElementTypeOrSelf(op.getSource().getType())));
    return success();
  }
};

/// scatter_add is index_add into the input flattened: each source element
/// added at the flat offset of the position its index names (the index
/// along the axis, the element's own place along the others), in index
/// order. Static extents only (a dynamic one leaves the trace interpreted).
class ScatterAddLowering : public KilnPattern<ScatterAddOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(ScatterAddOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Location loc = op.getLoc();
    Value input = adaptor.getInput(), index = adaptor.getIndex(),
          source = adaptor.getSource();
    RankedTensorType indexType = tensorTypeOf(index);
    if (!type.hasStaticShape() || !indexType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic extents");
    const int64_t rank = type.getRank();
    if (rank == 0 || type.getNumElements() == 0 ||
        indexType.getNumElements() == 0) {
      rewriter.replaceOp(op, input);
      return success();
    }
    const int64_t axis = (op.getAxis() + rank) % rank;
    SmallVector<int64_t> strides(rank);
    for (int64_t d = rank - 1, stride = 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= type.getDimSize(d);
    }
    Type i64 = rewriter.getI64Type();
    auto offsetsType = RankedTensorType::get(indexType.getShape(), i64);
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    const int64_t extent = type.getDimSize(axis);
    Value offsets =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{offsetsType}, ValueRange{index},
            ValueRange{emptyTensor(rewriter, loc, offsetsType)},
            ArrayRef<AffineMap>{identity, identity}, iterators,
            [&](OpBuilder &b, Location nloc, ValueRange args) {
              // Clamped as gather's: the runtime reports a bad index
              // before launch, and none may write outside the result.
              ScalarBuilder s(b, nloc);
              Value at = arith::IndexCastOp::create(
                  b, nloc, i64, clampIndex(b, nloc, args[0], extent));
              Value offset = arith::MulIOp::create(
                  b, nloc, at, s.intConstant(i64, strides[axis]));
              for (int64_t d = 0; d < rank; ++d) {
                if (d == axis)
                  continue;
                Value position = loopIndexI64(b, nloc, d);
                Value along = arith::MulIOp::create(
                    b, nloc, position, s.intConstant(i64, strides[d]));
                offset = arith::AddIOp::create(b, nloc, offset, along);
              }
              linalg::YieldOp::create(b, nloc, offset);
            })
            .getResult(0);
    const int64_t count = indexType.getNumElements();
    Type elementType = type.getElementType();
    auto flatType = RankedTensorType::get({type.getNumElements()}, elementType);
    Value flatInput = reshapeTensor(rewriter, loc, input, flatType);
    Value flatOffsets = reshapeTensor(rewriter, loc, offsets,
                                      RankedTensorType::get({count}, i64));
    Value flatSource = reshapeTensor(
        rewriter, loc, source, RankedTensorType::get({count}, elementType));
    Value flat = buildIndexAdd(rewriter, loc, flatType, {}, flatInput,
                               flatOffsets, flatSource, /*axis=*/0,
                               getElementTypeOrSelf(op.getSource().getType()));
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, flat, type));
    return success();
  }
};

/// cumsum: loops over the result and, innermost, j along the axis: j = 0
/// takes input[.., 0, ..], 0 < j <= i add input[.., j, ..], in order (no
/// + 0 that would turn a -0 into +0), so the result's initial values are
/// never read. Marked kCumsumAttr for the CPU's runtime call, which takes
/// the input and the result's buffer.
class CumsumLowering : public KilnPattern<CumsumOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(CumsumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    const int64_t rank = type.getRank();
    const int64_t axis = (op.getAxis() + rank) % rank;
    if (type.hasStaticShape() && type.getNumElements() == 0) {
      rewriter.replaceOp(op, input);
      return success();
    }
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes))
      return rewriter.notifyMatchFailure(op, "result sizes");
    Value init = emptyTensor(rewriter, loc, type, *sizes);
    AlongAxisLoops l = alongAxisLoops(rewriter.getContext(), rank, axis);
    Type elementType = getElementTypeOrSelf(op.getInput().getType());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, ValueRange{input}, ValueRange{init},
        ArrayRef<AffineMap>{l.along, l.result}, l.iterators, [&](OpBuilder &b, Location nloc, ValueRange args) {
          Value i = linalg::IndexOp::create(b, nloc, axis);
          Value j = linalg::IndexOp::create(b, nloc, rank);
          Value zero = arith::ConstantIndexOp::create(b, nloc, 0);
          Value first = arith::CmpIOp::create(b, nloc, arith::CmpIPredicate::eq, j, zero);
          Value upTo = arith::CmpIOp::create(b, nloc, arith::CmpIPredicate::ule, j, i);
          ScalarBuilder s(b, nloc);
          Value sum = s.binary(::kiln::core::OpKind::Add, elementType, args[1], args[0]);
          Value kept = arith::SelectOp::create(b, nloc, upTo, sum, args[1]);
          linalg::YieldOp::create(b, nloc, ValueRange{arith::SelectOp::create(b, nloc, first, args[0], kept)});
        });
    generic->setAttr(kCumsumAttr, rewriter.getI64IntegerAttr(axis));
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

class GatherLowering : public KilnPattern<GatherOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(GatherOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    Location loc = op.getLoc();
    Value input = adaptor.getInput(), index = adaptor.getIndex();
    RankedTensorType inputType = tensorTypeOf(input);
    int64_t rank = inputType.getRank();
    int64_t axis = (op.getAxis() + rank) % rank;
    int64_t extent = inputType.getDimSize(axis);
    FailureOr<SmallVector<Value>> sizes = resultSizes(op, type);
    if (failed(sizes) || ShapedType::isDynamic(extent))
      return rewriter.notifyMatchFailure(op, "dynamic indexed axis");
    if ((type.hasStaticShape() && type.getNumElements() == 0) || extent == 0) {
      rewriter.replaceOp(op, indexFallback(rewriter, loc, type));
      return success();
    }
    AffineMap identity = rewriter.getMultiDimIdentityMap(rank);
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, ValueRange{index},
        ValueRange{emptyTensor(rewriter, loc, type, *sizes)},
        ArrayRef<AffineMap>{identity, identity}, iterators,
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          SmallVector<Value> at;
          for (int64_t d = 0; d < rank; ++d)
            at.push_back(d == axis
                             ? clampIndex(b, nloc, args[0], extent)
                             : Value(linalg::IndexOp::create(b, nloc, d)));
          Value element = tensor::ExtractOp::create(b, nloc, input, at);
          linalg::YieldOp::create(b, nloc, element);
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Type converter, patterns, target and pass.
//===----------------------------------------------------------------------===//

KilnTypeConverter::KilnTypeConverter() {
  addConversion([](Type type) { return type; });
  addConversion(
      [](IntegerType type) -> Type { return ScalarBuilder::lowered(type); });
  addConversion([](RankedTensorType type) -> Type {
    Type element = ScalarBuilder::lowered(type.getElementType());
    return element == type.getElementType() ? type : type.clone(element);
  });
}

//===----------------------------------------------------------------------===//
// Convolution.
//===----------------------------------------------------------------------===//

/// kiln.conv2d as linalg.conv_2d_ngchw_gfchw: the input padded with zeros
/// (tensor.pad) and split into groups ([N, G, C/G, H, W]), the weight
/// [G, C_out/G, C/G, kH, kW], the result collapsed back to [N, C_out, Ho,
/// Wo]. f16/bf16 compute in f32. The CPU pipeline turns the f32 convolution
/// into a call of the runtime's implicit GEMM (kiln_rt_conv2d_f32).
class Conv2dLowering : public KilnPattern<Conv2dOp> {
public:
  using KilnPattern::KilnPattern;
  LogicalResult
  matchAndRewrite(Conv2dOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = convertType(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "unsupported result type");
    RankedTensorType inType = tensorTypeOf(adaptor.getInput());
    RankedTensorType wType = tensorTypeOf(adaptor.getWeight());
    if (!type.hasStaticShape() || !inType.hasStaticShape() ||
        !wType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic extents");
    Location loc = op.getLoc();
    Type elementType = type.getElementType();
    Type computeType =
        isHalf(elementType) ? rewriter.getF32Type() : elementType;
    ::kiln::core::Conv2dParams p = op.getParams();
    ScalarBuilder s(rewriter, loc);

    auto widen = [&](Value v) -> Value {
      auto t = tensorTypeOf(v);
      if (t.getElementType() == computeType)
        return v;
      return buildElementwise(
          rewriter, loc, {v}, t.clone(computeType),
          [](OpBuilder &b, Location nloc, ValueRange args) {
            return ScalarBuilder(b, nloc).toCompute(args[0]);
          },
          {});
    };
    Value input = widen(adaptor.getInput());
    Value weight = widen(adaptor.getWeight());
    ArrayRef<int64_t> in = inType.getShape(), w = wType.getShape();
    const int64_t n = in[0], c = in[1], groups = p.groups;
    int64_t h = in[2], wd = in[3];
    if (p.padTop || p.padLeft || p.padBottom || p.padRight) {
      h += p.padTop + p.padBottom;
      wd += p.padLeft + p.padRight;
      SmallVector<OpFoldResult> low{rewriter.getIndexAttr(0),
                                    rewriter.getIndexAttr(0),
                                    rewriter.getIndexAttr(p.padTop),
                                    rewriter.getIndexAttr(p.padLeft)};
      SmallVector<OpFoldResult> high{rewriter.getIndexAttr(0),
                                     rewriter.getIndexAttr(0),
                                     rewriter.getIndexAttr(p.padBottom),
                                     rewriter.getIndexAttr(p.padRight)};
      input = tensor::PadOp::create(
          rewriter, loc, RankedTensorType::get({n, c, h, wd}, computeType),
          input, low, high, zeroOf(s, computeType));
    }
    const int64_t co = w[0], cg = w[1], kh = w[2], kw = w[3];
    const int64_t ho = type.getDimSize(2), wo = type.getDimSize(3);
    input = tensor::ExpandShapeOp::create(
        rewriter, loc,
        RankedTensorType::get({n, groups, c / groups, h, wd}, computeType),
        input, SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}, {4}});
    weight = tensor::ExpandShapeOp::create(
        rewriter, loc,
        RankedTensorType::get({groups, co / groups, cg, kh, kw}, computeType),
        weight, SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}, {4}});
    auto accType =
        RankedTensorType::get({n, groups, co / groups, ho, wo}, computeType);
    Value init = filledTensor(rewriter, loc, accType, zeroOf(s, computeType));
    auto vec2 = [&](int64_t a, int64_t b) {
      return DenseIntElementsAttr::get(
          VectorType::get({2}, rewriter.getI64Type()), ArrayRef<int64_t>{a, b});
    };
    SmallVector<NamedAttribute> attrs{
        rewriter.getNamedAttr("strides", vec2(p.strideH, p.strideW)),
        rewriter.getNamedAttr("dilations", vec2(p.dilationH, p.dilationW))};
    Value result = linalg::Conv2DNgchwGfchwOp::create(
                       rewriter, loc, TypeRange{accType},
                       ValueRange{input, weight}, ValueRange{init}, attrs)
                       .getResult(0);
    result = tensor::CollapseShapeOp::create(
        rewriter, loc, RankedTensorType::get(type.getShape(), computeType),
        result, SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}, {4}});
    rewriter.replaceOp(op, fromComputeType(rewriter, loc, result, type));
    return success();
  }
};

void mlir::kiln::populateKilnToLinalgConversionPatterns(
    const KilnTypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *context = patterns.getContext();
  patterns.add<FullLowering, ArithConstantLowering, ArangeLowering,
               RandomLowering<RandUniformOp, false>,
               RandomLowering<RandNormalOp, true>>(typeConverter, context);
  // Unary, binary and comparison ops: one pattern per op-table row.
  for (int i = 0; i < ::kiln::core::kNumOpKinds; ++i) {
    auto kind = static_cast<OpKind>(i);
    ::kiln::core::OpCategory category = ::kiln::core::opCategory(kind);
    if (category == ::kiln::core::OpCategory::Unary ||
        category == ::kiln::core::OpCategory::Binary ||
        category == ::kiln::core::OpCategory::Compare)
      patterns.add<ElementwiseLowering>(typeConverter, context, kind);
  }
  patterns.add<WhereLowering, CastLowering>(typeConverter, context);
  patterns.add<ReduceLowering<ReduceSumOp, OpKind::ReduceSum>,
               ReduceLowering<ReduceProdOp, OpKind::ReduceProd>,
               ReduceLowering<ReduceMaxOp, OpKind::ReduceMax>,
               ReduceLowering<ReduceMinOp, OpKind::ReduceMin>,
               ArgReduceLowering<ArgMaxOp, true>,
               ArgReduceLowering<ArgMinOp, false>, MatmulLowering, Conv2dLowering>(
      typeConverter, context);
  patterns
      .add<ReshapeLowering, PermuteLowering, BroadcastToLowering, SliceLowering,
           ConcatLowering, IndexSelectLowering, GatherLowering,
           IndexAddLowering, ScatterAddLowering, CumsumLowering>(typeConverter,
                                                                 context);
}

void mlir::kiln::configureKilnToLinalgTarget(
    ConversionTarget &target, const KilnTypeConverter &typeConverter) {
  target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                         math::MathDialect, tensor::TensorDialect>();
  target.addIllegalDialect<KilnDialect>();
  target.addDynamicallyLegalOp<arith::ConstantOp>(
      [&typeConverter](arith::ConstantOp op) {
        return typeConverter.isLegal(op.getType());
      });
  target.addDynamicallyLegalOp<func::FuncOp>([&typeConverter](func::FuncOp op) {
    return typeConverter.isSignatureLegal(op.getFunctionType()) &&
           typeConverter.isLegal(&op.getBody());
  });
  target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
      [&typeConverter](Operation *op) { return typeConverter.isLegal(op); });
}

/// Marks the kiln.exp ops whose operand is x - max(x) with the max kept over
/// the axes it reduced (softmax, log_softmax, cross-entropy): every element is
/// at most the max of its group, so the operand is <= 0 or NaN.
static void markNonPositiveExps(Operation *root) {
  root->walk([](ExpOp exp) {
    auto sub = exp.getInput().getDefiningOp<SubOp>();
    if (!sub || sub.getLhs().getType() != sub.getType())
      return;
    auto max = sub.getRhs().getDefiningOp<ReduceMaxOp>();
    if (max && max.getKeepdim() && max.getInput() == sub.getLhs())
      exp->setAttr(kNonPositiveOperandAttr, UnitAttr::get(exp.getContext()));
  });
}

namespace mlir::kiln {
namespace {

struct KilnConvertToLinalgPass
    : impl::KilnConvertToLinalgBase<KilnConvertToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    markNonPositiveExps(getOperation());
    KilnTypeConverter typeConverter;
    ConversionTarget target(*context);
    configureKilnToLinalgTarget(target, typeConverter);
    RewritePatternSet patterns(context);
    populateKilnToLinalgConversionPatterns(typeConverter, patterns);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(
        patterns, typeConverter);
    populateReturnOpTypeConversionPattern(patterns, typeConverter);
    populateCallOpTypeConversionPattern(patterns, typeConverter);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::kiln
