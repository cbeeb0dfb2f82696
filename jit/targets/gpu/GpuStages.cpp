//===- GpuStages.cpp - The GPU pipelines' front-half stages --------------===//

#include "jit/targets/gpu/GpuStages.h"
#include "jit/targets/cpu/MemoryExtent.h"

#include <functional>
#include <optional>

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace kiln::jit::gpu {


/// The value of an index or integer constant.
std::optional<int64_t> constantOf(mlir::Value v) {
  if (auto c = v.getDefiningOp<mlir::arith::ConstantIndexOp>())
    return c.value();
  if (auto c = v.getDefiningOp<mlir::arith::ConstantIntOp>())
    return c.value();
  return std::nullopt;
}

namespace {

/// Threads per block along each tiled loop dimension, by loop rank: the last
/// (contiguous) dimension gets the most.
llvm::SmallVector<int64_t> tileSizesFor(unsigned rank) {
  if (rank == 1)
    return {256};
  llvm::SmallVector<int64_t> sizes(rank, 1);
  sizes[rank - 2] = 8;
  sizes[rank - 1] = 32;
  return sizes;
}

} // namespace

/// Host-side work left after the parallel loops became launches (a
/// reduction over every axis is serial loops, its initial value a plain
/// store): each run of it becomes a one-thread launch, so the GPU does it in
/// order with the other kernels.
void launchSerialWork(mlir::func::FuncOp kernel) {
  auto isSerial = [](mlir::Operation &op) {
    return llvm::isa<mlir::scf::ForOp, mlir::memref::StoreOp, mlir::scf::IfOp>(op);
  };
  mlir::Block &body = kernel.getBody().front();
  for (auto it = body.begin(); it != body.end();) {
    if (!isSerial(*it)) {
      ++it;
      continue;
    }
    llvm::SmallVector<mlir::Operation *> run;
    while (it != body.end() && isSerial(*it))
      run.push_back(&*it++);
    mlir::OpBuilder b(run.front());
    mlir::Value one = b.create<mlir::arith::ConstantIndexOp>(run.front()->getLoc(), 1);
    auto launch = b.create<mlir::gpu::LaunchOp>(run.front()->getLoc(), one, one, one, one, one, one);
    mlir::Block &inner = launch.getBody().front();
    b.setInsertionPointToEnd(&inner);
    auto terminator = b.create<mlir::gpu::TerminatorOp>(run.front()->getLoc());
    for (mlir::Operation *op : run)
      op->moveBefore(terminator);
  }
}


/// Parallel loops nested in a serial loop that hoistParallelLoops could not
/// interchange become serial too: the serial loop runs as one one-thread
/// launch (launchSerialWork), and a launch cannot contain launches.
void serializeNestedParallelLoops(mlir::func::FuncOp kernel) {
  llvm::SmallVector<mlir::scf::ParallelOp> nested;
  for (mlir::Operation &op : kernel.getBody().front())
    if (llvm::isa<mlir::scf::ForOp>(op))
      op.walk([&](mlir::scf::ParallelOp p) { nested.push_back(p); });
  // Innermost first (walk's post-order), so each clone copies serial loops.
  for (mlir::scf::ParallelOp p : nested) {
    if (p.getNumReductions() != 0)
      continue;
    mlir::OpBuilder b(p);
    mlir::IRMapping map;
    for (auto [lb, ub, step, iv] :
         llvm::zip(p.getLowerBound(), p.getUpperBound(), p.getStep(), p.getInductionVars())) {
      auto loop = b.create<mlir::scf::ForOp>(p.getLoc(), lb, ub, step);
      map.map(iv, loop.getInductionVar());
      b.setInsertionPoint(loop.getBody()->getTerminator());
    }
    for (mlir::Operation &op : p.getBody()->without_terminator())
      b.clone(op, map);
    p.erase();
  }
}


/// A reduction over a leading axis lowers to `scf.for k { scf.parallel j }`:
/// each j accumulates into its own element, so the nest is interchanged to
/// `scf.parallel j { scf.for k }`, one thread per element.
void hoistParallelLoops(mlir::func::FuncOp kernel) {
  // Collected first: the loop below replaces the loops it visits.
  const auto serial = llvm::to_vector(kernel.getBody().front().getOps<mlir::scf::ForOp>());
  for (mlir::scf::ForOp f : serial) {
    mlir::Block *body = f.getBody();
    if (f.getNumResults() != 0 || body->getOperations().size() != 2)
      continue;
    auto par = llvm::dyn_cast<mlir::scf::ParallelOp>(body->front());
    if (!par || par.getNumReductions() != 0)
      continue;
    bool boundsOutside = true;
    for (mlir::Value v : par->getOperands())
      boundsOutside &= !f->isAncestor(v.getParentBlock()->getParentOp()) && v != f.getInductionVar();
    if (!boundsOutside)
      continue;
    mlir::OpBuilder b(f);
    auto outer = b.create<mlir::scf::ParallelOp>(par.getLoc(), par.getLowerBound(), par.getUpperBound(),
                                                 par.getStep());
    b.setInsertionPoint(outer.getBody()->getTerminator());
    auto inner = b.create<mlir::scf::ForOp>(f.getLoc(), f.getLowerBound(), f.getUpperBound(), f.getStep());
    mlir::IRMapping map;
    for (auto [from, to] : llvm::zip(par.getInductionVars(), outer.getInductionVars()))
      map.map(from, to);
    map.map(f.getInductionVar(), inner.getInductionVar());
    b.setInsertionPoint(inner.getBody()->getTerminator());
    for (mlir::Operation &op : par.getBody()->without_terminator())
      b.clone(op, map);
    f.erase();
  }
}

namespace {

/// The constant upper bounds of `loop`, if it runs from 0 in unit steps.
std::optional<llvm::SmallVector<int64_t>> unitStepExtents(mlir::scf::ParallelOp loop) {
  llvm::SmallVector<int64_t> extents;
  for (auto [lb, ub, step] : llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    auto l = constantOf(lb), u = constantOf(ub), s = constantOf(step);
    if (!l || !u || !s || *l != 0 || *s != 1)
      return std::nullopt;
    extents.push_back(*u);
  }
  return extents;
}

/// The upper bounds of a row space `loop` (from 0 in unit steps): constants,
/// or (a dynamic-shape kernel's) a value for the last dimension, which goes
/// on grid x; the others go on y and z, at most 65535 each.
std::optional<llvm::SmallVector<mlir::Value>> rowSpaceOf(mlir::scf::ParallelOp loop) {
  llvm::SmallVector<mlir::Value> extents;
  for (auto [d, lb, ub, step] : llvm::enumerate(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    auto l = constantOf(lb), u = constantOf(ub), s = constantOf(step);
    const bool last = d + 1 == loop.getNumLoops();
    if (!l || !s || *l != 0 || *s != 1 || (!last && (!u || *u > 65535)))
      return std::nullopt;
    extents.push_back(ub);
  }
  return extents;
}

/// Whether `body` is straight-line loads, stores and arithmetic.
bool straightLine(mlir::Block &body) {
  for (mlir::Operation &op : body.without_terminator())
    if (op.getNumRegions() != 0 ||
        !(llvm::isa<mlir::memref::LoadOp, mlir::memref::StoreOp>(op) || mlir::isMemoryEffectFree(&op)))
      return false;
  return true;
}

/// Threads of a row reduction's block at most (launchRowReductions; a
/// shorter row gets the power of two at or above its length), and the
/// shortest row that gets a block of its own: shorter rows keep a thread.
constexpr int64_t kRowThreads = 256;
constexpr int64_t kMinRowForBlock = 32;

/// The threads of the block that reduces a row of `length` elements.
int64_t rowThreads(int64_t length) { return std::min<int64_t>(kRowThreads, llvm::PowerOf2Ceil(length)); }

/// The value `combine` leaves its other operand unchanged with, of `type`;
/// null for an operation launchRowReductions does not reduce.
mlir::TypedAttr identityOf(mlir::Operation *combine, mlir::Type type) {
  using namespace mlir;
  auto floatType = dyn_cast<FloatType>(type);
  auto intType = dyn_cast<IntegerType>(type);
  auto f = [&](APFloat v) -> TypedAttr { return FloatAttr::get(type, v); };
  auto i = [&](APInt v) -> TypedAttr { return IntegerAttr::get(type, v); };
  if (floatType) {
    const llvm::fltSemantics &sem = floatType.getFloatSemantics();
    if (isa<arith::AddFOp>(combine))
      return f(APFloat::getZero(sem, /*Negative=*/true));  // -0 + x is x, -0 included
    if (isa<arith::MulFOp>(combine))
      return f(APFloat::getOne(sem));
    if (isa<arith::MaximumFOp>(combine))
      return f(APFloat::getInf(sem, /*Negative=*/true));  // NaN still wins
    if (isa<arith::MinimumFOp>(combine))
      return f(APFloat::getInf(sem));
    if (isa<arith::MaxNumFOp, arith::MinNumFOp>(combine))
      return f(APFloat::getNaN(sem));  // maxnum(NaN, x) is x
    return nullptr;
  }
  if (!intType)
    return nullptr;
  const unsigned w = intType.getWidth();
  if (isa<arith::AddIOp, arith::OrIOp, arith::XOrIOp, arith::MaxUIOp>(combine))
    return i(APInt::getZero(w));
  if (isa<arith::MulIOp>(combine))
    return i(APInt(w, 1));
  if (isa<arith::AndIOp, arith::MinUIOp>(combine))
    return i(APInt::getAllOnes(w));
  if (isa<arith::MaxSIOp>(combine))
    return i(APInt::getSignedMinValue(w));
  if (isa<arith::MinSIOp>(combine))
    return i(APInt::getSignedMaxValue(w));
  return nullptr;
}

/// The buffer `memref` views (through reshapes and memref.view), and the
/// byte offset of the view in it; none through anything else (a subview).
std::optional<std::pair<mlir::Value, int64_t>> viewedBuffer(mlir::Value memref) {
  int64_t offset = 0;
  for (;;) {
    mlir::Operation *def = memref.getDefiningOp();
    if (llvm::isa_and_nonnull<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp>(def)) {
      memref = def->getOperand(0);
    } else if (auto view = llvm::dyn_cast_or_null<mlir::memref::ViewOp>(def)) {
      std::optional<int64_t> shift = constantOf(view.getByteShift());
      if (!shift)
        return std::nullopt;
      offset += *shift;
      memref = view.getSource();
    } else if (!def || llvm::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp>(def)) {
      return std::make_pair(memref, offset);
    } else {
      return std::nullopt;
    }
  }
}

/// Whether `v` is an argument of its function (not of a block inside it).
bool isFunctionArgument(mlir::Value v) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(v);
  return arg && arg.getOwner()->isEntryBlock() &&
         llvm::isa_and_nonnull<mlir::FunctionOpInterface>(arg.getOwner()->getParentOp());
}

/// The buffer `memref` is part of: a function argument or an allocation,
/// through reshapes, views (at any offset) and reinterpreted arguments (a
/// dynamic-shape kernel's); none through anything else.
std::optional<mlir::Value> baseBufferOf(mlir::Value memref) {
  for (;;) {
    mlir::Operation *def = memref.getDefiningOp();
    if (llvm::isa_and_nonnull<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp, mlir::memref::ViewOp,
                              mlir::memref::ReinterpretCastOp>(def))
      memref = def->getOperand(0);
    else if (def ? llvm::isa<mlir::memref::AllocOp, mlir::memref::AllocaOp>(def) : isFunctionArgument(memref))
      return memref;
    else
      return std::nullopt;
  }
}

/// The bytes of a statically shaped memref of integers or floats.
std::optional<int64_t> bytesOf(mlir::Value memref) {
  auto type = llvm::dyn_cast<mlir::MemRefType>(memref.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  return type.getNumElements() * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

/// Whether views `a` and `b` may share bytes: views of one buffer whose
/// ranges meet, or views this cannot follow (viewedBuffer). Views of two
/// buffers never do (GPU kernels take no donated buffers).
bool mayOverlap(mlir::Value a, mlir::Value b) {
  auto ba = baseBufferOf(a), bb = baseBufferOf(b);
  if (ba && bb && *ba != *bb)
    return false;
  auto va = viewedBuffer(a), vb = viewedBuffer(b);
  auto na = bytesOf(a), nb = bytesOf(b);
  if (!va || !vb || !na || !nb)
    return true;
  return va->first == vb->first && va->second < vb->second + *nb && vb->second < va->second + *na;
}

/// A row reduction as the loop conversion leaves it (after
/// hoistParallelLoops): `scf.parallel (rows) { scf.for k { v = f(loads);
/// acc[row] = combine(acc[row], v) } }`, where k is the contiguous (last)
/// index of every load that uses it.
struct RowReduction {
  mlir::scf::ParallelOp rows;
  mlir::scf::ForOp loop;
  mlir::memref::LoadOp accLoad;
  mlir::memref::StoreOp accStore;
  mlir::Operation *combine;
  mlir::TypedAttr identity;
  int64_t lower, upper;
};

std::optional<RowReduction> matchRowReduction(mlir::scf::ParallelOp rows) {
  using namespace mlir;
  if (rows.getNumReductions() != 0 || rows.getNumLoops() > 3 ||
      rows.getBody()->getOperations().size() != 2)  // the loop and scf.reduce
    return std::nullopt;
  if (!rowSpaceOf(rows))
    return std::nullopt;
  auto loop = dyn_cast<scf::ForOp>(rows.getBody()->front());
  if (!loop || loop.getNumResults() != 0)
    return std::nullopt;
  auto first = constantOf(loop.getLowerBound()), end = constantOf(loop.getUpperBound()),
       stride = constantOf(loop.getStep());
  if (!first || !end || !stride || *stride != 1 || *end - *first < kMinRowForBlock)
    return std::nullopt;
  if (!straightLine(*loop.getBody()))
    return std::nullopt;
  RowReduction r{rows, loop, nullptr, nullptr, nullptr, nullptr, *first, *end};
  const Value k = loop.getInductionVar();
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (r.accStore)
        return std::nullopt;
      r.accStore = store;
    }
  }
  if (!r.accStore)
    return std::nullopt;
  // The accumulator's element: indices that do not move with k.
  for (Value index : r.accStore.getIndices())
    if (loop->isAncestor(index.getParentBlock()->getParentOp()))
      return std::nullopt;
  r.combine = r.accStore.getValueToStore().getDefiningOp();
  if (!r.combine || r.combine->getBlock() != loop.getBody() || r.combine->getNumOperands() != 2 ||
      !r.combine->getResult(0).hasOneUse())
    return std::nullopt;
  for (Value operand : r.combine->getOperands()) {
    auto load = operand.getDefiningOp<memref::LoadOp>();
    if (load && load->getBlock() == loop.getBody() && load.getMemRef() == r.accStore.getMemRef() &&
        load.getIndices() == r.accStore.getIndices() && load->hasOneUse())
      r.accLoad = load;
  }
  if (!r.accLoad)
    return std::nullopt;
  r.identity = identityOf(r.combine, r.accLoad.getType());
  if (!r.identity)
    return std::nullopt;
  // Every other load that moves with k reads k's element of a contiguous
  // last dimension (so a block's threads read adjacent elements), and none
  // reads the accumulator's bytes, through whatever view.
  for (Operation &op : loop.getBody()->without_terminator()) {
    auto load = dyn_cast<memref::LoadOp>(op);
    if (!load || load == r.accLoad)
      continue;
    if (mayOverlap(load.getMemRef(), r.accStore.getMemRef()))
      return std::nullopt;
    auto type = cast<MemRefType>(load.getMemRef().getType());
    if (!type.getLayout().isIdentity())
      return std::nullopt;
    for (auto [d, index] : llvm::enumerate(load.getIndices())) {
      const bool last = d + 1 == load.getIndices().size();
      if (index == k ? !last : loop->isAncestor(index.getParentBlock()->getParentOp()))
        return std::nullopt;
    }
  }
  return r;
}

/// A launch of one block per row of a row space (the last row index on grid
/// x, the ones before it on y and z) and the values its body computes with.
struct RowLaunch {
  mlir::gpu::LaunchOp launch;
  llvm::SmallVector<mlir::Value, 3> rowIds;  // the block's row, per row dimension
  mlir::Value thread;
  int64_t threads;
  mlir::Attribute workgroupMemorySpace;  // LaunchOptions::workgroupMemorySpace

  /// `if (thread == 0) {}` at b's insertion point; b is left inside it.
  mlir::scf::IfOp onThreadZero(mlir::OpBuilder &b, mlir::Location loc) {
    using namespace mlir;
    auto zero = arith::ConstantIndexOp::create(b, loc, 0);
    auto isThreadZero =
        scf::IfOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread, zero), false);
    b.setInsertionPoint(isThreadZero.thenBlock()->getTerminator());
    return isThreadZero;
  }

  /// A buffer of `threads` elements in workgroup memory.
  mlir::Value workgroupBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Type element) {
    using namespace mlir;
    if (!workgroupMemorySpace) {
      auto space = mlir::gpu::AddressSpaceAttr::get(b.getContext(), mlir::gpu::AddressSpace::Workgroup);
      return launch.addWorkgroupAttribution(MemRefType::get({threads}, element, MemRefLayoutAttrInterface{}, space),
                                            loc);
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    return memref::AllocOp::create(
        b, loc, MemRefType::get({threads}, element, MemRefLayoutAttrInterface{}, workgroupMemorySpace));
  }
};

