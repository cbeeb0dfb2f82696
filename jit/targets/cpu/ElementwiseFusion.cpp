//===- ElementwiseFusion.cpp - Linalg fusion with Kiln's control -*- C++ -*-===//

#include "jit/targets/cpu/ElementwiseFusion.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// Named linalg ops keep their identity: the runtime's GEMM takes matmuls.
bool isNamedLinalgOp(Operation *op) { return op && isa<linalg::LinalgOp>(op) && !isa<linalg::GenericOp>(op); }

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

} // namespace

LogicalResult fuseElementwiseOps(ModuleOp module) {
  MLIRContext *context = module.getContext();
  RewritePatternSet patterns(context);
  linalg::populateElementwiseOpsFusionPatterns(patterns, computesEachElementOnce);
  linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, fusibleProducer);
  tensor::populateBubbleUpExpandShapePatterns(patterns);
  affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
  linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
  context->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
  linalg::populateConstantFoldLinalgOperations(patterns, fusibleProducer);
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true);  // upstream's choice, for compile time
  // Not converging within the rewrite limit leaves valid, less fused IR.
  (void)applyPatternsGreedily(module, std::move(patterns), config);
  return success();
}

} // namespace kiln::jit::cpu
