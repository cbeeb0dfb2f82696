//===- SplitReduction.cpp - Full reductions as parallel partial sums -*- C++ -*-===//

#include "jit/targets/cpu/SplitReduction.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::jit::cpu {

using namespace mlir;

namespace {

/// Chunks a split reduction tries, most first; each chunk at least
/// kMinChunk elements (a few microseconds of one thread's work).
constexpr int64_t kChunks[] = {64, 32, 16, 8, 4};
constexpr int64_t kMinChunk = int64_t{1} << 12;

/// The iterations of a full reduction worth splitting (0 if it is not one).
int64_t splittableElements(linalg::GenericOp g) {
  if (!g.hasPureTensorSemantics() || g.getNumLoops() == 0 || g.getNumParallelLoops() != 0 ||
      g.getNumDpsInits() != 1 || g->getNumResults() != 1)
    return 0;
  for (OpOperand *in : g.getDpsInputOperands())
    if (!g.getMatchingIndexingMap(in).isIdentity())
      return 0;
  int64_t elements = 1;
  for (int64_t extent : g.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(extent))
      return 0;
    elements *= extent;
  }
  return elements >= kSplitReductionElements ? elements : 0;
}

} // namespace

int splitFullReductions(func::FuncOp fn) {
  SmallVector<std::pair<linalg::GenericOp, int64_t>> reductions;
  fn.walk([&](linalg::GenericOp g) {
    if (int64_t elements = splittableElements(g))
      reductions.emplace_back(g, elements);
  });
  IRRewriter rewriter(fn.getContext());
  int split = 0;
  for (auto [g, elements] : reductions) {
    int64_t chunks = 0;
    for (int64_t c : kChunks)
      if (elements % c == 0 && elements / c >= kMinChunk) {
        chunks = c;
        break;
      }
    if (chunks == 0)
      continue;
    auto op = cast<linalg::LinalgOp>(g.getOperation());
    if (op.getNumLoops() > 1) {
      ReassociationIndices all;
      for (int64_t d = 0; d < op.getNumLoops(); ++d)
        all.push_back(d);
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::CollapseResult> collapsed = linalg::collapseOpIterationDims(op, {all}, rewriter);
      if (failed(collapsed))
        continue;
      rewriter.replaceOp(op, collapsed->results);
      op = collapsed->collapsedOp;
    }
    auto control = [&](linalg::LinalgOp) {
      return linalg::SplitReductionOptions{chunks, /*index=*/0, /*innerParallel=*/false};
    };
    if (succeeded(linalg::splitReduction(rewriter, op, control)))
      ++split;
  }
  return split;
}

} // namespace kiln::jit::cpu
