//===- NextRowPrefetch.cpp - Fetch a row kernel's next row ahead ----------===//

#include "jit/targets/cpu/NextRowPrefetch.h"
#include "jit/targets/cpu/LlvmPassRegistration.h"

#include "jit/targets/cpu/MemoryExtent.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"

namespace kiln::jit::cpu {

namespace {

/// The function argument `memref` views (MemoryExtent.h), or null.
mlir::BlockArgument rootArgument(mlir::Value memref) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(extentOf(memref).base);
  if (!arg || !llvm::isa<mlir::func::FuncOp>(arg.getOwner()->getParentOp()))
    return {};
  return arg;
}

/// Whether anything but loads and prefetches uses `root` or a view of it
/// (a store, a copy, a call: anything that may write it).
bool maybeWritten(mlir::Value root) {
  return !allUsesThroughViews(root, [](mlir::OpOperand &use) {
    return llvm::isa<mlir::memref::LoadOp, mlir::memref::PrefetchOp>(use.getOwner());
  });
}

bool hasNestedLoop(mlir::scf::ForOp loop) {
  bool nested = false;
  loop.getBody()->walk([&](mlir::scf::ForOp) { nested = true; });
  return nested;
}

/// The innermost loop with the most operations in the passes after the
/// first (the later one on a tie); null if none.
mlir::scf::ForOp heaviestLaterLoop(llvm::ArrayRef<mlir::scf::ForOp> passes) {
  mlir::scf::ForOp best;
  int64_t bestOps = -1;
  for (mlir::scf::ForOp pass : llvm::drop_begin(passes))
    pass.walk([&](mlir::scf::ForOp loop) {
      if (hasNestedLoop(loop))
        return;
      int64_t ops = 0;
      loop.getBody()->walk([&](mlir::Operation *) { ++ops; });
      if (ops >= bestOps) {
        best = loop;
        bestOps = ops;
      }
    });
  return best;
}

/// Bytes of one row (all but the leading dimension) of a static memref
/// with at least two rows; -1 otherwise.
int64_t rowBytes(mlir::MemRefType type) {
  if (!type.hasStaticShape() || type.getRank() < 2 || type.getDimSize(0) < 2 || !type.getElementType().isIntOrFloat())
    return -1;
  const int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() / type.getDimSize(0) * bits / 8;
}

int prefetchInRowLoop(mlir::scf::ParallelOp rows, int64_t minRowBytes) {
  mlir::Value row = rows.getInductionVars()[0];
  llvm::SmallVector<mlir::scf::ForOp> passes;
  for (mlir::Operation &op : rows.getBody()->without_terminator())
    if (auto loop = llvm::dyn_cast<mlir::scf::ForOp>(op))
      passes.push_back(loop);
  if (passes.size() < 2)
    return 0;
  mlir::scf::ForOp loop = heaviestLaterLoop(passes);
  if (!loop)
    return 0;
  llvm::SmallVector<mlir::memref::LoadOp> loads;
  for (auto load : loop.getBody()->getOps<mlir::memref::LoadOp>()) {
    mlir::ValueRange indices = load.getIndices();
    if (indices.empty() || indices.front() != row || rowBytes(load.getMemRefType()) < minRowBytes)
      continue;
    // One element per iteration: the last index varies with the loop.
    mlir::Value inner = indices.back();
    mlir::Operation *def = inner.getDefiningOp();
    if (inner != loop.getInductionVar() && !(def && loop->isAncestor(def)))
      continue;
    mlir::BlockArgument root = rootArgument(load.getMemRef());
    if (!root || maybeWritten(root))
      continue;
    if (llvm::any_of(loads, [&](mlir::memref::LoadOp l) { return l.getMemRef() == load.getMemRef(); }))
      continue;
    loads.push_back(load);
  }
  // The next row's index, once per row and number of rows.
  llvm::DenseMap<int64_t, mlir::Value> nextRows;
  mlir::OpBuilder b(rows.getBody(), rows.getBody()->begin());
  for (mlir::memref::LoadOp load : loads) {
    const int64_t numRows = load.getMemRefType().getDimSize(0);
    mlir::Value &next = nextRows[numRows];
    if (!next) {
      mlir::Location loc = rows.getLoc();
      mlir::Value one = mlir::arith::ConstantIndexOp::create(b, loc, 1);
      mlir::Value last = mlir::arith::ConstantIndexOp::create(b, loc, numRows - 1);
      next = mlir::arith::MinUIOp::create(b, loc, mlir::arith::AddIOp::create(b, loc, row, one), last);
    }
    llvm::SmallVector<mlir::Value> indices(load.getIndices());
    indices.front() = next;
    mlir::OpBuilder at(load);
    mlir::memref::PrefetchOp::create(at, load.getLoc(), load.getMemRef(), indices, /*isWrite=*/false,
                                     /*localityHint=*/3, /*isDataCache=*/true);
  }
  return static_cast<int>(loads.size());
}

// LLVM side: a prefetch in a loop hidden from the vectoriser as a call to a
// marker with vector variants (VFABI), then restored one per vector call.
constexpr const char *kMarker = "kiln_prefetch_marker";
constexpr unsigned kMarkerLanes[] = {2, 4, 8, 16, 32, 64};

/// A read prefetch of data into all cache levels: the kind prefetchNextRows
/// makes (llvm.prefetch(p, rw 0, locality 3, data 1)).
bool isNextRowKind(const llvm::IntrinsicInst *call) {
  auto constant = [&](unsigned i) { return llvm::cast<llvm::ConstantInt>(call->getArgOperand(i))->getZExtValue(); };
  return call->getIntrinsicID() == llvm::Intrinsic::prefetch && constant(1) == 0 && constant(2) == 3 &&
         constant(3) == 1;
}

std::string variantName(unsigned lanes) { return std::string(kMarker) + "_v" + std::to_string(lanes); }

/// The marker (no memory effects, yet not removable: it does not promise
/// to return) and its vector variants, declared in `module`.
llvm::Function *declareMarker(llvm::Module &module) {
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *ptr = llvm::PointerType::get(context, 0);
  auto *markerType = llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr}, false);
  auto *marker = llvm::cast<llvm::Function>(module.getOrInsertFunction(kMarker, markerType).getCallee());
  marker->setDoesNotThrow();
  marker->setDoesNotAccessMemory();
  for (unsigned lanes : kMarkerLanes) {
    auto *vectorType = llvm::FunctionType::get(llvm::Type::getVoidTy(context),
                                               {llvm::FixedVectorType::get(ptr, lanes)}, false);
    module.getOrInsertFunction(variantName(lanes), vectorType);
  }
  return marker;
}

