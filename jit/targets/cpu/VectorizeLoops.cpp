//===- VectorizeLoops.cpp - Element loops as vector loops before LLVM -*- C++ -*-===//

#include "jit/targets/cpu/VectorizeLoops.h"

#include "jit/targets/cpu/ParallelLoops.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpDefinition.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// How an op of the loop body is rewritten.
enum class Kind {
  Uniform,     ///< the same in every iteration: stays scalar
  Elementwise, ///< the same op on vectors
  VectorLoad,
  VectorStore,
  Prefetch,    ///< stays scalar, at the vector's first element: one per vector
};

/// Elements of whole bytes: a vector of i1 is bit-packed, a memref of i1
/// is not.
bool wholeBytes(MemRefType type) {
  Type element = type.getElementType();
  return element.isIntOrFloat() && element.getIntOrFloatBitWidth() % 8 == 0;
}

/// The reassociation that makes dimension `dim` of `type` and the size-1
/// dimensions after it (an element loop over [8, 64, 1] indexes [r, j, 0])
/// its last: one group for them, one per dimension before.
llvm::SmallVector<ReassociationIndices> trailingGroup(MemRefType type, unsigned dim) {
  llvm::SmallVector<ReassociationIndices> groups;
  for (unsigned d = 0; d < dim; ++d)
    groups.push_back({static_cast<int64_t>(d)});
  ReassociationIndices last;
  for (unsigned d = dim; d < type.getRank(); ++d)
    last.push_back(d);
  groups.push_back(last);
  return groups;
}

/// Scalar types elementwise ops may widen.
bool scalarValueType(Type type) { return type.isIntOrIndexOrFloat(); }

/// The plan for one loop: how each body op is rewritten, or failure when
/// some op has no vector form here.
struct Plan {
  llvm::DenseMap<Operation *, Kind> kinds;
  bool prefetches = false;
};

/// Whether `v` is the same in every iteration of `loop`: defined outside
/// it, or the result of a body op planned uniform.
bool uniform(Value v, scf::ForOp loop, const Plan &plan) {
  if (loop.isDefinedOutsideOfLoop(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;  // the loop's variable
  auto it = plan.kinds.find(def);
  return it != plan.kinds.end() && it->second == Kind::Uniform;
}

/// Whether a vector may load or store consecutive elements of `type` at
/// `indices`: the loop's variable indexes a dimension of unit stride, after
/// which come only dimensions of size 1 (collapsed into it before the loop),
/// and the other indices are uniform.
bool contiguousAccess(MemRefType type, ValueRange indices, scf::ForOp loop, const Plan &plan) {
  if (!wholeBytes(type))
    return false;
  auto at = llvm::find(indices, loop.getInductionVar());
  if (at == indices.end())
    return false;
  const auto dim = static_cast<unsigned>(at - indices.begin());
  for (auto [d, index] : llvm::enumerate(indices))
    if (d != dim && (!uniform(index, loop, plan) || (d > dim && type.getDimSize(d) != 1)))
      return false;
  if (dim + 1 == indices.size())
    return type.isLastDimUnitStride();
  return memref::CollapseShapeOp::isGuaranteedCollapsible(type, trailingGroup(type, dim)) &&
         memref::CollapseShapeOp::computeCollapsedType(type, trailingGroup(type, dim)).isLastDimUnitStride();
}

bool uniformIndices(ValueRange indices, scf::ForOp loop, const Plan &plan) {
  return llvm::all_of(indices, [&](Value i) { return uniform(i, loop, plan); });
}

/// An op whose vector form is the same op on vectors of its operands.
bool elementwise(Operation &op) {
  if (op.getNumRegions() != 0 || op.getNumResults() != 1)
    return false;
  if (!OpTrait::hasElementwiseMappableTraits(&op))
    return false;
  return scalarValueType(op.getResult(0).getType()) &&
         llvm::all_of(op.getOperandTypes(), [](Type t) { return scalarValueType(t); });
}

FailureOr<Plan> planLoop(scf::ForOp loop) {
  Plan plan;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (uniformIndices(load.getIndices(), loop, plan) && scalarValueType(load.getType())) {
        plan.kinds[&op] = Kind::Uniform;
        continue;
      }
      if (!contiguousAccess(load.getMemRefType(), load.getIndices(), loop, plan))
        return failure();
      plan.kinds[&op] = Kind::VectorLoad;
      continue;
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (store.getNontemporal() || !contiguousAccess(store.getMemRefType(), store.getIndices(), loop, plan))
        return failure();
      plan.kinds[&op] = Kind::VectorStore;
      continue;
    }
    if (auto prefetch = dyn_cast<memref::PrefetchOp>(op)) {
      if (!contiguousAccess(prefetch.getMemRefType(), prefetch.getIndices(), loop, plan))
        return failure();
      plan.kinds[&op] = Kind::Prefetch;
      plan.prefetches = true;
      continue;
    }
    if (op.hasTrait<OpTrait::ConstantLike>() && op.getNumResults() == 1) {
      plan.kinds[&op] = Kind::Uniform;
      continue;
    }
    if (!elementwise(op))
      return failure();
    const bool allUniform = llvm::all_of(op.getOperands(), [&](Value v) { return uniform(v, loop, plan); });
    plan.kinds[&op] = allUniform ? Kind::Uniform : Kind::Elementwise;
  }
  return plan;
}