/// Creates a RowLaunch over rows `extents` (at most 3 dimensions, all but
/// the last at most 65535: rowSpaceOf) at b's insertion point, and leaves b
/// inside its body, before the terminator.
RowLaunch createRowLaunch(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<mlir::Value> extents,
                          int64_t threads, mlir::Attribute workgroupMemorySpace) {
  using namespace mlir;
  auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  const size_t numRows = extents.size();
  Value grid[3] = {index(1), index(1), index(1)};
  for (size_t d = 0; d < numRows; ++d)
    grid[numRows - 1 - d] = extents[d];
  auto launch = mlir::gpu::LaunchOp::create(b, loc, grid[0], grid[1], grid[2], index(threads), index(1), index(1));
  Block &body = launch.getBody().front();
  b.setInsertionPointToEnd(&body);
  b.setInsertionPoint(mlir::gpu::TerminatorOp::create(b, loc));
  const Value blocks[3] = {launch.getBlockIds().x, launch.getBlockIds().y, launch.getBlockIds().z};
  RowLaunch l{launch, {}, launch.getThreadIds().x, threads, workgroupMemorySpace};
  for (size_t d = 0; d < numRows; ++d)
    l.rowIds.push_back(blocks[numRows - 1 - d]);
  return l;
}

/// Emits `r` into row launch `l` at b's insertion point, the row's
/// induction variables standing for `rowIvs` in its body: each thread
/// reduces every l.threads-th element of the row (adjacent threads,
/// adjacent elements: coalesced) from the operation's identity, the block
/// combines the partial results in workgroup memory (a tree of halvings,
/// barriers between), and thread 0 combines the row's result into the
/// accumulator (its initial value: a fill before, or an earlier pass).
void emitRowReduction(mlir::OpBuilder &b, RowLaunch &l, RowReduction &r, mlir::ValueRange rowIvs) {
  using namespace mlir;
  const Location loc = r.rows.getLoc();
  auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  IRMapping rowOf;
  rowOf.map(rowIvs, l.rowIds);
  Value shared = l.workgroupBuffer(b, loc, r.identity.getType());
  Value identity = arith::ConstantOp::create(b, loc, r.identity);
  auto strided = scf::ForOp::create(
      b, loc, arith::AddIOp::create(b, loc, l.thread, index(r.lower)), index(r.upper), index(l.threads),
      ValueRange{identity}, [&](OpBuilder &in, Location, Value k, ValueRange partial) {
        IRMapping map = rowOf;
        map.map(r.loop.getInductionVar(), k);
        map.map(r.accLoad.getResult(), partial.front());
        for (Operation &op : r.loop.getBody()->without_terminator())
          if (&op != r.accLoad.getOperation() && &op != r.accStore.getOperation())
            in.clone(op, map);
        scf::YieldOp::create(in, loc, map.lookup(r.combine->getResult(0)));
      });
  auto combined = [&](Value x, Value y) -> Value {
    IRMapping pair;
    pair.map(r.combine->getOperand(0), x);
    pair.map(r.combine->getOperand(1), y);
    return b.clone(*r.combine, pair)->getResult(0);
  };
  memref::StoreOp::create(b, loc, strided.getResult(0), shared, ValueRange{l.thread});
  mlir::gpu::BarrierOp::create(b, loc);
  for (int64_t half = l.threads / 2; half >= 1; half /= 2) {
    auto inLowerHalf =
        scf::IfOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, l.thread, index(half)),
                          /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(inLowerHalf.thenBlock()->getTerminator());
    Value mine = memref::LoadOp::create(b, loc, shared, ValueRange{l.thread});
    Value other =
        memref::LoadOp::create(b, loc, shared, ValueRange{arith::AddIOp::create(b, loc, l.thread, index(half))});
    memref::StoreOp::create(b, loc, combined(mine, other), shared, ValueRange{l.thread});
    b.setInsertionPointAfter(inLowerHalf);
    mlir::gpu::BarrierOp::create(b, loc);
  }
  OpBuilder::InsertionGuard guard(b);
  l.onThreadZero(b, loc);
  SmallVector<Value> accIndices;
  for (Value v : r.accStore.getIndices())
    accIndices.push_back(rowOf.lookupOrDefault(v));
  Value acc = memref::LoadOp::create(b, loc, r.accStore.getMemRef(), accIndices);
  Value row = memref::LoadOp::create(b, loc, shared, ValueRange{index(0)});
  const bool accFirst = r.combine->getOperand(0) == r.accLoad.getResult();
  memref::StoreOp::create(b, loc, accFirst ? combined(acc, row) : combined(row, acc), r.accStore.getMemRef(),
                          accIndices);
}

