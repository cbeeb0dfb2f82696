//===- KilnOps.cpp - kiln op verifiers ------------------------------------===//
//
// Verifiers: the shape rules come from runtime/core/ShapeRules.h, the same
// functions the recorder and the interpreter call. Element types are checked
// by the ODS constraints, and for the elementwise families also by the op
// table's dtype rule (include/kiln/op_table.def). Folders live in KilnFolds.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"

#include "dialects/kiln/IR/KilnTypes.h"
#include "runtime/core/OpKind.h"
#include "runtime/core/ShapeRules.h"

#include <vector>

using namespace mlir;
using namespace mlir::kiln;
namespace core = ::kiln::core;
using ::kiln::Shape;

#define GET_OP_CLASSES
#include "dialects/kiln/IR/KilnOps.cpp.inc"

static Shape shapeOf(Value v) {
  return getShape(cast<ShapedType>(v.getType()));
}

/// Turns a core rule's message (empty on success) into a diagnostic.
static LogicalResult checkRule(Operation *op, const std::string &error) {
  if (error.empty())
    return success();
  return op->emitOpError() << error;
}

static LogicalResult checkResultShape(Operation *op, const Shape &expected) {
  Shape actual = shapeOf(op->getResult(0));
  if (actual == expected)
    return success();
  return op->emitOpError() << "result shape " << actual.str()
                           << " does not match the expected shape "
                           << expected.str();
}

/// Dynamic extents (`?`) appear in dynamic-shape kernels only. The recorder
/// checked the shape rules on every trace such a kernel runs, so verifiers
/// apply the rules to fully static ops and check dynamic ones for
/// compatibility (ranks, broadcasting) where that is cheap.
static bool hasDynamicExtents(Operation *op) {
  auto dynamic = [](Type t) {
    auto shaped = dyn_cast<ShapedType>(t);
    return shaped && !shaped.hasStaticShape();
  };
  return llvm::any_of(op->getOperandTypes(), dynamic) ||
         llvm::any_of(op->getResultTypes(), dynamic);
}

/// Broadcasting with dynamic extents: each operand extent equals the
/// result's, is 1, or one of the two is dynamic.
static LogicalResult verifyDynamicBroadcast(Operation *op,
                                            ValueRange operands) {
  auto result = cast<ShapedType>(op->getResult(0).getType());
  for (Value operand : operands) {
    auto type = cast<ShapedType>(operand.getType());
    int64_t offset = result.getRank() - type.getRank();
    if (offset < 0)
      return op->emitOpError("operand rank ")
             << type.getRank() << " exceeds the result rank "
             << result.getRank();
    for (int64_t i = 0; i < type.getRank(); ++i) {
      int64_t in = type.getDimSize(i), out = result.getDimSize(offset + i);
      if (in != out && in != 1 && !ShapedType::isDynamic(in) &&
          !ShapedType::isDynamic(out))
        return op->emitOpError("operand extent ")
               << in << " does not broadcast to result extent " << out;
    }
  }
  return success();
}

/// Operands broadcast (NumPy) to the result's shape.
static LogicalResult verifyBroadcast(Operation *op, ValueRange operands) {
  if (hasDynamicExtents(op))
    return verifyDynamicBroadcast(op, operands);
  Shape shape = shapeOf(operands.front());
  for (Value operand : operands.drop_front()) {
    Shape next;
    if (failed(checkRule(
            op, core::broadcastShapes(shape, shapeOf(operand), &next))))
      return failure();
    shape = next;
  }
  return checkResultShape(op, shape);
}

/// Normalizes an axis attribute with the core rule.
static FailureOr<int> normalizeAxis(Operation *op, int64_t axis, int rank) {
  int normalized = 0;
  if (failed(checkRule(op, core::normalizeAxis(axis, rank, &normalized))))
    return failure();
  return normalized;
}

//===----------------------------------------------------------------------===//
// Leaves.
//===----------------------------------------------------------------------===//

LogicalResult FullOp::verify() {
  // ConstantLike: it must always fold to an attribute.
  if (!getType().hasStaticShape())
    return emitOpError("result must be statically shaped; broadcast a 0-d "
                       "kiln.full to dynamic extents");
  Type elementType = getType().getElementType();
  if (isa<FloatType>(elementType)) {
    auto value = dyn_cast<FloatAttr>(getValue());
    if (!value || (!value.getType().isF64() && value.getType() != elementType))
      return emitOpError("value of a float result must be a float attribute "
                         "of type f64 or of the result's element type, got ")
             << getValue();
    return success();
  }
  if (!isa<IntegerAttr>(getValue()))
    return emitOpError("value of an integer or bool result must be an integer "
                       "attribute, got ")
           << getValue();
  return success();
}

