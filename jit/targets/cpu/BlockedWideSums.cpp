//===- BlockedWideSums.cpp - f32 sums in f64, widened once per block -*- C++ -*-===//

#include "jit/targets/cpu/BlockedWideSums.h"

#include <algorithm>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// A carried f64 sum of widened f32 terms: its position among the loop's
/// carried values, the add and the widening.
struct WideSum {
  unsigned position;
  arith::AddFOp add;
  arith::ExtFOp widen;
};

bool innermost(scf::ForOp loop) {
  bool nested = false;
  loop.getBody()->walk([&](Operation *op) {
    if (isa<LoopLikeOpInterface>(op))
      nested = true;
  });
  return !nested;
}

std::optional<WideSum> wideSumAt(scf::ForOp loop, unsigned position) {
  BlockArgument acc = loop.getRegionIterArgs()[position];
  if (!acc.getType().isF64() || !acc.hasOneUse())
    return std::nullopt;
  auto add = dyn_cast<arith::AddFOp>(*acc.getUsers().begin());
  if (!add || !arith::bitEnumContainsAll(add.getFastmath(), arith::FastMathFlags::reassoc) || !add->hasOneUse() ||
      loop.getBody()->getTerminator()->getOperand(position) != add.getResult() || add->getBlock() != loop.getBody())
    return std::nullopt;
  Value term = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  auto widen = term.getDefiningOp<arith::ExtFOp>();
  if (!widen || !widen.getIn().getType().isF32() || term == acc)
    return std::nullopt;
  return WideSum{position, add, widen};
}

/// The block size for `n` iterations (BlockedWideSums.h), 0 for none.
int64_t blockSizeFor(int64_t n, int64_t maxBlock, int64_t minBlock) {
  for (int64_t size = maxBlock; size >= minBlock; size /= 2)
    if (n >= 2 * size && (n % size < minBlock || size == minBlock))
      return size;
  return 0;
}

bool block(scf::ForOp loop, int64_t maxBlock, int64_t minBlock) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()),
                         ub = getConstantIntValue(loop.getUpperBound()), step = getConstantIntValue(loop.getStep());
  if (!lb || !ub || !step || *step != 1 || !innermost(loop))
    return false;
  const int64_t blockSize = blockSizeFor(*ub - *lb, maxBlock, minBlock);
  if (blockSize == 0)
    return false;
  SmallVector<WideSum> sums;
  for (unsigned i = 0; i < loop.getNumRegionIterArgs(); ++i)
    if (std::optional<WideSum> s = wideSumAt(loop, i))
      sums.push_back(*s);
  if (sums.empty())
    return false;
  llvm::DenseMap<unsigned, WideSum *> sumAt;
  llvm::SmallPtrSet<Operation *, 8> replaced;
  for (WideSum &s : sums) {
    sumAt[s.position] = &s;
    replaced.insert(s.add);
    if (s.widen->hasOneUse())
      replaced.insert(s.widen);
  }

  Location loc = loop.getLoc();
  OpBuilder b(loop);
  Type indexType = b.getIndexType();
  auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  const int64_t blocksEnd = *lb + (*ub - *lb) / blockSize * blockSize;
  // -0, the identity of addition: a block of -0 terms sums to -0, as in f64.
  Value f32Zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(-0.0f));
  const auto reassoc = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::reassoc);
  Value zero = index(0), one = index(1), blockLength = index(blockSize), end = index(blocksEnd);
  auto outer = scf::ForOp::create(
      b, loc, index(*lb), end, blockLength, loop.getInitArgs(),
      [&](OpBuilder &ob, Location l, Value blockStart, ValueRange outerArgs) {
        SmallVector<Value> innerInits(outerArgs.begin(), outerArgs.end());
        for (const WideSum &s : sums)
          innerInits[s.position] = f32Zero;
        auto inner = scf::ForOp::create(
            ob, l, zero, blockLength, one, innerInits,
            [&](OpBuilder &ib, Location il, Value k, ValueRange innerArgs) {
              IRMapping map;
              map.map(loop.getInductionVar(), arith::AddIOp::create(ib, il, indexType, blockStart, k).getResult());
              for (unsigned i = 0; i < innerArgs.size(); ++i)
                if (!sumAt.count(i))
                  map.map(loop.getRegionIterArgs()[i], innerArgs[i]);
              for (Operation &op : loop.getBody()->without_terminator())
                if (!replaced.contains(&op))
                  ib.clone(op, map);
              SmallVector<Value> yielded;
              for (auto [i, v] : llvm::enumerate(loop.getBody()->getTerminator()->getOperands())) {
                auto it = sumAt.find(i);
                yielded.push_back(it == sumAt.end() ? map.lookupOrDefault(v)
                                                    : arith::AddFOp::create(ib, il, innerArgs[i],
                                                                            map.lookupOrDefault(it->second->widen.getIn()),
                                                                            reassoc)
                                                          .getResult());
              }
              scf::YieldOp::create(ib, il, yielded);
            });
        SmallVector<Value> results(inner.getResults().begin(), inner.getResults().end());
        for (const WideSum &s : sums) {
          Value wide = arith::ExtFOp::create(ob, l, ob.getF64Type(), results[s.position]);
          results[s.position] = arith::AddFOp::create(ob, l, outerArgs[s.position], wide, reassoc);
        }
        scf::YieldOp::create(ob, l, results);
      });
  ValueRange results = outer.getResults();
  if (blocksEnd < *ub) {
    // The last iterations, as before, from where the blocks end.
    auto rest = cast<scf::ForOp>(b.clone(*loop.getOperation()));
    rest.getLowerBoundMutable().assign(end);
    rest.getInitArgsMutable().assign(outer.getResults());
    results = rest.getResults();
  }
  loop.replaceAllUsesWith(results);
  loop.erase();
  return true;
}

} // namespace

int blockWideSums(func::FuncOp fn, int64_t maxBlock, int64_t minBlock) {
  minBlock = std::min(minBlock, maxBlock);
  if (minBlock < 2)
    return 0;
  SmallVector<scf::ForOp> loops;
  fn.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  int blocked = 0;
  for (scf::ForOp loop : loops)
    if (block(loop, maxBlock, minBlock))
      ++blocked;
  return blocked;
}

} // namespace kiln::jit::cpu