/// What a parallel nest of a row kernel does for its block's row.
enum class RowWork { Reduction, Elementwise, Scalar };

/// What `loop` does for a row of the row space `rows`: a row reduction
/// over exactly those rows, an element-wise nest over them and one more
/// (contiguous) dimension, or per-row work (those rows, and dimensions of
/// extent 1). None when it is none of these.
std::optional<RowWork> rowWorkOf(mlir::scf::ParallelOp loop, llvm::ArrayRef<int64_t> rows) {
  std::optional<llvm::SmallVector<int64_t>> extents = unitStepExtents(loop);
  if (!extents || extents->size() < rows.size() || !llvm::equal(llvm::ArrayRef(*extents).take_front(rows.size()), rows))
    return std::nullopt;
  if (matchRowReduction(loop))
    return extents->size() == rows.size() ? std::optional(RowWork::Reduction) : std::nullopt;
  if (loop.getNumReductions() != 0 || !straightLine(*loop.getBody()))
    return std::nullopt;
  auto beyond = llvm::ArrayRef(*extents).drop_front(rows.size());
  if (llvm::all_of(beyond, [](int64_t e) { return e == 1; }))
    return RowWork::Scalar;
  if (beyond.size() == 1)
    return RowWork::Elementwise;
  return std::nullopt;
}