LogicalResult ArangeOp::verify() {
  if (getType().getRank() != 1)
    return emitOpError("result must be 1-D, got rank ") << getType().getRank();
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops with broadcasting.
//===----------------------------------------------------------------------===//

LogicalResult mlir::kiln::verifyElementwiseOp(Operation *op) {
  StringRef name = op->getName().stripDialect();
  core::OpKind kind;
  if (!core::opKindFromName(std::string_view(name.data(), name.size()), &kind))
    return op->emitOpError("is not in the op table (include/kiln/op_table.def)");
  Type elementType =
      cast<ShapedType>(op->getOperand(0).getType()).getElementType();
  std::optional<::kiln::DType> dtype = getDType(elementType);
  if (!dtype || !core::acceptsDType(kind, *dtype))
    return op->emitOpError()
           << "takes " << core::opTypesDescription(kind).data() << ", not "
           << elementType;
  if (op->getNumOperands() < 2)
    return success();
  return verifyBroadcast(op, op->getOperands());
}

LogicalResult WhereOp::verify() {
  return verifyBroadcast(*this, getOperation()->getOperands());
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

template <typename OpTy> static LogicalResult verifyReduce(OpTy op) {
  ArrayRef<int64_t> axes = op.getAxes();
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0)
      return op.emitOpError("axes must be normalized (non-negative), got ")
             << axes[i];
    if (i > 0 && axes[i] <= axes[i - 1])
      return op.emitOpError("axes must be sorted and distinct");
  }
  if (hasDynamicExtents(op))
    return success();
  Shape in = shapeOf(op.getInput());
  // Larger axes than the rank are reported by the core rule; keep them
  // within int for it.
  std::vector<int> intAxes;
  for (int64_t axis : axes)
    intAxes.push_back(static_cast<int>(std::min<int64_t>(axis, 1 << 20)));
  Shape out;
  core::AxisMask mask = 0;
  if (failed(checkRule(
          op, core::reduceShape(in, intAxes, op.getKeepdim(), &out, &mask))))
    return failure();
  return checkResultShape(op, out);
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceProdOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMinOp::verify() { return verifyReduce(*this); }

template <typename OpTy> static LogicalResult verifyArgReduce(OpTy op) {
  if (hasDynamicExtents(op))
    return success();
  Shape in = shapeOf(op.getInput());
  int64_t axis = op.getAxis();
  // Rank 0: axis 0 or -1 means the value (as in core::reduceShape).
  int normalized = 0;
  if (!(in.rank() == 0 && (axis == 0 || axis == -1))) {
    FailureOr<int> n = normalizeAxis(op, axis, in.rank());
    if (failed(n))
      return failure();
    normalized = *n;
  }
  int axes[] = {normalized};
  Shape out;
  core::AxisMask mask = 0;
  if (failed(checkRule(
          op, core::reduceShape(in, axes, op.getKeepdim(), &out, &mask))))
    return failure();
  return checkResultShape(op, out);
}

LogicalResult CumsumOp::verify() {
  return normalizeAxis(*this, getAxis(), cast<RankedTensorType>(getInput().getType()).getRank());
}

LogicalResult ArgMaxOp::verify() { return verifyArgReduce(*this); }
LogicalResult ArgMinOp::verify() { return verifyArgReduce(*this); }

//===----------------------------------------------------------------------===//
// Matmul and shape ops.
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  if (hasDynamicExtents(*this))
    return success();
  Shape out;
  if (failed(checkRule(*this, core::matmulShape(shapeOf(getLhs()),
                                                shapeOf(getRhs()), &out))))
    return failure();
  return checkResultShape(*this, out);
}

core::Conv2dParams Conv2dOp::getParams() {
  core::Conv2dParams p;
  ArrayRef<int64_t> strides = getStrides(), pads = getPads(),
                    dilations = getDilations();
  if (strides.size() == 2)
    p.strideH = strides[0], p.strideW = strides[1];
  if (pads.size() == 4)
    p.padTop = pads[0], p.padLeft = pads[1], p.padBottom = pads[2],
    p.padRight = pads[3];
  if (dilations.size() == 2)
    p.dilationH = dilations[0], p.dilationW = dilations[1];
  p.groups = getGroups();
  return p;
}

