//===- RowFusion.cpp - One parallel loop over rows for row-wise nests -*- C++ -*-===//

#include "jit/targets/cpu/RowFusion.h"

#include <optional>
#include <tuple>
#include <utility>

#include "jit/targets/cpu/ElementAccess.h"
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

  bool fusible(scf::ParallelOp first, scf::ParallelOp second) {
    SmallVector<Access> a, b;
    if (!collectAccesses(first, a) || !collectAccesses(second, b))
      return false;
    Value ivA = first.getInductionVars()[0], ivB = second.getInductionVars()[0];
    for (const Access &x : a)
      for (const Access &y : b) {
        if ((!x.write && !y.write) || !mayOverlap(x.memref, y.memref, kernel_, shared_))
          continue;
        auto lx = rowLayout(x.memref), ly = rowLayout(y.memref);
        if (!lx || !ly || !sameRows(*lx, *ly) || std::get<3>(*lx) != tripCount(first) ||
            !touchesOnlyItsRow(x, ivA) || !touchesOnlyItsRow(y, ivB))
          return false;
      }
    return true;
  }

  /// Whether two row layouts split the same bytes into the same rows:
  /// those of one base, or of two shared arguments, which are one buffer
  /// only as a whole (mayShareOneBuffer), at the same bytes.
  bool sameRows(const RowLayout &x, const RowLayout &y) const {
    if (std::get<0>(x) == std::get<0>(y))
      return x == y;
    return isSharedArg(std::get<0>(x), kernel_, shared_) && isSharedArg(std::get<0>(y), kernel_, shared_) &&
           std::get<1>(x) == std::get<1>(y) && std::get<2>(x) == std::get<2>(y) && std::get<3>(x) == std::get<3>(y);
  }

  /// Whether `op` (a load or store, or free of memory effects) can move
  /// before a loop whose accesses are `inLoop` (none when they could not be
  /// collected): none of its accesses may touch what the loop writes, nor
  /// write what it reads.
  bool canMoveBefore(Operation *op, const std::optional<SmallVector<Access>> &inLoop) {
    std::optional<Access> access;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      access = Access{load.getMemRef(), load.getIndices(), false};
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      access = Access{store.getMemRef(), store.getIndices(), true};
    else
      return op->getNumRegions() == 0 && isMemoryEffectFree(op);
    if (!inLoop)
      return false;
    for (const Access &x : *inLoop)
      if ((x.write || access->write) && mayOverlap(x.memref, access->memref, kernel_, shared_))
        return false;
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
  func::FuncOp kernel_;
  const std::set<unsigned> &shared_;
};

/// Loops fusion may consider: top level, one dimension from 0 by 1 to a constant.
bool candidate(Operation &op) {
  auto p = dyn_cast<scf::ParallelOp>(op);
  return p && p.getNumLoops() == 1 && p.getNumResults() == 0 && RowFuser::tripCount(p);
}

/// Iteration j of `a` and iteration j of `b` touch the same element, and
/// different iterations touch different ones: the same memref (or two
/// shared arguments of one type, which are one buffer when they alias at
/// all), each index either the loops' variable in both or one value from
/// outside both.
bool sameElementAtSameIteration(const ElementAccess &x, scf::ForOp a, const ElementAccess &y, scf::ForOp b,
                                func::FuncOp kernel, const std::set<unsigned> &shared) {
  std::optional<CanonicalAccess> cx = canonical(x), cy = canonical(y);
  if (!cx || !cy)
    return false;
  const bool sameRoot = cx->root == cy->root || (isSharedArg(cx->root, kernel, shared) &&
                                                 isSharedArg(cy->root, kernel, shared) &&
                                                 mayShareOneBuffer(cx->root, cy->root));
  if (!sameRoot || cx->offset != cy->offset || cx->element != cy->element || cx->shape != cy->shape)
    return false;
  bool usesIv = false;
  for (auto [i, j] : llvm::zip(cx->indices, cy->indices)) {
    if (i == a.getInductionVar() && j == b.getInductionVar()) {
      usesIv = true;
      continue;
    }
    if (i != j || !a.isDefinedOutsideOfLoop(i) || !b.isDefinedOutsideOfLoop(j))
      return false;
  }
  return usesIv;
}

bool sameBounds(scf::ForOp a, scf::ForOp b) {
  auto c = [](Value v) { return getConstantIntValue(v); };
  auto st = c(a.getStep());
  return c(a.getLowerBound()) && c(a.getLowerBound()) == c(b.getLowerBound()) && c(a.getUpperBound()) &&
         c(a.getUpperBound()) == c(b.getUpperBound()) && st && *st > 0 && st == c(b.getStep());
}

