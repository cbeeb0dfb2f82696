//===- StreamingStores.cpp - Large outputs written past the caches -------===//

#include "jit/targets/cpu/StreamingStores.h"
#include "jit/targets/cpu/LlvmPassRegistration.h"

#include <algorithm>

#include "jit/targets/cpu/MemoryExtent.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/Scalar/InferAlignment.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"

namespace kiln::jit::cpu {

namespace {

/// The stores into `root` and every view of it; false when anything else
/// uses one of them.
bool collectStores(mlir::Value root, llvm::SmallVectorImpl<mlir::memref::StoreOp> &stores) {
  return allUsesThroughViews(root, [&](mlir::OpOperand &use) {
    auto store = llvm::dyn_cast<mlir::memref::StoreOp>(use.getOwner());
    if (!store || use.get() != store.getMemRef())
      return false;  // not a store, or the buffer's address is the stored value
    stores.push_back(store);
    return true;
  });
}

/// Whether `store` may stream: a loop body of at most kStreamingMaxLoopOps
/// operations, or one whose vector stores the alignment versioning can
/// align: into a rank-1 memref (a flat loop, whose chunks start at
/// multiples of 16 elements) or one whose rows are whole 64-byte lines.
bool streamable(mlir::memref::StoreOp store) {
  mlir::Block *body = store->getBlock();
  int64_t ops = 0;
  body->walk([&](mlir::Operation *) { ++ops; });
  if (ops <= kStreamingMaxLoopOps)
    return true;
  mlir::MemRefType type = store.getMemRefType();
  if (type.getRank() <= 1)
    return true;
  const int64_t row = type.getShape().back();
  const mlir::Type element = type.getElementType();
  if (mlir::ShapedType::isDynamic(row) || !element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return false;
  return row * (element.getIntOrFloatBitWidth() / 8) % 64 == 0;
}

/// The alias scope that stands for `!nontemporal` while loops vectorise
/// (named, so every module and context finds the same one).
llvm::MDNode *streamingScope(llvm::LLVMContext &context) {
  llvm::MDBuilder md(context);
  return md.createAliasScope("kiln.streaming.store", md.createAliasScopeDomain("kiln.streaming"));
}

struct HideNontemporal : llvm::PassInfoMixin<HideNontemporal> {
  llvm::PreservedAnalyses run(llvm::Function &f, llvm::FunctionAnalysisManager &) {
    llvm::LLVMContext &context = f.getContext();
    llvm::MDNode *scopeList = nullptr;  // built at the first marked store
    bool changed = false;
    for (llvm::BasicBlock &block : f)
      for (llvm::Instruction &inst : block) {
        auto *store = llvm::dyn_cast<llvm::StoreInst>(&inst);
        if (!store || !store->getMetadata(llvm::LLVMContext::MD_nontemporal) ||
            store->getValueOperand()->getType()->isVectorTy())
          continue;
        if (!scopeList)
          scopeList = llvm::MDNode::get(context, {streamingScope(context)});
        store->setMetadata(llvm::LLVMContext::MD_nontemporal, nullptr);
        store->setMetadata(llvm::LLVMContext::MD_alias_scope,
                           llvm::MDNode::concatenate(store->getMetadata(llvm::LLVMContext::MD_alias_scope), scopeList));
        changed = true;
      }
    return changed ? llvm::PreservedAnalyses::none() : llvm::PreservedAnalyses::all();
  }
};

struct RestoreNontemporal : llvm::PassInfoMixin<RestoreNontemporal> {
  llvm::PreservedAnalyses run(llvm::Function &f, llvm::FunctionAnalysisManager &) {
    llvm::LLVMContext &context = f.getContext();
    llvm::MDNode *scope = streamingScope(context);
    llvm::MDNode *nontemporal = llvm::MDNode::get(
        context, llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(context), 1)));
    bool changed = false;
    for (llvm::BasicBlock &block : f)
      for (llvm::Instruction &inst : block) {
        auto *store = llvm::dyn_cast<llvm::StoreInst>(&inst);
        llvm::MDNode *scopes = store ? store->getMetadata(llvm::LLVMContext::MD_alias_scope) : nullptr;
        if (!scopes || llvm::find(scopes->operands(), scope) == scopes->op_end())
          continue;
        llvm::SmallVector<llvm::Metadata *> rest;
        for (const llvm::MDOperand &s : scopes->operands())
          if (s.get() != scope)
            rest.push_back(s.get());
        store->setMetadata(llvm::LLVMContext::MD_alias_scope, rest.empty() ? nullptr : llvm::MDNode::get(context, rest));
        store->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
        changed = true;
      }
    if (!changed)
      return llvm::PreservedAnalyses::all();
    fenceBeforeReturns(f);
    return llvm::PreservedAnalyses::none();
  }