/// The annotation's interleave count (1 when it asks for none).
int64_t interleaveCount(LLVM::LoopAnnotationAttr annotation) {
  if (LLVM::LoopInterleaveAttr interleave = annotation.getInterleave())
    if (IntegerAttr count = interleave.getCount())
      return std::max<int64_t>(1, count.getInt());
  return 1;
}

/// Rewrites `loop` by `plan` as a loop over vectors of `width` elements.
void rewriteLoop(scf::ForOp loop, const Plan &plan, int64_t width, LLVM::LoopAnnotationAttr annotation) {
  OpBuilder outside(loop);
  Location loc = loop.getLoc();
  Value step = arith::ConstantIndexOp::create(outside, loc, width);
  auto vectorLoop = scf::ForOp::create(outside, loc, loop.getLowerBound(), loop.getUpperBound(), step);
  outside.setInsertionPoint(vectorLoop);
  OpBuilder b = OpBuilder::atBlockTerminator(vectorLoop.getBody());
  const Value iv = loop.getInductionVar();
  const Value vectorIv = vectorLoop.getInductionVar();

  IRMapping scalars;  // uniform values and the loop's variable as an index
  scalars.map(iv, vectorIv);
  llvm::DenseMap<Value, Value> vectors;  // a body value's vector
  auto vectorType = [&](Type scalar) { return VectorType::get({width}, scalar); };
  // A value's vector: the body op's, the loop variable's lanes (iv + 0 ..
  // iv + width - 1), or a uniform value broadcast (before the loop when it
  // is defined there).
  auto vectorOf = [&](Value v) -> Value {
    if (auto it = vectors.find(v); it != vectors.end())
      return it->second;
    Value result;
    if (v == iv) {
      llvm::SmallVector<int64_t> lanes(width);
      for (int64_t i = 0; i < width; ++i)
        lanes[i] = i;
      Value offsets = arith::ConstantOp::create(b, loc, b.getIndexVectorAttr(lanes));
      Value base = vector::BroadcastOp::create(b, loc, vectorType(b.getIndexType()), vectorIv);
      result = arith::AddIOp::create(b, loc, base, offsets);
    } else if (loop.isDefinedOutsideOfLoop(v)) {
      result = vector::BroadcastOp::create(outside, loc, vectorType(v.getType()), v);
    } else {
      result = vector::BroadcastOp::create(b, loc, vectorType(v.getType()), scalars.lookup(v));
    }
    vectors[v] = result;
    return result;
  };
  // The memref and indices of a vector access (contiguousAccess): the
  // loop's dimension and the size-1 ones after it collapsed into one, the
  // last, before the loop (once per memref).
  llvm::DenseMap<Value, Value> collapsed;
  auto vectorAccess = [&](Value memref, ValueRange indices) -> std::pair<Value, llvm::SmallVector<Value>> {
    const auto dim = static_cast<unsigned>(llvm::find(indices, iv) - indices.begin());
    llvm::SmallVector<Value> mapped;
    for (Value i : indices.take_front(dim))
      mapped.push_back(scalars.lookupOrDefault(i));
    mapped.push_back(vectorIv);
    if (dim + 1 == indices.size())
      return {memref, mapped};
    Value &view = collapsed[memref];
    if (!view)
      view = memref::CollapseShapeOp::create(outside, loc, memref,
                                             trailingGroup(llvm::cast<MemRefType>(memref.getType()), dim));
    return {view, mapped};
  };

  for (Operation &op : loop.getBody()->without_terminator()) {
    switch (plan.kinds.lookup(&op)) {
    case Kind::Uniform:
    case Kind::Prefetch:
      b.clone(op, scalars);
      break;
    case Kind::VectorLoad: {
      auto load = cast<memref::LoadOp>(op);
      auto [memref, indices] = vectorAccess(load.getMemRef(), load.getIndices());
      vectors[load.getResult()] = vector::LoadOp::create(b, loc, vectorType(load.getType()), memref, indices);
      break;
    }
    case Kind::VectorStore: {
      auto store = cast<memref::StoreOp>(op);
      auto [memref, indices] = vectorAccess(store.getMemRef(), store.getIndices());
      vector::StoreOp::create(b, loc, vectorOf(store.getValueToStore()), memref, indices);
      break;
    }
    case Kind::Elementwise: {
      OperationState state(op.getLoc(), op.getName());
      for (Value operand : op.getOperands())
        state.addOperands(vectorOf(operand));
      state.addTypes(vectorType(op.getResult(0).getType()));
      state.addAttributes(op.getAttrs());
      vectors[op.getResult(0)] = b.create(state)->getResult(0);
      break;
    }
    }
  }
  MLIRContext *ctx = loop.getContext();
  vectorLoop->setAttr(kLoopAnnotation,
                      LLVM::LoopAnnotationAttr::get(
                          ctx, annotation.getDisableNonforced(), annotation.getVectorize(), annotation.getInterleave(),
                          annotation.getUnroll(), annotation.getUnrollAndJam(), annotation.getLicm(),
                          annotation.getDistribute(), annotation.getPipeline(), annotation.getPeeled(),
                          annotation.getUnswitch(), annotation.getMustProgress(), BoolAttr::get(ctx, true),
                          annotation.getStartLoc(), annotation.getEndLoc(), annotation.getParallelAccesses()));
  loop.erase();
}

} // namespace