/// The call attribute that names the variants (_ZGV_LLVM_N<lanes>v_...).
std::string variantAttribute() {
  std::string mappings;
  for (unsigned lanes : kMarkerLanes) {
    if (!mappings.empty())
      mappings += ",";
    mappings += "_ZGV_LLVM_N" + std::to_string(lanes) + "v_" + kMarker + "(" + variantName(lanes) + ")";
  }
  return mappings;
}

struct HidePrefetches : llvm::PassInfoMixin<HidePrefetches> {
  llvm::PreservedAnalyses run(llvm::Function &f, llvm::FunctionAnalysisManager &) {
    llvm::SmallVector<llvm::IntrinsicInst *> prefetches;
    for (llvm::Instruction &inst : llvm::instructions(f))
      if (auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst); call && isNextRowKind(call))
        prefetches.push_back(call);
    if (prefetches.empty())
      return llvm::PreservedAnalyses::all();
    llvm::Function *marker = declareMarker(*f.getParent());
    const std::string variants = variantAttribute();
    for (llvm::IntrinsicInst *prefetch : prefetches) {
      llvm::IRBuilder<> b(prefetch);
      llvm::CallInst *call = b.CreateCall(marker, {prefetch->getArgOperand(0)});
      call->addFnAttr(llvm::Attribute::get(f.getContext(), "vector-function-abi-variant", variants));
      prefetch->eraseFromParent();
    }
    return keptAnalyses(/*changed=*/true);
  }
};

struct RestorePrefetches : llvm::PassInfoMixin<RestorePrefetches> {
  llvm::PreservedAnalyses run(llvm::Function &f, llvm::FunctionAnalysisManager &) {
    llvm::Module &module = *f.getParent();
    llvm::SmallVector<llvm::CallInst *> markers;
    for (llvm::Instruction &inst : llvm::instructions(f)) {
      auto *call = llvm::dyn_cast<llvm::CallInst>(&inst);
      if (call && call->getCalledFunction() && call->getCalledFunction()->getName().starts_with(kMarker))
        markers.push_back(call);
    }
    if (markers.empty())
      return llvm::PreservedAnalyses::all();
    for (llvm::CallInst *call : markers) {
      llvm::IRBuilder<> b(call);
      llvm::Value *address = call->getArgOperand(0);
      // A vector call covers its lanes' consecutive elements: a line (or
      // part of one) from its first lane on.
      if (address->getType()->isVectorTy())
        address = b.CreateExtractElement(address, uint64_t{0});
      b.CreateIntrinsic(llvm::Intrinsic::prefetch, {address->getType()},
                        {address, b.getInt32(0), b.getInt32(3), b.getInt32(1)});
      call->eraseFromParent();
    }
    if (llvm::Function *marker = module.getFunction(kMarker); marker && marker->use_empty())
      marker->eraseFromParent();
    for (unsigned lanes : kMarkerLanes)
      if (llvm::Function *variant = module.getFunction(variantName(lanes)); variant && variant->use_empty())
        variant->eraseFromParent();
    return keptAnalyses(/*changed=*/true);
  }
};

} // namespace

int prefetchNextRows(mlir::func::FuncOp fn, int64_t minRowBytes) {
  llvm::SmallVector<mlir::scf::ParallelOp> rowLoops;
  fn.walk([&](mlir::scf::ParallelOp loop) {
    if (loop.getNumLoops() == 1)
      rowLoops.push_back(loop);
  });
  int added = 0;
  for (mlir::scf::ParallelOp rows : rowLoops)
    added += prefetchInRowLoop(rows, minRowBytes);
  return added;
}

void registerPrefetchPasses(llvm::PassBuilder &pb) {
  registerPass<HidePrefetches>(pb, "kiln-hide-prefetches");
  registerPass<RestorePrefetches>(pb, "kiln-restore-prefetches");
}

} // namespace kiln::jit::cpu
