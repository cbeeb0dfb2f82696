//===- DynamicKernel.cpp - Dynamic-shape kernels on the CPU -----*- C++ -*-===//

#include "jit/targets/cpu/DynamicKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {
/// The graph extents of kernel argument `arg` (inputs, then outputs); null
/// for the size arguments.
const Shape *extentsOf(const trace::TraceGraph &graph, unsigned arg) {
  if (arg < graph.inputs.size())
    return &graph.nodes[graph.inputs[arg]].shape;
  arg -= graph.inputs.size();
  if (arg < graph.outputs.size())
    return &graph.nodes[graph.outputs[arg]].shape;
  return nullptr;
}
} // namespace

int64_t dynamicSizeCount(const trace::TraceGraph &graph) {
  int64_t count = 0;
  for (const trace::Node &n : graph.nodes)
    for (int64_t d : n.shape)
      if (d < 0)
        count = std::max(count, -d);
  return count;
}

LogicalResult moveSizeArguments(func::FuncOp kernel, const trace::TraceGraph &graph, unsigned numSizes) {
  const unsigned numInputs = graph.inputs.size();
  const unsigned total = kernel.getNumArguments();
  if (total != numInputs + numSizes + graph.outputs.size())
    return kernel.emitError("kiln: unexpected arguments of a dynamic-shape kernel");
  Block &entry = kernel.getBody().front();
  IndexType index = IndexType::get(kernel.getContext());
  for (unsigned k = 0; k < numSizes; ++k) {
    if (!entry.getArgument(numInputs + k).getType().isIndex())
      return kernel.emitError("kiln: the sizes of a dynamic-shape kernel must be index arguments");
    if (failed(kernel.insertArgument(total + k, index, DictionaryAttr::get(kernel.getContext()), kernel.getLoc())))
      return failure();
    entry.getArgument(numInputs + k).replaceAllUsesWith(entry.getArgument(total + k));
  }
  llvm::BitVector erase(total + numSizes);
  erase.set(numInputs, numInputs + numSizes);
  if (failed(kernel.eraseArguments(erase)))
    return failure();

  // memref.dim of an argument: a constant, or one of the sizes; of a
  // temporary or a reshape of one: its size operands (repeated until every
  // dimension that can be is resolved, so scratch sizes are the sizes).
  const unsigned firstSize = kernel.getNumArguments() - numSizes;
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<memref::DimOp> dims;
    kernel.walk([&](memref::DimOp dim) { dims.push_back(dim); });
    for (memref::DimOp dim : dims) {
      std::optional<int64_t> axis = dim.getConstantIndex();
      auto type = dyn_cast<MemRefType>(dim.getSource().getType());
      if (!axis || !type || *axis < 0 || *axis >= type.getRank())
        continue;
      OpBuilder b(dim);
      Location loc = dim.getLoc();
      Value value;
      if (!type.isDynamicDim(*axis)) {
        value = arith::ConstantIndexOp::create(b, loc, type.getDimSize(*axis));
      } else if (auto arg = dyn_cast<BlockArgument>(dim.getSource())) {
        const Shape *extents = arg.getOwner() == &entry ? extentsOf(graph, arg.getArgNumber()) : nullptr;
        if (!extents || *axis >= extents->rank())
          continue;
        const int64_t extent = (*extents)[static_cast<int>(*axis)];
        value = extent >= 0 ? Value(arith::ConstantIndexOp::create(b, loc, extent))
                            : entry.getArgument(firstSize + static_cast<unsigned>(-1 - extent));
      } else if (auto alloc = dim.getSource().getDefiningOp<memref::AllocOp>()) {
        value = alloc.getDynamicSizes()[type.getDynamicDimIndex(*axis)];
      } else if (auto expand = dim.getSource().getDefiningOp<memref::ExpandShapeOp>()) {
        OpFoldResult size = expand.getMixedOutputShape()[*axis];
        value = isa<Value>(size) ? cast<Value>(size)
                                 : Value(arith::ConstantIndexOp::create(b, loc, *getConstantIntValue(size)));
      } else if (auto collapse = dim.getSource().getDefiningOp<memref::CollapseShapeOp>()) {
        value = arith::ConstantIndexOp::create(b, loc, 1);
        for (int64_t d : collapse.getReassociationIndices()[*axis])
          value = arith::MulIOp::create(b, loc, value, memref::DimOp::create(b, loc, collapse.getSrc(), d));
      } else {
        continue;
      }
      dim.replaceAllUsesWith(value);
      dim.erase();
      changed = true;
    }
  }
  // Products of sizes and constants (collapsed temporaries) fold to one
  // value where they can.
  return success();
}