  /// Streaming stores are weakly ordered: the function fences them before it
  /// returns, so what it wrote is visible to whichever thread reads it next
  /// (a parallel body returns to the runtime's loop at the end of each
  /// chunk, a kernel to its caller). Only the functions that have them pay.
  static void fenceBeforeReturns(llvm::Function &f) {
    llvm::Module &module = *f.getParent();
    for (llvm::BasicBlock &block : f) {
      auto *ret = llvm::dyn_cast<llvm::ReturnInst>(block.getTerminator());
      if (!ret)
        continue;
      if (module.getTargetTriple().isX86())
        llvm::CallInst::Create(llvm::Intrinsic::getOrInsertDeclaration(&module, llvm::Intrinsic::x86_sse_sfence), {},
                               "", ret->getIterator());
      else
        new llvm::FenceInst(f.getContext(), llvm::AtomicOrdering::SequentiallyConsistent, llvm::SyncScope::System,
                            ret->getIterator());
    }
  }
};

/// Versions each function whose vector streaming stores are not known to be
/// aligned. A non-temporal vector store needs an address aligned to its
/// size: x86 writes an unaligned one as 8-byte `movntsd` pieces on AMD
/// (SSE4A) and as a plain store elsewhere, and the loop vectoriser only knows
/// an element's alignment. The buffers those stores address are arguments
/// or pointers the entry block loads first (the parallel body's trampoline
/// reads them from its argument array), so the function tests them once:
/// when all are aligned it tail-calls a clone that knows it (an
/// `llvm.assume` per buffer) and in which LLVM's InferAlignment proves the
/// stores of row loops, and of flat loops whose chunks start aligned
/// (ParallelChunks.h), aligned (`vmovntps`); otherwise its own body runs,
/// as before.
struct AlignStreamingStores : llvm::PassInfoMixin<AlignStreamingStores> {
  llvm::PreservedAnalyses run(llvm::Module &module, llvm::ModuleAnalysisManager &mam) {
    if (!module.getTargetTriple().isX86())
      return llvm::PreservedAnalyses::all();
    llvm::SmallVector<llvm::Function *> candidates;
    for (llvm::Function &f : module)
      if (!f.isDeclaration() && !f.isVarArg())
        candidates.push_back(&f);
    bool changed = false;
    for (llvm::Function *f : candidates)
      changed |= version(*f, mam);
    return changed ? llvm::PreservedAnalyses::none() : llvm::PreservedAnalyses::all();
  }

 private:
  /// Bytes of the widest vector the host stores at once (zmm).
  static constexpr uint64_t kMaxVectorBytes = 64;

  /// The size of `inst`'s vector when it is a streaming store below its
  /// size's alignment, else 0.
  static uint64_t underAlignedStreamingStore(const llvm::Instruction &inst) {
    const auto *store = llvm::dyn_cast<llvm::StoreInst>(&inst);
    if (!store || !store->getMetadata(llvm::LLVMContext::MD_nontemporal))
      return 0;
    auto *type = llvm::dyn_cast<llvm::FixedVectorType>(store->getValueOperand()->getType());
    if (!type)
      return 0;
    const uint64_t bytes = store->getDataLayout().getTypeStoreSize(type).getFixedValue();
    return llvm::isPowerOf2_64(bytes) && store->getAlign().value() < bytes ? bytes : 0;
  }

