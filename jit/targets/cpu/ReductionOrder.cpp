//===- ReductionOrder.cpp - Reduction loops outside-in: kept, then reduced -*- C++ -*-===//

#include "jit/targets/cpu/ReductionOrder.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::jit::cpu {

using namespace mlir;

namespace {

bool isReduction(utils::IteratorType t) { return t == utils::IteratorType::reduction; }

/// Whether every operand is a static memref with the identity layout, which
/// memref.collapse_shape can merge along any run of dimensions.
bool collapsibleOperands(linalg::GenericOp g) {
  for (Value v : g->getOperands()) {
    auto type = dyn_cast<MemRefType>(v.getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
      return false;
  }
  return true;
}

/// Reads of broadcast operands without their unit dimensions: a [1, C, 1, 1]
/// operand read at (0, c, 0, 0) becomes a [C] operand read at (c), which
/// collapsing the loops handles (it miscompiles constant map results).
/// False, with nothing changed, where an operand has a constant result at a
/// dimension that is not a unit one, or only constant results.
bool dropUnitBroadcastDims(RewriterBase &rewriter, linalg::GenericOp g) {
  struct Rewrite {
    unsigned operand;
    SmallVector<ReassociationIndices> groups;
    AffineMap map;
  };
  SmallVector<Rewrite> rewrites;
  for (OpOperand &operand : g->getOpOperands()) {
    AffineMap map = g.getMatchingIndexingMap(&operand);
    auto type = cast<MemRefType>(operand.get().getType());
    SmallVector<AffineExpr> kept;
    SmallVector<ReassociationIndices> groups;
    ReassociationIndices pending;
    for (unsigned r = 0; r < map.getNumResults(); ++r) {
      AffineExpr e = map.getResult(r);
      pending.push_back(r);
      if (isa<AffineConstantExpr>(e)) {
        if (type.getDimSize(r) != 1 || cast<AffineConstantExpr>(e).getValue() != 0)
          return false;
        continue;
      }
      kept.push_back(e);
      groups.push_back(pending);
      pending.clear();
    }
    if (kept.size() == map.getNumResults())
      continue;
    if (kept.empty())
      return false;
    groups.back().append(pending.begin(), pending.end());
    rewrites.push_back({operand.getOperandNumber(), groups,
                        AffineMap::get(map.getNumDims(), 0, kept, g.getContext())});
  }
  if (rewrites.empty())
    return true;
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  rewriter.setInsertionPoint(g);
  for (Rewrite &r : rewrites) {
    Value collapsed = memref::CollapseShapeOp::create(rewriter, g.getLoc(), g->getOperand(r.operand), r.groups);
    rewriter.modifyOpInPlace(g, [&] { g->setOperand(r.operand, collapsed); });
    maps[r.operand] = r.map;
  }
  rewriter.modifyOpInPlace(g, [&] { g.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps)); });
  return true;
}

/// Runs of adjacent reduction loops (among loops `first`..end) that every
/// indexing map keeps adjacent and in order; single loops elsewhere.
SmallVector<ReassociationIndices> reductionRuns(linalg::GenericOp g, unsigned first) {
  SmallVector<utils::IteratorType> iterators = g.getIteratorTypesArray();
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  SmallVector<ReassociationIndices> groups;
  for (unsigned d = 0; d < iterators.size(); ++d) {
    if (d > first && isReduction(iterators[d]) && isReduction(iterators[d - 1])) {
      ReassociationIndices longer = groups.back();
      longer.push_back(d);
      if (linalg::areDimSequencesPreserved(maps, {longer})) {
        groups.back() = longer;
        continue;
      }
    }
    groups.push_back({static_cast<int64_t>(d)});
  }
  return groups;
}

} // namespace

bool reducesOuterLoops(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic)
    return false;
  SmallVector<utils::IteratorType> iterators = generic.getIteratorTypesArray();
  for (size_t d = 1; d < iterators.size(); ++d)
    if (isReduction(iterators[d - 1]) && !isReduction(iterators[d]))
      return true;
  return false;
}

int orderReductionLoops(func::FuncOp fn) {
  SmallVector<linalg::GenericOp> generics;
  fn.walk([&](linalg::GenericOp g) {
    if (g.hasPureBufferSemantics())
      generics.push_back(g);
  });
  IRRewriter rewriter(fn.getContext());
  int reordered = 0;
  for (linalg::GenericOp g : generics) {
    SmallVector<utils::IteratorType> iterators = g.getIteratorTypesArray();
    // (reducesOuterLoops first: it also rules out fewer than two loops.)
    if (!reducesOuterLoops(g) || !isReduction(iterators.back()))
      continue;
    const unsigned loops = iterators.size();
    SmallVector<unsigned> order;
    for (unsigned d = 0; d < loops; ++d)
      if (!isReduction(iterators[d]))
        order.push_back(d);
    const unsigned kept = order.size();
    for (unsigned d = 0; d < loops; ++d)
      if (isReduction(iterators[d]))
        order.push_back(d);
    rewriter.setInsertionPoint(g);
    FailureOr<linalg::GenericOp> interchanged = linalg::interchangeGenericOp(rewriter, g, order);
    if (failed(interchanged))
      continue;
    ++reordered;
    g = *interchanged;
    if (!collapsibleOperands(g) || !dropUnitBroadcastDims(rewriter, g))
      continue;
    SmallVector<ReassociationIndices> runs = reductionRuns(g, kept);
    if (runs.size() == loops)
      continue;
    rewriter.setInsertionPoint(g);
    FailureOr<linalg::CollapseResult> collapsed =
        linalg::collapseOpIterationDims(cast<linalg::LinalgOp>(g.getOperation()), runs, rewriter);
    if (succeeded(collapsed))
      rewriter.eraseOp(g);
  }
  return reordered;
}

} // namespace kiln::jit::cpu