/// The bytes one memory access of a row kernel's nest may touch: its
/// buffer (a function argument or an allocation, through views and
/// reshapes), where its view starts in it and how large the view is, and,
/// when the access is row-local (the view's leading dimensions are the row
/// space and the access indexes them with its nest's row), the bytes of
/// one row.
struct Footprint {
  mlir::Value root;
  int64_t offset = 0, bytes = 0, rowBytes = 0;
  bool rowLocal = false;
};

std::optional<Footprint> footprintOf(mlir::Value memref, mlir::ValueRange indices, mlir::ValueRange rowIvs,
                                     llvm::ArrayRef<int64_t> rows) {
  using namespace mlir;
  auto type = dyn_cast<MemRefType>(memref.getType());
  std::optional<std::pair<Value, int64_t>> buffer = viewedBuffer(memref);
  std::optional<int64_t> bytes = bytesOf(memref);
  if (!type || !type.getLayout().isIdentity() || !buffer || !bytes)
    return std::nullopt;
  Footprint f;
  f.bytes = *bytes;
  f.root = buffer->first;
  f.offset = buffer->second;
  const size_t n = rows.size();
  f.rowLocal = static_cast<size_t>(type.getRank()) >= n && indices.size() >= n &&
               llvm::equal(type.getShape().take_front(n), rows);
  for (size_t d = 0; f.rowLocal && d < n; ++d)
    f.rowLocal = indices[d] == rowIvs[d];
  if (f.rowLocal)
    f.rowBytes = f.bytes / std::max<int64_t>(1, llvm::product_of(rows));
  return f;
}

