//===- KilnDialect.cpp - The kiln dialect ---------------------------------===//

#include "dialects/kiln/IR/KilnDialect.h"

#include "dialects/kiln/IR/KilnOps.h"
#include "dialects/kiln/IR/KilnTypes.h"

using namespace mlir;
using namespace mlir::kiln;

#include "dialects/kiln/IR/KilnDialect.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/kiln/IR/KilnOps.cpp.inc"
      >();
}

/// Splats become `kiln.full`; other folded constants (small, see
/// KilnOps.cpp) become `arith.constant`.
Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!tensorType || !dense || dense.getType() != tensorType)
    return nullptr;
  if (!dense.isSplat())
    return arith::ConstantOp::create(builder, loc, tensorType, dense);

  Type elementType = tensorType.getElementType();
  TypedAttr scalar;
  if (isa<FloatType>(elementType)) {
    APFloat v = dense.getSplatValue<APFloat>();
    bool losesInfo = false;
    // f16, bf16 and f32 values are exact in f64.
    v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &losesInfo);
    scalar = builder.getF64FloatAttr(v.convertToDouble());
  } else if (elementType.isInteger(1)) {
    scalar = builder.getBoolAttr(dense.getSplatValue<APInt>().getBoolValue());
  } else {
    APInt v = dense.getSplatValue<APInt>();
    bool zeroExtend = elementType.isUnsignedInteger();
    scalar = builder.getI64IntegerAttr(zeroExtend ? int64_t(v.getZExtValue())
                                                  : v.getSExtValue());
  }
  return FullOp::create(builder, loc, tensorType, scalar);
}

//===----------------------------------------------------------------------===//
// KilnTypes.h
//===----------------------------------------------------------------------===//

std::optional<::kiln::DType> mlir::kiln::getDType(Type t) {
  using ::kiln::DType;
  if (t.isF32())
    return DType::f32;
  if (t.isF64())
    return DType::f64;
  if (t.isF16())
    return DType::f16;
  if (t.isBF16())
    return DType::bf16;
  if (t.isSignlessInteger(64))
    return DType::i64;
  if (t.isSignlessInteger(32))
    return DType::i32;
  if (t.isSignlessInteger(8))
    return DType::i8;
  if (t.isUnsignedInteger(8))
    return DType::u8;
  if (t.isSignlessInteger(1))
    return DType::boolean;
  return std::nullopt;
}

Type mlir::kiln::getElementType(MLIRContext *context, ::kiln::DType dtype) {
  Builder b(context);
  switch (dtype) {
  case ::kiln::DType::f32:
    return b.getF32Type();
  case ::kiln::DType::f64:
    return b.getF64Type();
  case ::kiln::DType::f16:
    return b.getF16Type();
  case ::kiln::DType::bf16:
    return b.getBF16Type();
  case ::kiln::DType::i64:
    return b.getI64Type();
  case ::kiln::DType::i32:
    return b.getI32Type();
  case ::kiln::DType::i8:
    return b.getI8Type();
  case ::kiln::DType::u8:
    return IntegerType::get(context, 8, IntegerType::Unsigned);
  case ::kiln::DType::boolean:
    return b.getI1Type();
  }
  return {};
}

RankedTensorType mlir::kiln::getTensorType(MLIRContext *context,
                                           const ::kiln::Shape &shape,
                                           ::kiln::DType dtype) {
  return RankedTensorType::get(ArrayRef<int64_t>(shape.begin(), shape.end()),
                               getElementType(context, dtype));
}

::kiln::Shape mlir::kiln::getShape(ShapedType type) {
  assert(type.hasStaticShape() && type.getRank() <= kMaxRank &&
         "kiln tensors are static with rank <= kMaxRank");
  ArrayRef<int64_t> dims = type.getShape();
  return ::kiln::Shape(std::span<const int64_t>(dims.data(), dims.size()));
}