FailureOr<SmallVector<OpFoldResult>> dynamicArgumentSizes(func::FuncOp kernel, const trace::TraceGraph &graph,
                                                          unsigned arg, MemRefType type, OpBuilder &b) {
  Block &entry = kernel.getBody().front();
  const unsigned firstSize = graph.inputs.size() + graph.outputs.size();
  if (!type.getLayout().isIdentity())
    return kernel.emitError("kiln: dynamic arguments must have the identity layout");
  const Shape *extents = extentsOf(graph, arg);
  if (!extents || extents->rank() != type.getRank())
    return kernel.emitError("kiln: argument extents do not match the graph");
  SmallVector<OpFoldResult> sizes;
  for (int d = 0; d < type.getRank(); ++d) {
    const int64_t extent = (*extents)[d];
    if (extent >= 0 && type.isDynamicDim(d))
      return kernel.emitError("kiln: a static graph extent is dynamic in the kernel");
    sizes.push_back(extent >= 0 ? OpFoldResult(b.getIndexAttr(extent))
                                : OpFoldResult(entry.getArgument(firstSize + static_cast<unsigned>(-1 - extent))));
  }
  return sizes;
}

LogicalResult bindDynamicArguments(func::FuncOp kernel, const trace::TraceGraph &graph, unsigned numSizes) {
  Block &entry = kernel.getBody().front();
  const unsigned numArgs = graph.inputs.size() + graph.outputs.size();
  if (kernel.getNumArguments() < numArgs + numSizes)
    return kernel.emitError("kiln: unexpected arguments of a dynamic-shape kernel");
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Location loc = kernel.getLoc();
  for (unsigned a = 0; a < numArgs; ++a) {
    BlockArgument arg = entry.getArgument(a);
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type || type.hasStaticShape())
      continue;
    // Sizes, then row-major strides (static where the trailing extents are).
    FailureOr<SmallVector<OpFoldResult>> sizes = dynamicArgumentSizes(kernel, graph, a, type, b);
    if (failed(sizes))
      return failure();
    SmallVector<OpFoldResult> strides(type.getRank());
    OpFoldResult stride = b.getIndexAttr(1);
    for (int d = type.getRank() - 1; d >= 0; --d) {
      strides[d] = stride;
      auto staticStride = getConstantIntValue(stride);
      auto staticSize = getConstantIntValue((*sizes)[d]);
      if (staticStride && staticSize) {
        stride = b.getIndexAttr(*staticStride * *staticSize);
        continue;
      }
      auto asValue = [&](OpFoldResult v) -> Value {
        if (auto value = dyn_cast<Value>(v))
          return value;
        return arith::ConstantIndexOp::create(b, loc, *getConstantIntValue(v));
      };
      stride = Value(arith::MulIOp::create(b, loc, asValue(stride), asValue((*sizes)[d])));
    }
    arg.setType(MemRefType::get({}, type.getElementType()));
    auto cast = memref::ReinterpretCastOp::create(b, loc, type, arg, b.getIndexAttr(0), *sizes, strides);
    arg.replaceAllUsesExcept(cast.getResult(), cast);
  }
  SmallVector<Type> argTypes(entry.getArgumentTypes());
  kernel.setFunctionType(FunctionType::get(kernel.getContext(), argTypes, kernel.getResultTypes()));
  return success();
}

} // namespace kiln::jit::cpu