/// Whether running `nests` (each over the row space `rows`) row by row —
/// every nest for row 0, then every nest for row 1, ... — computes what
/// running them one after the other does: every store is row-local, and
/// whatever else may touch its bytes touches the same row's bytes (the same
/// view of the same buffer) or none of them.
bool rowByRowIsExact(llvm::ArrayRef<mlir::scf::ParallelOp> nests, llvm::ArrayRef<int64_t> rows) {
  using namespace mlir;
  struct Access {
    Footprint f;
    bool store;
  };
  SmallVector<Access> accesses;
  for (scf::ParallelOp nest : llvm::to_vector(nests)) {
    const SmallVector<Value> ivs = nest.getInductionVars();
    const ValueRange rowIvs = ValueRange(ivs).take_front(rows.size());
    bool ok = true;
    nest.walk([&](Operation *op) {
      std::optional<Footprint> f;
      if (auto load = dyn_cast<memref::LoadOp>(op))
        f = footprintOf(load.getMemRef(), load.getIndices(), rowIvs, rows);
      else if (auto store = dyn_cast<memref::StoreOp>(op))
        f = footprintOf(store.getMemRef(), store.getIndices(), rowIvs, rows);
      else
        return;
      if (!f)
        ok = false;
      else
        accesses.push_back({*f, isa<memref::StoreOp>(op)});
    });
    if (!ok)
      return false;
  }
  for (const Access &s : accesses) {
    if (!s.store)
      continue;
    if (!s.f.rowLocal)
      return false;
    for (const Access &x : accesses) {
      if (x.f.root != s.f.root)
        continue;
      const bool sameRows = x.f.rowLocal && x.f.offset == s.f.offset && x.f.rowBytes == s.f.rowBytes;
      const bool apart = x.f.offset + x.f.bytes <= s.f.offset || s.f.offset + s.f.bytes <= x.f.offset;
      if (!sameRows && !apart)
        return false;
    }
  }
  return true;
}

} // namespace

/// Row kernels: a run of top-level parallel nests over one row space that
/// holds a row reduction and the nests around it that work on the same
/// rows — softmax's max, exp, sum and division; layer_norm's mean,
/// variance and normalisation — becomes one launch of a block per row,
/// each nest in turn for the block's row (element-wise nests strided over
/// the block's threads, per-row work on thread 0, reductions as
/// emitRowReduction), barriers between: one launch instead of one per nest,
/// and a row's intermediate values come back from the cache, not memory.
/// Only where running the nests row by row is exact (rowByRowIsExact).
void launchRowKernels(mlir::func::FuncOp kernel, mlir::Attribute workgroupMemorySpace) {
  using namespace mlir;
  // Runs of nests with nothing between them but side-effect-free values
  // (constants, views), which the launch at the run's last nest sees.
  SmallVector<SmallVector<scf::ParallelOp>> runs(1);
  for (Operation &op : kernel.getBody().front()) {
    if (auto nest = dyn_cast<scf::ParallelOp>(op))
      runs.back().push_back(nest);
    else if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
      runs.emplace_back();
  }
  for (ArrayRef<scf::ParallelOp> run : runs) {
    for (size_t i = 0; i < run.size();) {
      size_t reduction = i;
      // (A dynamic row space has no row kernel: its legality needs sizes.)
      while (reduction < run.size() && (!matchRowReduction(run[reduction]) || !unitStepExtents(run[reduction])))
        ++reduction;
      if (reduction == run.size())
        break;
      const SmallVector<int64_t> rows = *unitStepExtents(run[reduction]);
      size_t first = reduction, end = reduction + 1;
      while (first > i && rowWorkOf(run[first - 1], rows))
        --first;
      while (end < run.size() && rowWorkOf(run[end], rows))
        ++end;
      // The widest group around the reduction that runs row by row exactly:
      // with the nests on both sides, then before it, then after it.
      SmallVector<scf::ParallelOp> nests;
      for (auto [from, to] : {std::pair{first, end}, std::pair{first, reduction + 1}, std::pair{reduction, end}}) {
        SmallVector<scf::ParallelOp> candidate(run.slice(from, to - from));
        if (candidate.size() >= 2 && rowByRowIsExact(candidate, rows)) {
          nests = std::move(candidate);
          end = to;
          break;
        }
      }
      i = nests.empty() ? reduction + 1 : end;
      if (nests.empty())
        continue;
      // Each nest's work, and the widest row among them.
      SmallVector<std::optional<RowReduction>> reductions;
      int64_t widest = 1;
      for (scf::ParallelOp nest : nests) {
        reductions.push_back(matchRowReduction(nest));
        widest = std::max(widest, reductions.back() ? reductions.back()->upper - reductions.back()->lower
                                                    : unitStepExtents(nest)->back());
      }
      OpBuilder b(nests.back());
      const Location loc = nests.back().getLoc();
      auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
      SmallVector<Value> rowSpace;
      for (int64_t extent : rows)
        rowSpace.push_back(index(extent));
      RowLaunch l = createRowLaunch(b, loc, rowSpace, rowThreads(widest), workgroupMemorySpace);
      for (size_t k = 0; k < nests.size(); ++k) {
        scf::ParallelOp nest = nests[k];
        if (k > 0)
          mlir::gpu::BarrierOp::create(b, loc);
        const SmallVector<Value> ivs = nest.getInductionVars();
        IRMapping map;
        map.map(ValueRange(ivs).take_front(rows.size()), l.rowIds);
        auto cloneBody = [&](OpBuilder &in) {
          for (Operation &op : nest.getBody()->without_terminator())
            in.clone(op, map);
        };
        if (reductions[k]) {
          emitRowReduction(b, l, *reductions[k], ivs);
        } else if (*rowWorkOf(nest, rows) == RowWork::Elementwise) {
          scf::ForOp::create(b, loc, l.thread, index(unitStepExtents(nest)->back()), index(l.threads), ValueRange{},
                             [&](OpBuilder &in, Location, Value column, ValueRange) {
                               map.map(ivs.back(), column);
                               cloneBody(in);
                               scf::YieldOp::create(in, loc);
                             });
        } else {  // per-row work
          for (Value unit : ValueRange(ivs).drop_front(rows.size()))
            map.map(unit, index(0));
          OpBuilder::InsertionGuard guard(b);
          l.onThreadZero(b, loc);
          cloneBody(b);
        }
      }
      for (scf::ParallelOp nest : nests)
        nest.erase();
    }
  }
}


