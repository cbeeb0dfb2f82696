//===- RowScratch.cpp - Row temporaries on the stack, not in scratch -*- C++ -*-===//

#include "jit/targets/cpu/RowScratch.h"

#include <map>
#include <set>

#include "jit/targets/cpu/MemoryExtent.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// Row buffers are aligned for the widest vector loads.
constexpr int64_t kRowBufferAlignment = 64;

/// A top-level loop over rows: one dimension, from 0 by 1 to a constant.
std::optional<int64_t> rowCount(scf::ParallelOp p) {
  if (p.getNumLoops() != 1 || p.getNumResults() != 0)
    return std::nullopt;
  auto lb = getConstantIntValue(p.getLowerBound()[0]), ub = getConstantIntValue(p.getUpperBound()[0]),
       st = getConstantIntValue(p.getStep()[0]);
  if (!lb || !ub || !st || *lb != 0 || *st != 1 || *ub <= 0)
    return std::nullopt;
  return *ub;
}

/// One use of the scratch buffer by an op that is not a view of it.
struct ScratchUse {
  Operation *op;
  Value memref;
  Extent extent;
};

/// The memref a load or store accesses, its indices; null for other ops.
std::pair<Value, ValueRange> accessOf(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return {load.getMemRef(), load.getIndices()};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return {store.getMemRef(), store.getIndices()};
  return {Value(), ValueRange()};
}

bool isView(Operation *op) { return isa<ViewLikeOpInterface>(op) && op->getNumResults() == 1; }

/// The scf.parallel at the top level of `kernel` that holds `op`; null when none does.
scf::ParallelOp topLevelLoopOf(Operation *op, func::FuncOp kernel) {
  auto loop = op->getParentOfType<scf::ParallelOp>();
  while (loop && loop->getParentOp() != kernel.getOperation())
    loop = loop->getParentOfType<scf::ParallelOp>();
  return loop;
}

/// Erases the view ops of `kernel` nobody uses any more.
void eraseDeadViews(func::FuncOp kernel) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> dead;
    kernel.walk([&](Operation *op) {
      if (isView(op) && op->use_empty() && isMemoryEffectFree(op))
        dead.push_back(op);
    });
    for (Operation *op : dead)
      op->erase();
    changed = !dead.empty();
  }
}

} // namespace

