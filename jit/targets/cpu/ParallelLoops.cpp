//===- ParallelLoops.cpp - Innermost loops whose iterations are independent -*- C++ -*-===//

#include "jit/targets/cpu/ParallelLoops.h"

#include "jit/targets/cpu/ElementAccess.h"
#include "jit/targets/cpu/MemoryExtent.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// Float operations in a loop body from which LLVM should interleave vector
/// iterations (latencyBoundInterleave), and how many. Above the upper bound
/// the body has its own independent work and the copies would multiply a
/// long loop's codegen (the 200-op compile-latency kernel: 1,000 vector
/// instructions more per copy). Bodies up to kFourCopiesMaxOps interleave
/// four iterations: chain8 (about 40 float operations) ran 13 % faster with
/// four than with two (AVX2, Zen 3: 20.7 against 24.5 ms on one thread,
/// 11.4 against 13.2 ms on two), and eight spilled (27 ms on one thread);
/// with AVX-512's 32 registers eight ran fastest (kLatencyBoundCopiesWide).
/// Larger bodies keep two, which they were measured with.
constexpr int64_t kLatencyBoundOps = 32;
constexpr int64_t kLatencyBoundMaxOps = 200;
constexpr int64_t kFourCopiesMaxOps = 64;

/// The loop's variable is one of the indices and the others are the same in
/// every iteration: each iteration writes an element of its own.
bool oneElementPerIteration(const CanonicalAccess &c, scf::ForOp loop) {
  bool usesIv = false;
  for (Value index : c.indices) {
    if (index == loop.getInductionVar())
      usesIv = true;
    else if (!loop.isDefinedOutsideOfLoop(index))
      return false;
  }
  return usesIv;
}

bool sameElement(const CanonicalAccess &a, const CanonicalAccess &b) {
  return a.offset == b.offset && a.element == b.element && a.shape == b.shape && a.indices == b.indices;
}

/// Whether `x` touches no element that store `s` writes in another
/// iteration.
bool independentOfStore(const ElementAccess &s, const CanonicalAccess &cs, const ElementAccess &x) {
  const Extent es = extentOf(s.memref), ex = extentOf(x.memref);
  const std::optional<CanonicalAccess> cx = canonical(x);
  // Distinct arguments are distinct buffers but for a donated pair, which
  // reads and writes whole arguments, never the scratch buffer's views.
  const bool distinctArguments = es.base != ex.base && isa<BlockArgument>(es.base) && isa<BlockArgument>(ex.base);
  if (distinctArguments) {
    if (cs.throughView || (cx && cx->throughView))
      return true;
    return cx && sameElement(cs, *cx);
  }
  if (disjoint(es, ex))
    return true;
  return cx && cx->root == cs.root && sameElement(cs, *cx);
}

bool iterationsIndependent(scf::ForOp loop) {
  SmallVector<ElementAccess> accesses;
  if (!elementAccesses(*loop.getBody(), accesses))
    return false;
  bool stores = false;
  for (const ElementAccess &s : accesses) {
    if (!s.write)
      continue;
    stores = true;
    const std::optional<CanonicalAccess> cs = canonical(s);
    if (!cs || !oneElementPerIteration(*cs, loop))
      return false;
    for (const ElementAccess &x : accesses)
      if (&x != &s && !independentOfStore(s, *cs, x))
        return false;
  }
  return stores;  // a loop that only reads needs no overlap checks
}

/// An f32 loop that carries an f64 sum (Kiln sums f32 in f64): LLVM sizes
/// its vectors by the widest type, so the f32 work would run at half width.
bool f32WorkWithF64Sum(scf::ForOp loop) {
  if (!llvm::any_of(loop.getRegionIterArgs(), [](Value v) { return v.getType().isF64(); }))
    return false;
  bool f32 = false;
  loop.getBody()->walk([&](memref::LoadOp load) { f32 |= load.getType().isF32(); });
  return f32;
}

/// Float operations of an innermost, straight-line loop body; -1 when the
/// body has nested regions.
int64_t straightLineFloatOps(Block &body) {
  int64_t arithmetic = 0;
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() != 0)
      return -1;  // not innermost, or not straight-line
    if (op.getNumResults() == 1 && isa<FloatType, VectorType>(op.getResult(0).getType()) &&
        !op.hasTrait<OpTrait::ConstantLike>() && !isa<memref::LoadOp>(op))
      ++arithmetic;
  }
  return arithmetic;
}

/// A loop without loop-carried values whose body is one long dependence
/// chain per element (chain8's exp, division and tanh polynomial: about 60
/// vector instructions, 130 cycles of latency): LLVM's vectoriser does not
/// interleave bodies that large, and the out-of-order window then holds
/// about two iterations, so the loop runs at half the FMA ports' rate.
/// Interleaving vector iterations gives the core independent work
/// (chain8: 66 -> 44 cycles per 16 floats with two; see kFourCopiesMaxOps).
/// Loops that carry a value keep LLVM's choice, which keeps their float sums
/// in order. With 512-bit vectors (`f32Lanes` 16: 32 vector registers)
/// short bodies interleave eight iterations (kLatencyBoundCopiesWide).
/// Returns how many vector iterations LLVM should interleave in `loop`; 0
/// for its own choice.
int64_t latencyBoundInterleave(scf::ForOp loop, unsigned f32Lanes) {
  if (loop.getNumRegionIterArgs() != 0)
    return 0;
  const int64_t arithmetic = straightLineFloatOps(*loop.getBody());
  if (arithmetic < kLatencyBoundOps || arithmetic > kLatencyBoundMaxOps)
    return 0;
  if (arithmetic > kFourCopiesMaxOps)
    return 2;
  return f32Lanes >= 16 ? kLatencyBoundCopiesWide : kLatencyBoundCopies;
}