int vectorizeParallelLoops(Operation *root, unsigned lanes) {
  if (lanes < 2)
    return 0;
  llvm::SmallVector<scf::ForOp> loops;
  root->walk([&](scf::ForOp loop) { loops.push_back(loop); });
  int rewritten = 0;
  for (scf::ForOp loop : loops) {
    auto annotation = dyn_cast_or_null<LLVM::LoopAnnotationAttr>(loop->getDiscardableAttr(kLoopAnnotation));
    if (!annotation || annotation.getParallelAccesses().empty() || loop.getNumRegionIterArgs() != 0)
      continue;
    if (annotation.getIsVectorized() && annotation.getIsVectorized().getValue())
      continue;
    std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound());
    std::optional<int64_t> upper = getConstantIntValue(loop.getUpperBound());
    std::optional<int64_t> stride = getConstantIntValue(loop.getStep());
    if (!lower || !upper || stride != 1 || *upper <= *lower)
      continue;
    const int64_t trips = *upper - *lower;
    FailureOr<Plan> plan = planLoop(loop);
    if (failed(plan))
      continue;
    // A prefetch per vector, as LLVM's marker made them (a line per vector
    // of f32): no wider vectors for the interleave in a loop with them.
    int64_t width = static_cast<int64_t>(lanes);
    if (!plan->prefetches && trips % (width * interleaveCount(annotation)) == 0)
      width *= interleaveCount(annotation);
    if (trips % width != 0)
      continue;
    rewriteLoop(loop, *plan, width, annotation);
    ++rewritten;
  }
  return rewritten;
}

} // namespace kiln::jit::cpu