/// Row reductions over rows of kMinRowForBlock or more (those no row kernel
/// took) become launches of one block per row (emitRowReduction). The loop
/// conversion gave a thread per row, whose loads are a row apart:
/// uncoalesced, and one thread's serial walk per row.
void launchRowReductions(mlir::func::FuncOp kernel, mlir::Attribute workgroupMemorySpace) {
  using namespace mlir;
  SmallVector<RowReduction> found;
  for (Operation &op : kernel.getBody().front())
    if (auto rows = dyn_cast<scf::ParallelOp>(op))
      if (std::optional<RowReduction> r = matchRowReduction(rows))
        found.push_back(*r);
  for (RowReduction &r : found) {
    OpBuilder b(r.rows);
    RowLaunch l = createRowLaunch(b, r.rows.getLoc(), *rowSpaceOf(r.rows), rowThreads(r.upper - r.lower),
                                  workgroupMemorySpace);
    emitRowReduction(b, l, r, r.rows.getInductionVars());
    r.rows.erase();
  }
}


/// A splat constant buffer (a `full` output) becomes a filled allocation:
/// device code cannot read host globals.
void splatGlobalsToFills(mlir::ModuleOp module, mlir::func::FuncOp kernel) {
  llvm::SmallVector<mlir::memref::GetGlobalOp> gets;
  kernel.walk([&](mlir::memref::GetGlobalOp op) { gets.push_back(op); });
  for (mlir::memref::GetGlobalOp get : gets) {
    auto global = module.lookupSymbol<mlir::memref::GlobalOp>(get.getName());
    auto init = global ? llvm::dyn_cast_or_null<mlir::DenseElementsAttr>(global.getInitialValueAttr()) : nullptr;
    if (!init || !init.isSplat())
      continue;
    mlir::OpBuilder b(get);
    auto type = llvm::cast<mlir::MemRefType>(get.getType());
    mlir::Value alloc = b.create<mlir::memref::AllocOp>(get.getLoc(), mlir::MemRefType::get(type.getShape(),
                                                                                          type.getElementType()));
    mlir::Value value = b.create<mlir::arith::ConstantOp>(get.getLoc(), init.getSplatValue<mlir::TypedAttr>());
    b.create<mlir::linalg::FillOp>(get.getLoc(), value, alloc);
    get.replaceAllUsesWith(alloc);
    get.erase();
  }
}