/// Rewrites an innermost scf.parallel without reductions (the element loop
/// of an outlined parallel body) as the scf.for nest that convert-scf-to-cf
/// would make of it, so that its innermost loop can carry an annotation
/// (scf-to-cf drops a parallel loop's attributes). Unannotated, such a loop
/// over a donated pair (or any two arguments) got LLVM's runtime overlap
/// check and a scalar copy of the whole body: an in-place update ran the
/// scalar copy, and the 200-op compile-latency kernel paid LLVM for both.
void sequentializeElementMaps(Operation *root) {
  SmallVector<scf::ParallelOp> maps;
  root->walk([&](scf::ParallelOp loop) {
    if (loop.getInitVals().empty() && straightLineFloatOps(*loop.getBody()) >= 0)
      maps.push_back(loop);
  });
  for (scf::ParallelOp loop : maps) {
    OpBuilder b(loop);
    IRMapping ivs;
    for (auto [lower, upper, step, iv] :
         llvm::zip_equal(loop.getLowerBound(), loop.getUpperBound(), loop.getStep(), loop.getInductionVars())) {
      auto inner = scf::ForOp::create(b, loop.getLoc(), lower, upper, step);
      ivs.map(iv, inner.getInductionVar());
      b.setInsertionPoint(inner.getBody()->getTerminator());
    }
    for (Operation &op : loop.getBody()->without_terminator())
      b.clone(op, ivs);
    loop.erase();
  }
}

} // namespace

int markParallelLoops(Operation *root, unsigned f32Lanes) {
  sequentializeElementMaps(root);
  int marked = 0;
  root->walk([&](scf::ForOp loop) {
    if (loop->hasAttr(kLoopAnnotation))
      return;
    const bool parallel = iterationsIndependent(loop);
    const int64_t interleave = latencyBoundInterleave(loop, f32Lanes);
    if (!parallel && interleave == 0)
      return;
    MLIRContext *ctx = loop.getContext();
    auto i32 = IntegerType::get(ctx, 32);
    SmallVector<LLVM::AccessGroupAttr, 1> groups;
    if (parallel)
      groups.push_back(LLVM::AccessGroupAttr::get(ctx));
    LLVM::LoopVectorizeAttr width;
    if (parallel && f32Lanes > 0 && f32WorkWithF64Sum(loop))
      width = LLVM::LoopVectorizeAttr::get(ctx, {}, {}, {}, IntegerAttr::get(i32, f32Lanes), {}, {}, {});
    LLVM::LoopInterleaveAttr interleaved;
    if (interleave > 0)
      interleaved = LLVM::LoopInterleaveAttr::get(ctx, IntegerAttr::get(i32, interleave));
    loop->setAttr(kLoopAnnotation, LLVM::LoopAnnotationAttr::get(ctx, {}, width, interleaved, {}, {}, {}, {}, {}, {},
                                                                 {}, {}, {}, {}, {}, groups));
    marked += parallel;
  });
  return marked;
}

int tagParallelAccesses(Operation *root) {
  int tagged = 0;
  root->walk([&](LLVM::BrOp latch) {
    auto annotation = dyn_cast_or_null<LLVM::LoopAnnotationAttr>(latch->getDiscardableAttr(kLoopAnnotation));
    if (!annotation)
      return;
    latch->removeDiscardableAttr(kLoopAnnotation);
    latch.setLoopAnnotationAttr(annotation);
    ArrayRef<LLVM::AccessGroupAttr> groups = annotation.getParallelAccesses();
    if (groups.empty())
      return;
    // The natural loop of the back edge: the header and every block that
    // reaches the latch without passing through the header.
    Block *header = latch.getDest();
    llvm::SmallPtrSet<Block *, 8> blocks{header};
    SmallVector<Block *> work{latch->getBlock()};
    while (!work.empty()) {
      Block *b = work.pop_back_val();
      if (!blocks.insert(b).second)
        continue;
      for (Block *pred : b->getPredecessors())
        work.push_back(pred);
    }
    for (Block *b : blocks)
      for (Operation &op : *b) {
        auto access = dyn_cast<LLVM::AccessGroupOpInterface>(op);
        if (!access)
          continue;
        SmallVector<Attribute> all;
        if (ArrayAttr existing = access.getAccessGroupsOrNull())
          llvm::append_range(all, existing);
        llvm::append_range(all, groups);
        access.setAccessGroups(ArrayAttr::get(op.getContext(), all));
      }
    ++tagged;
  });
  return tagged;
}

} // namespace kiln::jit::cpu