LogicalResult Conv2dOp::verify() {
  if (getStrides().size() != 2 || getDilations().size() != 2 ||
      getPads().size() != 4)
    return emitOpError() << "needs 2 strides, 4 pads and 2 dilations, got "
                         << getStrides().size() << ", " << getPads().size()
                         << " and " << getDilations().size();
  if (hasDynamicExtents(*this))
    return success();
  Shape out;
  if (failed(checkRule(*this, core::conv2dShape(shapeOf(getInput()),
                                                shapeOf(getWeight()),
                                                getParams(), &out))))
    return failure();
  return checkResultShape(*this, out);
}

LogicalResult ReshapeOp::verify() {
  if (hasDynamicExtents(*this))
    return success();
  Shape out;
  return checkRule(*this, core::reshapeShape(shapeOf(getInput()),
                                             shapeOf(getResult()), &out));
}

LogicalResult PermuteOp::verify() {
  if (hasDynamicExtents(*this))
    return success();
  ArrayRef<int64_t> perm = getPerm();
  Shape out;
  if (failed(checkRule(*this, core::permuteShape(shapeOf(getInput()),
                                                 std::span<const int64_t>(
                                                     perm.data(), perm.size()),
                                                 &out))))
    return failure();
  return checkResultShape(*this, out);
}

LogicalResult BroadcastToOp::verify() {
  if (hasDynamicExtents(*this))
    return verifyDynamicBroadcast(*this, getOperation()->getOperands());
  return checkRule(
      *this, core::checkBroadcastTo(shapeOf(getInput()), shapeOf(getResult())));
}

LogicalResult SliceOp::verify() {
  if (hasDynamicExtents(*this))
    return success();
  ArrayRef<int64_t> starts = getStarts(), steps = getSteps();
  return checkRule(
      *this,
      core::checkSlice(shapeOf(getInput()),
                       std::span<const int64_t>(starts.data(), starts.size()),
                       std::span<const int64_t>(steps.data(), steps.size()),
                       shapeOf(getResult())));
}

LogicalResult ConcatOp::verify() {
  // SameOperandsAndResultElementType already requires one input or more.
  if (hasDynamicExtents(*this))
    return success();
  std::vector<Shape> shapes;
  for (Value input : getInputs())
    shapes.push_back(shapeOf(input));
  std::vector<const Shape *> pointers;
  for (const Shape &shape : shapes)
    pointers.push_back(&shape);
  if (shapes.front().rank() == 0)
    return checkRule(*this, core::concatShape(pointers, 0, nullptr));
  FailureOr<int> axis = normalizeAxis(*this, getAxis(), shapes.front().rank());
  if (failed(axis))
    return failure();
  Shape out;
  if (failed(checkRule(*this, core::concatShape(pointers, *axis, &out))))
    return failure();
  return checkResultShape(*this, out);
}

//===----------------------------------------------------------------------===//
// Index ops.
//===----------------------------------------------------------------------===//

/// The index ops' verifier: static extents only, a valid axis of the
/// input, then `rule(input shape, axis, &result shape)` (a core shape rule
/// that sets the expected result shape and returns its error).
template <class Rule>
static LogicalResult verifyAlongAxis(Operation *op, Value input, int64_t axisAttr, Rule rule) {
  if (hasDynamicExtents(op))
    return success();
  Shape in = shapeOf(input);
  FailureOr<int> axis = normalizeAxis(op, axisAttr, in.rank());
  if (failed(axis))
    return failure();
  Shape out;
  if (failed(checkRule(op, rule(in, *axis, &out))))
    return failure();
  return checkResultShape(op, out);
}

LogicalResult IndexSelectOp::verify() {
  return verifyAlongAxis(*this, getInput(), getAxis(), [&](const Shape &in, int axis, Shape *out) {
    return core::indexSelectShape(in, axis, shapeOf(getIndex()), out);
  });
}

LogicalResult IndexAddOp::verify() {
  return verifyAlongAxis(*this, getInput(), getAxis(), [&](const Shape &in, int axis, Shape *out) {
    *out = in;
    return core::indexAddShape(in, axis, shapeOf(getIndex()), shapeOf(getSource()));
  });
}

LogicalResult ScatterAddOp::verify() {
  return verifyAlongAxis(*this, getInput(), getAxis(), [&](const Shape &in, int axis, Shape *out) {
    *out = in;
    return core::scatterAddShape(in, axis, shapeOf(getIndex()), shapeOf(getSource()));
  });
}

LogicalResult GatherOp::verify() {
  return verifyAlongAxis(*this, getInput(), getAxis(), [&](const Shape &in, int axis, Shape *out) {
    return core::gatherShape(in, axis, shapeOf(getIndex()), out);
  });
}