/// Views, reshapes and index arithmetic move into the kernels that use them,
/// so a launch passes its base buffers (identity layouts, as bare pointers);
/// views into the scratch buffer only with `sinkScratchViews`.
void sinkIntoLaunches(mlir::func::FuncOp kernel, bool sinkScratchViews) {
  auto sinkable = [&](mlir::Operation *op) {
    if (llvm::isa<mlir::memref::ViewOp>(op))
      return sinkScratchViews;
    if (llvm::isa<mlir::arith::ConstantOp, mlir::memref::DimOp, mlir::memref::SubViewOp, mlir::memref::ExpandShapeOp,
                  mlir::memref::CollapseShapeOp, mlir::memref::ReinterpretCastOp, mlir::memref::CastOp>(op))
      return true;
    // A scalar an earlier kernel wrote (a full reduction: a loss, a norm)
    // is read, and computed with, inside the kernels that use it: the host
    // cannot read device memory, and the stream orders the read after the
    // write. Reading later must read the same value: checked by
    // loadStillValidAt for each launch (nothing from the load to the launch,
    // the launch itself included, may write the buffer).
    if (llvm::isa<mlir::memref::LoadOp>(op))
      return true;
    const llvm::StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace() : "";
    return (dialect == "arith" || dialect == "math") && op->getNumRegions() == 0 &&
           llvm::all_of(op->getResultTypes(), [](mlir::Type t) { return t.isIntOrIndexOrFloat(); });
  };
  // A load moved into `launch` reads what the host would have read: both
  // in one block, nothing between them writes its buffer, and neither does
  // the launch, unless it is one thread (serial work: its copy of the load
  // comes first, before its own stores; an accumulation reads and writes
  // one slot so). Otherwise the load stays on the host, where lowering
  // rejects it (the host cannot read device memory) rather than computing
  // with a later value.
  auto oneThread = [](mlir::gpu::LaunchOp launch) {
    mlir::gpu::KernelDim3 grid = launch.getGridSizeOperandValues(), block = launch.getBlockSizeOperandValues();
    return llvm::all_of(llvm::ArrayRef<mlir::Value>{grid.x, grid.y, grid.z, block.x, block.y, block.z},
                        [](mlir::Value v) { return mlir::isConstantIntValue(v, 1); });
  };
  const std::set<unsigned> noDonations;  // GPU kernels take no donated buffers
  auto loadStillValidAt = [&](mlir::memref::LoadOp load, mlir::gpu::LaunchOp launch) {
    if (load->getBlock() != launch->getBlock() || !load->isBeforeInBlock(launch))
      return false;
    for (mlir::Operation *op = load->getNextNode(); op != launch.getOperation(); op = op->getNextNode())
      if (cpu::mayWriteBytesOf(op, load.getMemRef(), kernel, noDonations))
        return false;
    return oneThread(launch) || !cpu::mayWriteBytesOf(launch, load.getMemRef(), kernel, noDonations);
  };
  // (upstream's sinkOperationsIntoLaunchOp keeps an op whose operand is a
  // function argument the launch does not use already: a view of the scratch
  // buffer, say.) Cloned at the top of the launch body, repeatedly, so a
  // sunk op's own operands follow it in; the originals die on the host.
  kernel.walk([&](mlir::gpu::LaunchOp launch) {
    mlir::Region &body = launch.getBody();
    for (bool changed = true; changed;) {
      changed = false;
      llvm::SetVector<mlir::Value> captured;
      mlir::getUsedValuesDefinedAbove(body, captured);
      for (mlir::Value v : captured) {
        mlir::Operation *def = v.getDefiningOp();
        if (!def || def->getNumResults() != 1 || !sinkable(def))
          continue;
        if (auto load = llvm::dyn_cast<mlir::memref::LoadOp>(def); load && !loadStillValidAt(load, launch))
          continue;
        mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(&body.front());
        mlir::Operation *clone = b.clone(*def);
        mlir::replaceAllUsesInRegionWith(v, clone->getResult(0), body);
        changed = true;
      }
    }
  });
}

namespace {

/// Elements each thread of a large element-wise nest computes, along the
/// contiguous dimension a block's width of threads apart so that every
/// copy's accesses coalesce: one element a thread leaves a long chain of
/// arithmetic (chain8's exp, division and tanh) with one load in flight per
/// thread, and the H200 ran chain8 at 0.53 of its copy bandwidth (Triton,
/// with several elements a thread: up to 0.91). A nest qualifies with 2^20
/// iterations or more (1024 blocks or more: several per SM) and a
/// contiguous extent of at least 4 tiles (the edge tile wastes at most a
/// fifth of the threads).
constexpr int64_t kElementsPerThread = 4;
constexpr int64_t kCoarsenMinIterations = int64_t{1} << 20;
constexpr int64_t kCoarsenMinTiles = 4;

/// Whether each thread of `loop` may compute kElementsPerThread elements
/// (coarsenParallelLoop): a nest from 0 with unit steps and constant bounds,
/// large enough (kCoarsenMinIterations, kCoarsenMinTiles), whose body is
/// straight-line loads, arithmetic and stores with every load before every
/// store, so that the copies' stores can move after all their loads
/// (iterations of a parallel loop do not read what another writes, and no
/// iteration loads after it stores).
bool coarsenable(mlir::scf::ParallelOp loop) {
  std::optional<llvm::SmallVector<int64_t>> extents = unitStepExtents(loop);
  if (loop.getNumReductions() != 0 || !extents || !straightLine(*loop.getBody()))
    return false;
  const int64_t rowWidth = tileSizesFor(loop.getNumLoops()).back() * kElementsPerThread;
  if (llvm::product_of(*extents) < kCoarsenMinIterations || extents->back() < kCoarsenMinTiles * rowWidth)
    return false;
  bool stored = false;
  for (mlir::Operation &op : loop.getBody()->without_terminator()) {
    if (llvm::isa<mlir::memref::StoreOp>(op))
      stored = true;
    else if (llvm::isa<mlir::memref::LoadOp>(op) && stored)
      return false;
  }
  return stored;
}

/// Moves the loads of `block` (straight-line copies of a coarsenable body)
/// and the index arithmetic they need ahead of everything else, in their
/// order: each copy's loads are issued before any copy's arithmetic waits
/// for one, whatever the target's scheduler makes of the block. Only pure
/// operations are passed (the stores are already last).
void loadsFirst(mlir::Block &block) {
  llvm::DenseSet<mlir::Operation *> early;
  for (mlir::Operation &op : llvm::reverse(block.without_terminator())) {
    if (!llvm::isa<mlir::memref::LoadOp>(op) && !early.contains(&op))
      continue;
    early.insert(&op);
    for (mlir::Value operand : op.getOperands())
      if (mlir::Operation *def = operand.getDefiningOp(); def && def->getBlock() == &block)
        early.insert(def);
  }
  mlir::Operation *firstLate = nullptr;
  for (mlir::Operation &op : llvm::make_early_inc_range(block.without_terminator())) {
    if (!early.contains(&op)) {
      if (!firstLate)
        firstLate = &op;
    } else if (firstLate) {
      op.moveBefore(firstLate);
    }
  }
}

/// Rewrites the inner (per-block) loop of a tiled coarsenable nest so that
/// each thread computes kElementsPerThread elements of the contiguous
/// dimension, `threads` apart: its extent becomes `threads`, and its body
/// the copies. A full tile runs the copies unguarded, every load first and
/// every store last (the loads of all copies in flight together); the tile
/// at the edge guards each copy.
void coarsenParallelLoop(mlir::scf::ParallelOp inner, int64_t threads) {
  using namespace mlir;
  OpBuilder b(inner);
  const Location loc = inner.getLoc();
  auto index = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  SmallVector<Value> upper(inner.getUpperBound());
  const Value extent = upper.back();  // min(threads * copies, what is left)
  upper.back() = index(threads);
  auto coarse = scf::ParallelOp::create(b, loc, inner.getLowerBound(), upper, inner.getStep());
  b.setInsertionPoint(coarse.getBody()->getTerminator());
  const Value thread = coarse.getInductionVars().back();
  auto elementOf = [&](int64_t copy) -> Value { return arith::AddIOp::create(b, loc, thread, index(copy * threads)); };
  auto cloneBody = [&](Value element) {
    IRMapping map;
    map.map(inner.getInductionVars(), coarse.getInductionVars());
    map.map(inner.getInductionVars().back(), element);
    for (Operation &op : inner.getBody()->without_terminator())
      b.clone(op, map);
  };
  Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, extent, index(threads * kElementsPerThread));
  auto edge = scf::IfOp::create(b, loc, full, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    Block &fullTile = *edge.thenBlock();
    b.setInsertionPoint(fullTile.getTerminator());
    for (int64_t copy = 0; copy < kElementsPerThread; ++copy)
      cloneBody(elementOf(copy));
    SmallVector<Operation *> stores;
    for (Operation &op : fullTile.without_terminator())
      if (isa<memref::StoreOp>(op))
        stores.push_back(&op);
    for (Operation *store : stores)
      store->moveBefore(fullTile.getTerminator());
    loadsFirst(fullTile);
    b.setInsertionPoint(edge.elseBlock()->getTerminator());
    for (int64_t copy = 0; copy < kElementsPerThread; ++copy) {
      Value element = elementOf(copy);
      auto inside = scf::IfOp::create(b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, element, extent),
                                      /*withElseRegion=*/false);
      OpBuilder::InsertionGuard inBranch(b);
      b.setInsertionPoint(inside.thenBlock()->getTerminator());
      cloneBody(element);
    }
  }
  inner.erase();
}

} // namespace

