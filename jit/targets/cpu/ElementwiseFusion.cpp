//===- ElementwiseFusion.cpp - Linalg fusion with Kiln's control -*- C++ -*-===//

#include "jit/targets/cpu/ElementwiseFusion.h"

#include "dialects/kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "jit/targets/cpu/ReductionOrder.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// Named linalg ops keep their identity: the runtime's GEMM takes matmuls;
/// so do index_add's and cumsum's generics, which runtime calls take
/// (mlir::kiln::isRuntimeCallGeneric).
bool isNamedLinalgOp(Operation *op) {
  return op && isa<linalg::LinalgOp>(op) && (!isa<linalg::GenericOp>(op) || mlir::kiln::isRuntimeCallGeneric(op));
}

/// Single-use producers only (upstream's default), never a named op.
bool fusibleProducer(OpOperand *fused) {
  Operation *producer = fused->get().getDefiningOp();
  return producer && producer->hasOneUse() && !isNamedLinalgOp(producer) && !isNamedLinalgOp(fused->getOwner());
}

/// ...and the consumer reads each produced element once: its indexing map
/// for the operand is a permutation of its loops, so the producer's payload
/// is not repeated across broadcast or reduction dimensions.
bool computesEachElementOnce(OpOperand *fused) {
  if (!fusibleProducer(fused))
    return false;
  auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
  return !consumer || consumer.getMatchingIndexingMap(fused).isPermutation();
}

/// A reshape folds into a generic by expanding its loops, except into one
/// that reduces outer loops: a keepdim result's expand_shape pushed up
/// through it reshapes its input, which its elementwise producer (with a
/// broadcast operand, so not expandable itself) then no longer fuses into (a
/// batch norm's `mean((x - mu)^2)` wrote x - mu out and read it back). Row
/// reductions keep the expanded form their row loops are fused in.
bool foldableReshape(OpOperand *fused) {
  return fusibleProducer(fused) && !reducesOuterLoops(fused->get().getDefiningOp()) &&
         !reducesOuterLoops(fused->getOwner());
}

/// Payload operations a recomputed producer may have.
constexpr int kRecomputedOps = 8;

/// An elementwise generic that costs less to recompute in each consumer than
/// to write out and read back: one result, a short payload of arithmetic
/// (no exp or other math calls: softmax's exp(x - max) stays one row
/// temporary that its row loops keep in cache), and at most one input as
/// large as its result (the others broadcast, like a batch norm's
/// per-channel mean), so the consumers read no more than before.
bool recomputable(linalg::GenericOp g) {
  if (g.getNumDpsInits() != 1 || g.getNumReductionLoops() > 0 || g.getNumResults() != 1)
    return false;
  OpOperand *init = g.getDpsInitOperand(0);
  if (!g.getMatchingIndexingMap(init).isPermutation() || g.payloadUsesValueFromOperand(init))
    return false;
  int fullInputs = 0;
  for (OpOperand *in : g.getDpsInputOperands()) {
    AffineMap map = g.getMatchingIndexingMap(in);
    if (map.isPermutation() || !map.isProjectedPermutation(/*allowZeroInResults=*/true))
      ++fullInputs;
  }
  if (fullInputs > 1)
    return false;
  int ops = 0;
  for (Operation &op : g.getBody()->without_terminator()) {
    if (++ops > kRecomputedOps || !isPure(&op) || !isa<arith::ArithDialect>(op.getDialect()))
      return false;
  }
  return true;
}

/// Whether every use of `value` (two or more) is an input of a generic that
/// reads each of its elements once.
bool everyUseFusible(Value value) {
  if (value.hasOneUse() || value.use_empty())
    return false;
  for (OpOperand &use : value.getUses()) {
    auto consumer = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (!consumer || !consumer.isDpsInput(&use) || !consumer.getMatchingIndexingMap(&use).isPermutation())
      return false;
  }
  return true;
}

/// Gives each consumer of a recomputable multi-use producer a copy of its
/// own, which the single-use fusion then folds into it: the producer's
/// result is never written out (a batch norm's x - mu, (x - mu) * rstd and
/// ReLU fed both a reduction and an elementwise op, each a full pass over
/// memory). Returns the consumers that now have a copy to fuse (none: nothing
/// was copied).
SmallVector<Operation *> copyRecomputableProducers(ModuleOp module) {
  SmallVector<linalg::GenericOp> producers;
  module.walk([&](linalg::GenericOp g) {
    if (recomputable(g) && everyUseFusible(g->getResult(0)))
      producers.push_back(g);
  });
  SmallVector<Operation *> consumers;
  OpBuilder b(module.getContext());
  for (linalg::GenericOp g : producers) {
    b.setInsertionPointAfter(g);
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : g->getResult(0).getUses())
      uses.push_back(&use);
    for (OpOperand *use : uses)
      consumers.push_back(use->getOwner());
    for (OpOperand *use : llvm::drop_begin(uses))
      use->set(b.clone(*g)->getResult(0));
  }
  return consumers;
}

/// Whether reductions `a` and `b` (a before b, same block) can run as one
/// generic: the same loops, a reduction over outer loops (row reductions
/// keep their own row loops), an input read the same way by both, and no
/// use of `a` before `b`.
bool siblingReductions(linalg::GenericOp a, linalg::GenericOp b) {
  if (a->getBlock() != b->getBlock() || !a->isBeforeInBlock(b) || !reducesOuterLoops(a) ||
      !a.hasPureTensorSemantics() || !b.hasPureTensorSemantics() ||
      a.getIteratorTypesArray() != b.getIteratorTypesArray())
    return false;
  SmallVector<int64_t> ranges = a.getStaticLoopRanges();
  if (ranges != b.getStaticLoopRanges() || llvm::any_of(ranges, ShapedType::isDynamic))
    return false;
  bool shared = false;
  for (OpOperand *x : a.getDpsInputOperands())
    for (OpOperand *y : b.getDpsInputOperands())
      shared = shared || (x->get() == y->get() && a.getMatchingIndexingMap(x) == b.getMatchingIndexingMap(y) &&
                          a.getMatchingIndexingMap(x).isPermutation());
  if (!shared)
    return false;
  for (Operation *user : a->getUsers()) {
    Operation *inBlock = a->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock || inBlock == b.getOperation() || inBlock->isBeforeInBlock(b))
      return false;
  }
  return true;
}

