//===- DynamicArguments.cpp - Dynamic-extent buffers on GPUs --------------===//

#include "jit/targets/gpu/DynamicArguments.h"

#include "jit/targets/cpu/DynamicKernel.h"

#include <functional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;

namespace kiln::jit::gpu {

namespace {

/// The product of `sizes` as one index value (constants folded).
Value elementCount(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes) {
  int64_t constant = 1;
  Value product;
  for (OpFoldResult s : sizes) {
    if (std::optional<int64_t> c = getConstantIntValue(s)) {
      constant *= *c;
      continue;
    }
    Value v = cast<Value>(s);
    product = product ? Value(arith::MulIOp::create(b, loc, product, v)) : v;
  }
  Value c = arith::ConstantIndexOp::create(b, loc, constant);
  return product ? (constant == 1 ? product : Value(arith::MulIOp::create(b, loc, product, c))) : c;
}

/// `flat` (1-D) expanded into `type`, of sizes `sizes`.
Value expandTo(OpBuilder &b, Location loc, MemRefType type, Value flat, ArrayRef<OpFoldResult> sizes) {
  SmallVector<ReassociationIndices> all(1);
  for (int64_t d = 0; d < type.getRank(); ++d)
    all[0].push_back(d);
  return memref::ExpandShapeOp::create(b, loc, type, flat, all, sizes);
}

} // namespace

void forwardDynamicResults(func::FuncOp kernel, unsigned numInputs, unsigned numOutputs) {
  Block &entry = kernel.getBody().front();
  SmallVector<memref::CopyOp> copies;
  for (Operation &op : entry)
    if (auto copy = dyn_cast<memref::CopyOp>(op))
      copies.push_back(copy);
  for (memref::CopyOp copy : copies) {
    auto out = dyn_cast<BlockArgument>(copy.getTarget());
    auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
    if (!out || out.getOwner() != &entry || out.getArgNumber() < numInputs ||
        out.getArgNumber() >= numInputs + numOutputs || !alloc || alloc->getBlock() != &entry ||
        alloc.getType() != out.getType() || alloc.getType().hasStaticShape())
      continue;
    // The copy is the last use of the allocation and of its views, and the
    // out-param's only one, so the allocation's writers may write the
    // out-param instead.
    std::function<bool(Value)> usedBeforeCopy = [&](Value v) {
      return llvm::all_of(v.getUsers(), [&](Operation *user) {
        Operation *top = entry.findAncestorOpInBlock(*user);
        if (!top || (top != copy && !top->isBeforeInBlock(copy)))
          return false;
        return llvm::all_of(user->getResults(), [&](Value r) {
          return !isa<BaseMemRefType>(r.getType()) || usedBeforeCopy(r);
        });
      });
    };
    const bool lastUse = usedBeforeCopy(alloc.getResult());
    if (!lastUse || !out.hasOneUse())
      continue;
    copy.erase();
    alloc.replaceAllUsesWith(Value(out));
    alloc.erase();
  }
}

LogicalResult bindFlatDynamicArguments(func::FuncOp kernel, const trace::TraceGraph &graph, unsigned numSizes) {
  Block &entry = kernel.getBody().front();
  const unsigned numArgs = graph.inputs.size() + graph.outputs.size();
  if (kernel.getNumArguments() < numArgs + numSizes)
    return kernel.emitError("kiln: unexpected arguments of a dynamic-shape kernel");
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Location loc = kernel.getLoc();
  for (unsigned a = 0; a < numArgs; ++a) {
    BlockArgument arg = entry.getArgument(a);
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type || type.hasStaticShape() || type.getRank() < 2)
      continue;
    FailureOr<SmallVector<OpFoldResult>> sizes = cpu::dynamicArgumentSizes(kernel, graph, a, type, b);
    if (failed(sizes))
      return failure();
    arg.setType(MemRefType::get({ShapedType::kDynamic}, type.getElementType()));
    Value expanded = expandTo(b, loc, type, arg, *sizes);
    arg.replaceAllUsesExcept(expanded, expanded.getDefiningOp());
  }
  SmallVector<Type> argTypes(entry.getArgumentTypes());
  kernel.setFunctionType(FunctionType::get(kernel.getContext(), argTypes, kernel.getResultTypes()));
  return success();
}

void flattenDynamicViews(func::FuncOp kernel) {
  SmallVector<memref::ViewOp> views;
  kernel.walk([&](memref::ViewOp view) {
    MemRefType type = view.getType();
    if (!type.hasStaticShape() && type.getRank() > 1)
      views.push_back(view);
  });
  for (memref::ViewOp view : views) {
    OpBuilder b(view);
    Location loc = view.getLoc();
    MemRefType type = view.getType();
    SmallVector<OpFoldResult> sizes;
    auto dynamicSize = view.getSizes().begin();
    for (int64_t d : type.getShape())
      sizes.push_back(ShapedType::isDynamic(d) ? OpFoldResult(*dynamicSize++) : OpFoldResult(b.getIndexAttr(d)));
    Value count = elementCount(b, loc, sizes);
    auto flatType = MemRefType::get({ShapedType::kDynamic}, type.getElementType());
    Value flat = memref::ViewOp::create(b, loc, flatType, view.getSource(), view.getByteShift(), ValueRange{count});
    Value expanded = expandTo(b, loc, type, flat, sizes);
    view.replaceAllUsesWith(expanded);
    view.erase();
  }
}

void resolveDynamicDims(func::FuncOp kernel) {
  // Dims of a reinterpreted argument (cpu::bindDynamicArguments): its sizes.
  SmallVector<memref::DimOp> dims;
  kernel.walk([&](memref::DimOp dim) { dims.push_back(dim); });
  for (memref::DimOp dim : dims) {
    auto reinterpret = dim.getSource().getDefiningOp<memref::ReinterpretCastOp>();
    std::optional<int64_t> axis = dim.getConstantIndex();
    if (!reinterpret || !axis || *axis < 0 || *axis >= reinterpret.getType().getRank())
      continue;
    OpBuilder b(dim);
    OpFoldResult size = reinterpret.getMixedSizes()[*axis];
    Value value = isa<Value>(size) ? cast<Value>(size)
                                   : Value(arith::ConstantIndexOp::create(b, dim.getLoc(), *getConstantIntValue(size)));
    dim.replaceAllUsesWith(value);
    dim.erase();
  }
  RewritePatternSet patterns(kernel.getContext());
  memref::populateResolveRankedShapedTypeResultDimsPatterns(patterns);
  memref::DimOp::getCanonicalizationPatterns(patterns, kernel.getContext());
  (void)applyPatternsGreedily(kernel, std::move(patterns));  // folds dims of views and casts too
}

} // namespace kiln::jit::gpu