  /// Whether the clone's entry may recompute `base` and get the same
  /// pointer: an argument, or a plain load of one (through GEPs) before
  /// anything in the entry block writes memory.
  static bool recomputable(llvm::Value *base, llvm::Function &f) {
    if (llvm::isa<llvm::Argument>(base))
      return true;
    auto *load = llvm::dyn_cast<llvm::LoadInst>(base);
    if (!load || !load->isSimple() || load->getParent() != &f.getEntryBlock() ||
        !llvm::isa<llvm::Argument>(llvm::getUnderlyingObject(load->getPointerOperand())))
      return false;
    for (llvm::Instruction &inst : f.getEntryBlock()) {
      if (&inst == load)
        return true;
      if (inst.mayWriteToMemory() || inst.mayHaveSideEffects())
        return false;
    }
    return false;
  }

  static bool version(llvm::Function &f, llvm::ModuleAnalysisManager &mam) {
    // The buffers of the under-aligned vector streaming stores, and the
    // alignment they need (the widest store's size).
    llvm::SmallSetVector<llvm::Value *, 4> bases;
    llvm::SmallVector<llvm::StoreInst *> stores;
    uint64_t needed = 0;
    for (llvm::BasicBlock &block : f)
      for (llvm::Instruction &inst : block) {
        const uint64_t bytes = underAlignedStreamingStore(inst);
        if (bytes == 0)
          continue;
        auto *store = llvm::cast<llvm::StoreInst>(&inst);
        llvm::Value *base = llvm::getUnderlyingObject(store->getPointerOperand());
        if (bytes > kMaxVectorBytes || !recomputable(base, f))
          return false;  // a buffer the entry cannot test, or no allocation is that aligned
        bases.insert(base);
        stores.push_back(store);
        needed = std::max(needed, bytes);
      }
    if (bases.empty())
      return false;

    // The clone that may assume it.
    llvm::Module &module = *f.getParent();
    llvm::ValueToValueMapTy map;
    llvm::Function *aligned = llvm::CloneFunction(&f, map);
    aligned->setName(f.getName() + ".aligned_streaming");
    aligned->setLinkage(llvm::GlobalValue::InternalLinkage);
    for (llvm::Value *base : bases) {
      llvm::Value *copy = map[base];
      llvm::IRBuilder<> b(f.getContext());
      if (auto *inst = llvm::dyn_cast<llvm::Instruction>(copy))
        b.SetInsertPoint(inst->getNextNode());
      else
        b.SetInsertPoint(aligned->getEntryBlock().getFirstInsertionPt());
      b.CreateAlignmentAssumption(module.getDataLayout(), copy, needed);
    }
    auto &fam = mam.getResult<llvm::FunctionAnalysisManagerModuleProxy>(module).getManager();
    llvm::InferAlignmentPass().run(*aligned, fam);
    fam.clear(*aligned, aligned->getName());
    // Worth a test only where LLVM proved one of those stores aligned (not
    // one of a chunk that may start anywhere).
    const bool proven = llvm::any_of(stores, [&](llvm::StoreInst *store) {
      return underAlignedStreamingStore(*llvm::cast<llvm::StoreInst>(map[store])) == 0;
    });
    if (!proven) {
      aligned->eraseFromParent();
      return false;
    }

    // The test, after the last base the entry block loads.
    llvm::Instruction *after = nullptr;
    for (llvm::Value *base : bases)
      if (auto *inst = llvm::dyn_cast<llvm::Instruction>(base))
        if (!after || after->comesBefore(inst))
          after = inst;
    llvm::BasicBlock *entry = &f.getEntryBlock();
    llvm::BasicBlock::iterator split = after ? std::next(after->getIterator()) : entry->getFirstInsertionPt();
    llvm::BasicBlock *body = llvm::SplitBlock(entry, split);
    // Static allocas stay in the entry block (elsewhere they are dynamic).
    for (llvm::Instruction &inst : llvm::make_early_inc_range(*body))
      if (auto *alloca = llvm::dyn_cast<llvm::AllocaInst>(&inst);
          alloca && !alloca->isStaticAlloca() && llvm::isa<llvm::ConstantInt>(alloca->getArraySize()))
        alloca->moveBefore(entry->getFirstInsertionPt());
    llvm::BasicBlock *call = llvm::BasicBlock::Create(f.getContext(), "aligned", &f, body);
    entry->getTerminator()->eraseFromParent();
    llvm::IRBuilder<> b(entry);
    llvm::Value *low = nullptr;
    for (llvm::Value *base : bases) {
      llvm::Value *bits = b.CreateAnd(b.CreatePtrToInt(base, b.getInt64Ty()), needed - 1);
      low = low ? b.CreateOr(low, bits) : bits;
    }
    b.CreateCondBr(b.CreateICmpEQ(low, b.getInt64(0)), call, body);
    // A tail call: f's frame (its row buffers) is not kept under the clone's.
    b.SetInsertPoint(call);
    llvm::SmallVector<llvm::Value *> args;
    for (llvm::Argument &arg : f.args())
      args.push_back(&arg);
    llvm::CallInst *result = b.CreateCall(aligned, args);
    result->setCallingConv(f.getCallingConv());
    llvm::SmallVector<llvm::AttributeSet> argAttrs;
    for (unsigned i = 0; i < f.arg_size(); ++i)
      argAttrs.push_back(f.getAttributes().getParamAttrs(i));
    result->setAttributes(llvm::AttributeList::get(f.getContext(), llvm::AttributeSet(),
                                                   f.getAttributes().getRetAttrs(), argAttrs));
    result->setTailCallKind(llvm::CallInst::TCK_MustTail);
    if (f.getReturnType()->isVoidTy())
      b.CreateRetVoid();
    else
      b.CreateRet(result);
    return true;
  }
};

} // namespace

