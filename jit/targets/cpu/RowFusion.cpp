//===- RowFusion.cpp - One parallel loop over rows for row-wise nests -*- C++ -*-===//

#include "jit/targets/cpu/RowFusion.h"

#include <optional>
#include <tuple>

#include "jit/targets/cpu/MemoryExtent.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

struct Access {
  Value memref;
  ValueRange indices;
  bool write;
};

/// The loads and stores in `loop`; false when it holds any other op with
/// memory effects (a runtime call, a copy).
bool collectAccesses(scf::ParallelOp loop, SmallVector<Access> &out) {
  bool ok = true;
  loop.getBody()->walk([&](Operation *op) {
    if (auto load = dyn_cast<memref::LoadOp>(op))
      out.push_back({load.getMemRef(), load.getIndices(), false});
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      out.push_back({store.getMemRef(), store.getIndices(), true});
    else if (op->getNumRegions() == 0 && !isMemoryEffectFree(op))
      ok = false;
  });
  return ok;
}

/// Row `iv` of a view: the access's first index is the loop's variable.
bool touchesOnlyItsRow(const Access &a, Value iv) { return !a.indices.empty() && a.indices[0] == iv; }

class RowFuser {
 public:
  RowFuser(func::FuncOp kernel, const std::set<unsigned> &sharedArgs) : kernel_(kernel), shared_(sharedArgs) {}

  /// Two accesses that may overlap; donated argument pairs share a buffer.
  bool mayOverlap(Value a, Value b) {
    Extent ea = extentOf(a), eb = extentOf(b);
    if (isSharedArg(ea.base) && isSharedArg(eb.base))
      return true;
    return !disjoint(ea, eb);
  }

  bool fusible(scf::ParallelOp first, scf::ParallelOp second) {
    SmallVector<Access> a, b;
    if (!collectAccesses(first, a) || !collectAccesses(second, b))
      return false;
    Value ivA = first.getInductionVars()[0], ivB = second.getInductionVars()[0];
    for (const Access &x : a)
      for (const Access &y : b) {
        if ((!x.write && !y.write) || !mayOverlap(x.memref, y.memref))
          continue;
        auto lx = rowLayout(x.memref), ly = rowLayout(y.memref);
        if (!lx || !ly || *lx != *ly || std::get<3>(*lx) != tripCount(first) || !touchesOnlyItsRow(x, ivA) ||
            !touchesOnlyItsRow(y, ivB))
          return false;
      }
    return true;
  }

  static std::optional<int64_t> tripCount(scf::ParallelOp p) {
    auto lb = getConstantIntValue(p.getLowerBound()[0]), ub = getConstantIntValue(p.getUpperBound()[0]),
         st = getConstantIntValue(p.getStep()[0]);
    if (!lb || !ub || !st || *lb != 0 || *st != 1)
      return std::nullopt;
    return *ub;
  }

 private:
  bool isSharedArg(Value base) {
    auto arg = dyn_cast<BlockArgument>(base);
    return arg && arg.getOwner()->getParentOp() == kernel_.getOperation() && shared_.count(arg.getArgNumber());
  }

  func::FuncOp kernel_;
  const std::set<unsigned> &shared_;
};

/// Loops fusion may consider: top level, one dimension from 0 by 1 to a constant.
bool candidate(Operation &op) {
  auto p = dyn_cast<scf::ParallelOp>(op);
  return p && p.getNumLoops() == 1 && p.getNumResults() == 0 && RowFuser::tripCount(p);
}

} // namespace

int fuseRowLoops(func::FuncOp kernel, const std::set<unsigned> &sharedArgs) {
  if (!kernel.getBody().hasOneBlock())
    return 0;
  Block &block = kernel.getBody().front();
  RowFuser fuser(kernel, sharedArgs);
  int merged = 0;
  for (auto it = block.begin(); it != block.end(); ++it) {
    if (!candidate(*it))
      continue;
    auto first = cast<scf::ParallelOp>(*it);
    for (;;) {
      // The next loop, past ops without memory effects (views, constants).
      SmallVector<Operation *> between;
      Operation *next = first->getNextNode();
      while (next && next->getNumRegions() == 0 && isMemoryEffectFree(next) && !next->hasTrait<OpTrait::IsTerminator>()) {
        between.push_back(next);
        next = next->getNextNode();
      }
      if (!next || !candidate(*next))
        break;
      auto second = cast<scf::ParallelOp>(next);
      if (RowFuser::tripCount(first) != RowFuser::tripCount(second) || !fuser.fusible(first, second))
        break;
      for (Operation *op : between)
        op->moveBefore(first);
      // The second body runs after the first one, in the same iteration.
      IRMapping map;
      map.map(second.getInductionVars()[0], first.getInductionVars()[0]);
      OpBuilder b(first.getBody()->getTerminator());
      for (Operation &op : second.getBody()->without_terminator())
        b.clone(op, map);
      second.erase();
      ++merged;
    }
    it = Block::iterator(first.getOperation());
  }
  return merged;
}

} // namespace kiln::jit::cpu
