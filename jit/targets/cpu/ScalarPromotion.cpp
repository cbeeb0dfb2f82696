//===- ScalarPromotion.cpp - Reduction accumulators in registers -*- C++ -*-===//

#include "jit/targets/cpu/ScalarPromotion.h"
#include "jit/targets/cpu/MemoryExtent.h"

#include <climits>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// The loads and stores of an innermost loop with a straight-line body;
/// none when the body holds a nested region or any other op with memory
/// effects (then nothing in it can be reasoned about).
struct BodyAccesses {
  SmallVector<memref::LoadOp> loads;
  SmallVector<memref::StoreOp> stores;
};

std::optional<BodyAccesses> straightLineAccesses(scf::ForOp loop) {
  BodyAccesses accesses;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions() > 0)
      return std::nullopt;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      accesses.loads.push_back(load);
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      accesses.stores.push_back(store);
    else if (!isMemoryEffectFree(&op))
      return std::nullopt;
  }
  return accesses;
}

/// The same element in every iteration: memref and indices from outside.
bool invariantElement(scf::ForOp loop, Value memref, ValueRange indices) {
  return loop.isDefinedOutsideOfLoop(memref) &&
         llvm::all_of(indices, [&](Value v) { return loop.isDefinedOutsideOfLoop(v); });
}

/// The load and store of one accumulator in `loop`'s body, if it has one
/// that can be promoted.
std::optional<std::pair<memref::LoadOp, memref::StoreOp>> findAccumulator(scf::ForOp loop) {
  std::optional<BodyAccesses> body = straightLineAccesses(loop);
  if (!body)
    return std::nullopt;
  for (memref::StoreOp store : body->stores) {
    if (!invariantElement(loop, store.getMemRef(), store.getIndices()))
      continue;
    memref::LoadOp match;
    bool clash = false;
    const Extent acc = extentOf(store.getMemRef());
    for (memref::LoadOp load : body->loads) {
      if (load.getMemRef() == store.getMemRef() && load.getIndices() == store.getIndices() &&
          load->isBeforeInBlock(store) && !match) {
        match = load;
        continue;
      }
      clash |= !disjoint(acc, extentOf(load.getMemRef()));
    }
    for (memref::StoreOp other : body->stores)
      if (other != store)
        clash |= !disjoint(acc, extentOf(other.getMemRef()));
    if (match && !clash)
      return std::make_pair(match, store);
  }
  return std::nullopt;
}

/// `scf.parallel (i, j, ...)` -> `scf.parallel (i) { scf.for j { ... } }`.
void splitParallelLoop(scf::ParallelOp p) {
  OpBuilder b(p);
  Location loc = p.getLoc();
  auto outer = scf::ParallelOp::create(b, loc, ValueRange{p.getLowerBound()[0]}, ValueRange{p.getUpperBound()[0]},
                                       ValueRange{p.getStep()[0]});
  IRMapping map;
  map.map(p.getInductionVars()[0], outer.getInductionVars()[0]);
  b.setInsertionPointToStart(outer.getBody());
  for (unsigned d = 1; d < p.getNumLoops(); ++d) {
    auto inner = scf::ForOp::create(b, loc, p.getLowerBound()[d], p.getUpperBound()[d], p.getStep()[d]);
    map.map(p.getInductionVars()[d], inner.getInductionVar());
    b.setInsertionPointToStart(inner.getBody());
  }
  for (Operation &op : p.getBody()->without_terminator())
    b.clone(op, map);
  p.erase();
}

/// `acc + ext(x)` with a wider accumulator: reassociating it loses nothing
/// the narrower result keeps, and lets LLVM vectorise the reduction.
void allowReassociation(Value stored) {
  auto add = stored.getDefiningOp<arith::AddFOp>();
  if (!add)
    return;
  auto widened = [](Value v) { return v.getDefiningOp<arith::ExtFOp>() != nullptr; };
  if (widened(add.getLhs()) || widened(add.getRhs()))
    add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
}

} // namespace

int promoteReductionAccumulators(ModuleOp module) {
  SmallVector<scf::ForOp> loops;
  module.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  IRRewriter rewriter(module.getContext());
  int promoted = 0;
  for (scf::ForOp loop : loops) {
    while (auto acc = findAccumulator(loop)) {
      auto [load, store] = *acc;
      rewriter.setInsertionPoint(loop);
      Value init = memref::LoadOp::create(rewriter, load.getLoc(), load.getMemRef(), load.getIndices());
      Value stored = store.getValueToStore();
      auto replaced = loop.replaceWithAdditionalYields(
          rewriter, init, /*replaceInitOperandUsesInLoop=*/false,
          [&](OpBuilder &, Location, ArrayRef<BlockArgument> carried) {
            rewriter.replaceAllUsesWith(load.getResult(), carried.front());
            return SmallVector<Value>{stored};
          });
      if (failed(replaced))
        break;
      loop = cast<scf::ForOp>(replaced->getOperation());
      rewriter.eraseOp(load);
      rewriter.setInsertionPointAfter(loop);
      memref::StoreOp::create(rewriter, store.getLoc(), loop.getResults().back(), store.getMemRef(),
                              store.getIndices());
      rewriter.eraseOp(store);
      allowReassociation(stored);
      ++promoted;
    }
  }
  return promoted;
}

int hoistInvariantLoads(ModuleOp module) {
  SmallVector<scf::ParallelOp> parallels;
  module.walk([&](scf::ParallelOp p) {
    if (p.getNumLoops() > 1 && p.getNumResults() == 0 && !p->getParentOfType<scf::ParallelOp>() &&
        !p->getParentOfType<scf::ForOp>())
      parallels.push_back(p);
  });
  for (scf::ParallelOp p : parallels)
    splitParallelLoop(p);
  int hoisted = 0;
  module.walk([&](scf::ForOp loop) {
    std::optional<BodyAccesses> body = straightLineAccesses(loop);
    if (!body)
      return;
    for (memref::LoadOp load : body->loads) {
      if (!invariantElement(loop, load.getMemRef(), load.getIndices()))
        continue;
      // Nothing in the loop may store where it reads.
      const Extent read = extentOf(load.getMemRef());
      if (llvm::all_of(body->stores, [&](memref::StoreOp store) { return disjoint(read, extentOf(store.getMemRef())); })) {
        load->moveBefore(loop);
        ++hoisted;
      }
    }
  });
  return hoisted;
}

} // namespace kiln::jit::cpu