/// One generic computing both `a`'s and `b`'s results, at `b`'s place.
void mergeReductions(linalg::GenericOp a, linalg::GenericOp b) {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  IRMapping map;
  auto addInputs = [&](linalg::GenericOp g, SmallVector<unsigned>& argIndex) {
    for (OpOperand *in : g.getDpsInputOperands()) {
      AffineMap m = g.getMatchingIndexingMap(in);
      unsigned k = 0;
      while (k < inputs.size() && !(inputs[k] == in->get() && maps[k] == m))
        ++k;
      if (k == inputs.size()) {
        inputs.push_back(in->get());
        maps.push_back(m);
      }
      argIndex.push_back(k);
    }
  };
  SmallVector<unsigned> aArgs, bArgs;
  addInputs(a, aArgs);
  addInputs(b, bArgs);
  SmallVector<Value> inits;
  for (linalg::GenericOp g : {a, b})
    for (OpOperand &init : g.getDpsInitsMutable()) {
      inits.push_back(init.get());
      maps.push_back(g.getMatchingIndexingMap(&init));
    }
  SmallVector<Type> types(a->getResultTypes());
  llvm::append_range(types, b->getResultTypes());
  OpBuilder builder(b);
  auto merged = linalg::GenericOp::create(builder, b.getLoc(), types, inputs, inits, maps, a.getIteratorTypesArray());
  Block* body = builder.createBlock(&merged.getRegion());
  for (Value v : inputs)
    body->addArgument(getElementTypeOrSelf(v.getType()), b.getLoc());
  for (Value v : inits)
    body->addArgument(getElementTypeOrSelf(v.getType()), b.getLoc());
  SmallVector<Value> yielded;
  unsigned initArg = inputs.size();
  for (auto [g, argIndex] : {std::pair{a, &aArgs}, std::pair{b, &bArgs}}) {
    Block& old = g.getRegion().front();
    for (unsigned i = 0; i < argIndex->size(); ++i)
      map.map(old.getArgument(i), body->getArgument((*argIndex)[i]));
    for (unsigned i = argIndex->size(); i < old.getNumArguments(); ++i)
      map.map(old.getArgument(i), body->getArgument(initArg++));
    for (Operation& op : old.without_terminator())
      builder.clone(op, map);
    for (Value v : old.getTerminator()->getOperands())
      yielded.push_back(map.lookupOrDefault(v));
  }
  linalg::YieldOp::create(builder, b.getLoc(), yielded);
  const unsigned aResults = a->getNumResults();
  a->replaceAllUsesWith(merged->getResults().take_front(aResults));
  b->replaceAllUsesWith(merged->getResults().drop_front(aResults));
  a->erase();
  b->erase();
}

/// Merges sibling reductions over outer loops that read a tensor the same
/// way into one generic, which reads it once: a batch norm's backward sums
/// dy and dy * x_hat over N, H and W, three passes over the same tensors.
void mergeSiblingReductions(ModuleOp module) {
  for (bool merged = true; merged;) {
    merged = false;
    SmallVector<linalg::GenericOp> reductions;
    module.walk([&](linalg::GenericOp g) {
      if (g.getNumReductionLoops() > 0 && !mlir::kiln::isRuntimeCallGeneric(g))
        reductions.push_back(g);
    });
    for (size_t i = 0; i < reductions.size() && !merged; ++i)
      for (size_t j = i + 1; j < reductions.size() && !merged; ++j)
        if (siblingReductions(reductions[i], reductions[j])) {
          mergeReductions(reductions[i], reductions[j]);
          merged = true;
        }
  }
}

/// Rounds of copying and fusing: a fused producer may become recomputable.
constexpr int kRecomputeRounds = 3;

} // namespace

LogicalResult fuseElementwiseOps(ModuleOp module) {
  MLIRContext *context = module.getContext();
  RewritePatternSet patterns(context);
  linalg::populateElementwiseOpsFusionPatterns(patterns, computesEachElementOnce);
  linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, foldableReshape);
  tensor::populateBubbleUpExpandShapePatterns(patterns);
  affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
  linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
  context->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
  linalg::populateConstantFoldLinalgOperations(patterns, fusibleProducer);
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true);  // upstream's choice, for compile time
  FrozenRewritePatternSet frozen(std::move(patterns));
  // Not converging within the rewrite limit leaves valid, less fused IR.
  (void)applyPatternsGreedily(module, frozen, config);
  // Each later round starts from the consumers that got a copy, not from the
  // whole module again (the first pass left the rest as it will stay);
  // whatever their fusion changes is visited in turn (AnyOp).
  GreedyRewriteConfig roundConfig = config;
  roundConfig.setStrictness(GreedyRewriteStrictness::AnyOp);
  for (int round = 0; round < kRecomputeRounds; ++round) {
    SmallVector<Operation *> consumers = copyRecomputableProducers(module);
    if (consumers.empty())
      break;
    (void)applyOpPatternsGreedily(consumers, frozen, roundConfig);
  }
  mergeSiblingReductions(module);
  return success();
}

} // namespace kiln::jit::cpu