void registerStreamingStorePasses(llvm::PassBuilder &pb) {
  registerPass<HideNontemporal>(pb, "kiln-hide-nontemporal");
  registerPass<RestoreNontemporal>(pb, "kiln-restore-nontemporal");
  registerPass<AlignStreamingStores, llvm::ModulePassManager>(pb, "kiln-align-streaming-stores");
}

/// Bytes of a memref of static shape and int or float elements; -1 otherwise.
static int64_t staticBytes(mlir::Type type) {
  auto memref = llvm::dyn_cast<mlir::MemRefType>(type);
  if (!memref || !memref.hasStaticShape() || !memref.getElementType().isIntOrFloat())
    return -1;
  const int64_t bits = memref.getElementType().getIntOrFloatBitWidth();
  return bits % 8 == 0 ? memref.getNumElements() * (bits / 8) : -1;
}

int markStreamingStores(mlir::func::FuncOp fn, unsigned numInputs, unsigned numOutputs, int64_t minBytes,
                        int64_t minFootprintBytes) {
  if (fn.isExternal() || numInputs + numOutputs > fn.getNumArguments())
    return 0;
  int64_t footprint = 0;
  for (unsigned i = 0; i < numInputs + numOutputs; ++i)
    footprint += std::max<int64_t>(staticBytes(fn.getArgument(i).getType()), 0);
  if (footprint < minFootprintBytes)
    return 0;
  int marked = 0;
  for (unsigned i = numInputs; i < numInputs + numOutputs; ++i) {
    const int64_t bytes = staticBytes(fn.getArgument(i).getType());
    if (bytes < 0 || bytes < minBytes)
      continue;
    llvm::SmallVector<mlir::memref::StoreOp> stores;
    if (!collectStores(fn.getArgument(i), stores))
      continue;
    for (mlir::memref::StoreOp store : stores) {
      if (!streamable(store))
        continue;
      store.setNontemporal(true);
      ++marked;
    }
  }
  return marked;
}

} // namespace kiln::jit::cpu