/// Tiles every top-level scf.parallel of the kernel into blocks of threads,
/// large element-wise nests with several elements a thread.
void tileParallelLoops(mlir::func::FuncOp kernel) {
  // Collected first: tiling replaces the loops it visits.
  const auto loops = llvm::to_vector(kernel.getBody().front().getOps<mlir::scf::ParallelOp>());
  for (mlir::scf::ParallelOp p : loops) {
    llvm::SmallVector<int64_t> sizes = tileSizesFor(p.getNumLoops());
    const int64_t threads = sizes.back();
    const bool coarse = coarsenable(p);
    if (coarse)
      sizes.back() *= kElementsPerThread;
    auto [outer, inner] = mlir::scf::tileParallelLoop(p, sizes, /*noMinMaxBounds=*/false);
    if (coarse)
      coarsenParallelLoop(inner, threads);
  }
}


/// Folds the tiled loops' steps and bounds to constants (and affine.min
/// bounds to a form with a constant result), as the conversion to launches
/// wants them, without the rest of canonicalization: that would merge each
/// loop of points with its loop of tiles (their bounds are independent) into
/// one loop, which maps onto blocks of one thread.
void foldTiledLoopBounds(mlir::func::FuncOp kernel) {
  mlir::MLIRContext *context = kernel.getContext();
  mlir::RewritePatternSet patterns(context);
  mlir::affine::AffineMinOp::getCanonicalizationPatterns(patterns, context);
  mlir::affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
  (void)mlir::applyPatternsGreedily(kernel, std::move(patterns));  // the driver folds constants too
}


/// Moves every kernel into the first gpu.module (one PTX module for the whole
/// trace), each named after the module outlining made for it (those names
/// are unique), and points the launches at it.
mlir::LogicalResult mergeGpuModules(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::gpu::GPUModuleOp> gpuModules(module.getOps<mlir::gpu::GPUModuleOp>());
  if (gpuModules.empty())
    return mlir::failure();
  mlir::gpu::GPUModuleOp first = gpuModules.front();
  mlir::StringAttr target = first.getNameAttr();
  // (module, kernel) of each launch before the move -> the kernel's new name.
  llvm::DenseMap<std::pair<mlir::Attribute, mlir::Attribute>, mlir::StringAttr> renamed;
  for (mlir::gpu::GPUModuleOp m : gpuModules) {
    llvm::SmallVector<mlir::gpu::GPUFuncOp> funcs(m.getOps<mlir::gpu::GPUFuncOp>());
    for (mlir::gpu::GPUFuncOp f : funcs) {
      mlir::StringAttr newName = funcs.size() == 1
                                     ? m.getNameAttr()
                                     : mlir::StringAttr::get(module.getContext(), m.getName() + "_" + f.getName());
      renamed[{m.getNameAttr(), f.getNameAttr()}] = newName;
      f.setName(newName);
      if (m != first)
        f->moveBefore(&first.getBody()->back());
    }
  }
  mlir::WalkResult walk = module.walk([&](mlir::gpu::LaunchFuncOp launch) {
    auto it = renamed.find({launch.getKernelModuleName(), launch.getKernelName()});
    if (it == renamed.end())
      return mlir::WalkResult::interrupt();
    launch->setAttr("kernel", mlir::SymbolRefAttr::get(target, {mlir::FlatSymbolRefAttr::get(it->second)}));
    return mlir::WalkResult::advance();
  });
  for (mlir::gpu::GPUModuleOp other : llvm::drop_begin(gpuModules))
    other.erase();
  return mlir::failure(walk.wasInterrupted());
}


/// expand_shape/collapse_shape to an identity layout: a reshape of a dense
/// buffer, the same pointer to a bare-pointer kernel.
bool isReshape(mlir::Operation *op) {
  if (!op || !llvm::isa<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp>(op))
    return false;
  auto type = llvm::dyn_cast<mlir::MemRefType>(op->getResult(0).getType());
  return type && type.getLayout().isIdentity();
}


} // namespace kiln::jit::gpu