/// Whether `b` can run in the iterations of `a` (after `a`'s body), the ops
/// `between` them moving before `a`. Accesses conflict as mayOverlap says:
/// donated pairs (`shared`) are one buffer (a reader of x[i, perm[j]] fused
/// with the writer of y[i, j] in x's buffer read overwritten elements).
bool fusibleInner(scf::ForOp a, scf::ForOp b, ArrayRef<Operation *> between, func::FuncOp kernel,
                  const std::set<unsigned> &shared) {
  auto conflict = [&](const ElementAccess &x, const ElementAccess &y) {
    return (x.write || y.write) && mayOverlap(x.memref, y.memref, kernel, shared);
  };
  if (!sameBounds(a, b))
    return false;
  SmallVector<ElementAccess> xa, xb;
  if (!elementAccesses(*a.getBody(), xa) || !elementAccesses(*b.getBody(), xb))
    return false;
  // Nothing after `a` may use its results (they are only final after its
  // last iteration), and the ops in between must not touch its memory.
  auto usesA = [&](Operation *op) {
    bool uses = false;
    op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        uses |= v.getDefiningOp() == a.getOperation();
    });
    return uses;
  };
  if (usesA(b))
    return false;
  for (Operation *op : between) {
    if (usesA(op))
      return false;
    SmallVector<ElementAccess> one;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      one.push_back({load.getMemRef(), SmallVector<Value>(load.getIndices()), false});
    else if (auto store = dyn_cast<memref::StoreOp>(op))
      one.push_back({store.getMemRef(), SmallVector<Value>(store.getIndices()), true});
    else if (!isMemoryEffectFree(op) || op->getNumRegions() > 0)
      return false;
    for (const ElementAccess &e : one)
      for (const ElementAccess &x : xa)
        if (conflict(e, x))
          return false;
  }
  for (const ElementAccess &x : xa)
    for (const ElementAccess &y : xb)
      if (conflict(x, y) && !sameElementAtSameIteration(x, a, y, b, kernel, shared))
        return false;
  return true;
}

/// One loop running `a`'s body, then `b`'s, per iteration.
scf::ForOp mergeInner(scf::ForOp a, scf::ForOp b) {
  OpBuilder builder(a);
  SmallVector<Value> inits(a.getInitArgs());
  llvm::append_range(inits, b.getInitArgs());
  const unsigned na = a.getNumResults();
  auto merged = scf::ForOp::create(
      builder, a.getLoc(), a.getLowerBound(), a.getUpperBound(), a.getStep(), inits,
      [&](OpBuilder &nb, Location loc, Value iv, ValueRange args) {
        IRMapping map;
        SmallVector<Value> yields;
        for (auto [loop, first] : {std::pair{a, 0u}, std::pair{b, na}}) {
          map.map(loop.getInductionVar(), iv);
          for (unsigned k = 0; k < loop.getNumRegionIterArgs(); ++k)
            map.map(loop.getRegionIterArgs()[k], args[first + k]);
          for (Operation &op : loop.getBody()->without_terminator())
            nb.clone(op, map);
          for (Value v : loop.getBody()->getTerminator()->getOperands())
            yields.push_back(map.lookupOrDefault(v));
        }
        scf::YieldOp::create(nb, loc, yields);
      });
  for (unsigned k = 0; k < na; ++k)
    a.getResult(k).replaceAllUsesWith(merged.getResult(k));
  for (unsigned k = 0; k < b.getNumResults(); ++k)
    b.getResult(k).replaceAllUsesWith(merged.getResult(na + k));
  b.erase();
  a.erase();
  return merged;
}

} // namespace

int fuseLoopsInRows(func::FuncOp kernel, const std::set<unsigned> &sharedArgs) {
  int merged = 0;
  SmallVector<scf::ParallelOp> rows;
  kernel.walk([&](scf::ParallelOp p) {
    if (p->getParentOp() == kernel.getOperation())
      rows.push_back(p);
  });
  for (scf::ParallelOp p : rows) {
    Block *body = p.getBody();
    for (auto it = body->begin(); it != body->end(); ++it) {
      auto first = dyn_cast<scf::ForOp>(*it);
      if (!first)
        continue;
      for (;;) {
        SmallVector<Operation *> between;
        Operation *next = first->getNextNode();
        while (next && !isa<scf::ForOp>(next) && !next->hasTrait<OpTrait::IsTerminator>()) {
          between.push_back(next);
          next = next->getNextNode();
        }
        auto second = dyn_cast_or_null<scf::ForOp>(next);
        if (!second || !fusibleInner(first, second, between, kernel, sharedArgs))
          break;
        for (Operation *op : between)
          op->moveBefore(first);
        first = mergeInner(first, second);
        ++merged;
      }
      it = Block::iterator(first.getOperation());
    }
  }
  return merged;
}

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
      // The next loop, past ops that can run before the first one: views,
      // constants, and loads and stores of other memory (an optimizer's
      // bias corrections between its moment and weight updates).
      SmallVector<Operation *> between;
      std::optional<SmallVector<Access>> firstAccesses(std::in_place);
      if (!collectAccesses(first, *firstAccesses))
        firstAccesses.reset();
      Operation *next = first->getNextNode();
      while (next && !next->hasTrait<OpTrait::IsTerminator>() && !candidate(*next) &&
             fuser.canMoveBefore(next, firstAccesses)) {
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