int localizeRowScratch(func::FuncOp kernel, unsigned scratchArg, int64_t maxBytes) {
  if (kernel.getBody().empty() || !kernel.getBody().hasOneBlock() || scratchArg >= kernel.getNumArguments())
    return 0;
  Value scratch = kernel.getArgument(scratchArg);
  if (!isa<MemRefType>(scratch.getType()))
    return 0;

  // Every op that touches scratch bytes through a memref operand.
  SmallVector<ScratchUse> uses;
  kernel.walk([&](Operation *op) {
    if (isView(op))
      return;
    for (Value v : op->getOperands()) {
      if (!isa<MemRefType>(v.getType()))
        continue;
      Extent e = extentOf(v);
      if (e.base == scratch)
        uses.push_back({op, v, e});
    }
  });

  /// A temporary of one loop: its bytes and the loop.
  struct Candidate {
    int64_t begin, end, rows;
    scf::ParallelOp loop;
  };
  std::map<std::pair<int64_t, int64_t>, Candidate> candidates;
  std::set<std::pair<int64_t, int64_t>> rejected;
  for (const ScratchUse &u : uses) {
    auto [memref, indices] = accessOf(u.op);
    scf::ParallelOp loop = topLevelLoopOf(u.op, kernel);
    std::optional<RowLayout> layout = memref ? rowLayout(memref) : std::nullopt;
    std::optional<int64_t> rows = loop ? rowCount(loop) : std::nullopt;
    const std::pair<int64_t, int64_t> key{u.extent.begin, u.extent.end};
    if (!layout || !rows || std::get<3>(*layout) != *rows || indices.empty() ||
        indices[0] != loop.getInductionVars()[0] || std::get<1>(*layout) != u.extent.begin ||
        std::get<1>(*layout) + std::get<2>(*layout) != u.extent.end || std::get<2>(*layout) % *rows != 0) {
      rejected.insert(key);
      continue;
    }
    auto [it, inserted] = candidates.try_emplace(key, Candidate{u.extent.begin, u.extent.end, *rows, loop});
    if (!inserted && it->second.loop != loop)
      rejected.insert(key);
  }
  // Temporaries that share a byte with a rejected use stay in scratch.
  auto overlapsRejected = [&](const Candidate &c) {
    for (const ScratchUse &u : uses) {
      const std::pair<int64_t, int64_t> key{u.extent.begin, u.extent.end};
      if (rejected.count(key) && u.extent.begin < c.end && c.begin < u.extent.end)
        return true;
    }
    return false;
  };

  // Smallest rows first: a loop's accumulators (a row max, a row sum) then
  // always fit, and LLVM keeps them in registers.
  SmallVector<Candidate> ordered;
  for (auto &[key, c] : candidates)
    if (!rejected.count(key) && !overlapsRejected(c))
      ordered.push_back(c);
  llvm::stable_sort(ordered, [](const Candidate &a, const Candidate &b) {
    return (a.end - a.begin) / a.rows < (b.end - b.begin) / b.rows;
  });

  int moved = 0;
  int64_t total = 0;
  std::map<Operation *, int64_t> bytesOfLoop;
  for (Candidate &c : ordered) {
    const int64_t rowBytes = (c.end - c.begin) / c.rows;
    int64_t &used = bytesOfLoop[c.loop.getOperation()];
    const int64_t padded = (rowBytes + kRowBufferAlignment - 1) / kRowBufferAlignment * kRowBufferAlignment;
    // Loops that stay in the kernel (too small to dispatch) all keep their
    // buffers in the kernel's frame, on the caller's stack: bound the sum.
    if (used + padded > maxBytes || total + padded > kMaxRowBufferBytesPerKernel)
      continue;
    used += padded;
    total += padded;

    Block *body = c.loop.getBody();
    OpBuilder b = OpBuilder::atBlockBegin(body);
    Location loc = c.loop.getLoc();
    auto bufferType = MemRefType::get({rowBytes}, b.getI8Type());
    Value buffer = memref::AllocaOp::create(b, loc, bufferType, b.getI64IntegerAttr(kRowBufferAlignment));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    // One view of the row buffer per view of the temporary: its first
    // dimension (the rows) becomes 1.
    DenseMap<Value, Value> rowViews;
    for (const ScratchUse &u : uses) {
      if (u.extent.begin != c.begin || u.extent.end != c.end)
        continue;
      auto [memref, indices] = accessOf(u.op);
      Value &view = rowViews[memref];
      if (!view) {
        auto type = cast<MemRefType>(memref.getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[0] = 1;
        view = memref::ViewOp::create(b, loc, MemRefType::get(shape, type.getElementType()), buffer, zero, ValueRange{});
      }
      // The memref is operand 0 of a load and operand 1 of a store; the
      // first index follows it.
      const unsigned memrefOperand = isa<memref::LoadOp>(u.op) ? 0 : 1;
      u.op->setOperand(memrefOperand, view);
      u.op->setOperand(memrefOperand + 1, zero);
    }
    ++moved;
  }
  if (moved)
    eraseDeadViews(kernel);
  return moved;
}

int64_t scratchBytesInUse(func::FuncOp kernel, unsigned scratchArg) {
  if (kernel.getBody().empty() || scratchArg >= kernel.getNumArguments())
    return -1;
  Value scratch = kernel.getArgument(scratchArg);
  int64_t end = 0;
  for (Operation *user : scratch.getUsers()) {
    auto view = dyn_cast<memref::ViewOp>(user);
    if (!view || view.getSource() != scratch)
      return -1;
    Extent e = extentOf(view.getResult());
    if (e.end == INT64_MAX)
      return -1;
    end = std::max(end, e.end);
  }
  return end;
}

namespace {

/// Whether every index but the last is the constant 0.
bool leadingZeros(ValueRange indices) {
  if (indices.empty())
    return false;
  for (Value i : indices.drop_back()) {
    std::optional<int64_t> c = getConstantIntValue(i);
    if (!c || *c != 0)
      return false;
  }
  return true;
}

/// The elements of one row `[1, ..., 1, n]` of a static identity-layout
/// memref type; nullopt for other shapes.
std::optional<int64_t> rowLength(MemRefType type) {
  if (type.getRank() == 0 || !type.hasStaticShape() || !type.getLayout().isIdentity())
    return std::nullopt;
  for (int64_t d : type.getShape().drop_back())
    if (d != 1)
      return std::nullopt;
  return type.getShape().back();
}

/// Moves row buffer `buffer` into the output row its last reader stores,
/// when that is safe (see rowBuffersIntoOutputs).
bool bufferIntoOutput(func::FuncOp kernel, memref::AllocaOp buffer, const std::set<unsigned> &sharedArgs) {
  MemRefType bufferType = buffer.getType();
  if (buffer->getNumOperands() != 0 || bufferType.getRank() != 1 || !bufferType.hasStaticShape() ||
      !bufferType.getElementType().isInteger(8))
    return false;
  // The buffer's views: one row each, of one element type.
  SmallPtrSet<Value, 4> views;
  Type element;
  int64_t length = 0;
  for (Operation *user : buffer->getUsers()) {
    auto view = dyn_cast<memref::ViewOp>(user);
    std::optional<int64_t> shift = view ? getConstantIntValue(view.getByteShift()) : std::nullopt;
    const int64_t n = view ? rowLength(view.getType()).value_or(-1) : -1;
    if (!shift || *shift != 0 || n < 0 || !view.getType().getElementType().isIntOrFloat() ||
        (element && (view.getType().getElementType() != element || n != length)))
      return false;
    element = view.getType().getElementType();
    length = n;
    views.insert(view.getResult());
  }
  if (!element || element.getIntOrFloatBitWidth() % 8 != 0 ||
      length * (element.getIntOrFloatBitWidth() / 8) != bufferType.getNumElements())
    return false;
  // Its loads and stores, all in one top-level row loop, at an element of the row.
  SmallVector<Operation *> bufferAccesses;
  scf::ParallelOp loop;
  for (Value view : views)
    for (Operation *user : view.getUsers()) {
      auto [memref, indices] = accessOf(user);
      if (memref != view || !leadingZeros(indices))
        return false;
      scf::ParallelOp top = topLevelLoopOf(user, kernel);
      if (!top || !rowCount(top) || (loop && top != loop))
        return false;
      loop = top;
      bufferAccesses.push_back(user);
    }
  if (!loop)
    return false;
  Block *body = loop.getBody();
  Value row = loop.getInductionVars()[0];
  // The last reader: the inner loop, at the top of the row body, holding the
  // access that comes last.
  Operation *lastTop = nullptr;
  Operation *lastAccess = nullptr;
  for (Operation *access : bufferAccesses) {
    Operation *top = body->findAncestorOpInBlock(*access);
    if (!top)
      return false;
    if (!lastTop || lastTop->isBeforeInBlock(top))
      lastTop = top;
  }
  auto reader = dyn_cast<scf::ForOp>(lastTop);
  if (!reader)
    return false;
  std::optional<int64_t> lb = getConstantIntValue(reader.getLowerBound()),
                         ub = getConstantIntValue(reader.getUpperBound()), st = getConstantIntValue(reader.getStep());
  if (!lb || !ub || !st || *lb != 0 || *ub != length || *st != 1)
    return false;
  Value j = reader.getInductionVar();
  for (Operation *access : bufferAccesses) {
    if (body->findAncestorOpInBlock(*access) != lastTop)
      continue;
    if (lastAccess || !isa<memref::LoadOp>(access) || access->getBlock() != reader.getBody() ||
        accessOf(access).second.back() != j)
      return false;
    lastAccess = access;
  }
  // Every other access of the row loop; the output store among them.
  SmallVector<std::pair<Operation *, Value>> others;
  bool known = true;
  body->walk([&](Operation *op) {
    auto [memref, indices] = accessOf(op);
    if (memref) {
      if (!views.contains(memref))
        others.push_back({op, memref});
    } else if (op->getNumRegions() == 0 && !isMemoryEffectFree(op) && !isa<memref::AllocaOp>(op)) {
      known = false;
    }
  });
  if (!known)
    return false;
  memref::StoreOp output;
  for (Operation &op : *reader.getBody()) {
    auto store = dyn_cast<memref::StoreOp>(op);
    if (!store || !lastAccess->isBeforeInBlock(store))
      continue;
    auto type = cast<MemRefType>(store.getMemRef().getType());
    ValueRange indices = store.getIndices();
    if (type.getRank() < 2 || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
        type.getElementType() != element || type.getShape().back() != length || indices.front() != row ||
        indices.back() != j || !leadingZeros(indices.drop_front()) ||
        llvm::any_of(type.getShape().drop_front().drop_back(), [](int64_t d) { return d != 1; }))
      continue;
    if (output)
      return false;
    output = store;
  }
  // Defined before the row loop, so that every access can use it.
  if (!output || !output.getMemRef().getParentRegion()->isProperAncestor(&loop.getRegion()))
    return false;
  // A streaming store (StreamingStores.h) writes the row out of the
  // buffer, which stays in L1, without reading the output's lines first.
  if (output.getNontemporal())
    return false;
  for (auto [op, memref] : others)
    if (op != output.getOperation() && mayOverlap(output.getMemRef(), memref, kernel, sharedArgs))
      return false;
  // Each access of the buffer becomes one of row `row` of the output.
  Value target = output.getMemRef();
  const int64_t rank = cast<MemRefType>(target.getType()).getRank();
  OpBuilder b = OpBuilder::atBlockBegin(body);
  Value zero = rank > 2 ? arith::ConstantIndexOp::create(b, loop.getLoc(), 0) : Value();
  for (Operation *access : bufferAccesses) {
    SmallVector<Value> indices(rank, zero);
    indices.front() = row;
    indices.back() = accessOf(access).second.back();
    b.setInsertionPoint(access);
    if (auto load = dyn_cast<memref::LoadOp>(access)) {
      Value v = memref::LoadOp::create(b, load.getLoc(), target, indices);
      load.getResult().replaceAllUsesWith(v);
    } else {
      auto store = cast<memref::StoreOp>(access);
      memref::StoreOp::create(b, store.getLoc(), store.getValueToStore(), target, indices);
    }
    access->erase();
  }
  return true;
}

} // namespace

int rowBuffersIntoOutputs(func::FuncOp kernel, const std::set<unsigned> &sharedArgs) {
  if (kernel.getBody().empty() || !kernel.getBody().hasOneBlock())
    return 0;
  SmallVector<memref::AllocaOp> buffers;
  kernel.walk([&](memref::AllocaOp a) { buffers.push_back(a); });
  int moved = 0;
  for (memref::AllocaOp buffer : buffers)
    if (bufferIntoOutput(kernel, buffer, sharedArgs))
      ++moved;
  if (moved) {
    eraseDeadViews(kernel);
    for (memref::AllocaOp buffer : buffers)
      if (buffer->use_empty())
        buffer->erase();
  }
  return moved;
}

void hoistRowBuffers(func::FuncOp fn) {
  if (fn.getBody().empty())
    return;
  Block &entry = fn.getBody().front();
  SmallVector<memref::AllocaOp> allocas;
  for (Operation &op : entry)
    if (auto p = dyn_cast<scf::ParallelOp>(op))
      for (Operation &inner : *p.getBody())
        if (auto alloca = dyn_cast<memref::AllocaOp>(inner); alloca && alloca->getNumOperands() == 0)
          allocas.push_back(alloca);
  for (memref::AllocaOp alloca : allocas)
    alloca->moveBefore(&entry, entry.begin());
}

} // namespace kiln::jit::cpu
