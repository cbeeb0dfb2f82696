//===- StreamingStores.cpp - Large outputs written past the caches -------===//

#include "jit/targets/cpu/StreamingStores.h"

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
  llvm::SmallVector<mlir::Value> work{root};
  while (!work.empty()) {
    mlir::Value v = work.pop_back_val();
    for (mlir::OpOperand &use : v.getUses()) {
      mlir::Operation *user = use.getOwner();
      if (auto store = llvm::dyn_cast<mlir::memref::StoreOp>(user)) {
        if (use.get() != store.getMemRef())
          return false;  // the buffer's address is the stored value
        stores.push_back(store);
        continue;
      }
      auto view = llvm::dyn_cast<mlir::ViewLikeOpInterface>(user);
      if (!view || view.getViewSource() != v)
        return false;
      for (mlir::Value result : user->getResults())
        work.push_back(result);
    }
  }
  return true;
}

/// Whether the loop around `store` computes enough per element that the
/// memory traffic a streaming store saves does not bound it (chain8's tanh
/// and sigmoid polynomials: ~55 operations; its streaming stores, split
/// into 8-byte pieces where their alignment is unknown, made it 10 %
/// slower, while fma3's 5 operations ran 25 % faster).
bool computeBound(mlir::memref::StoreOp store) {
  mlir::Block *body = store->getBlock();
  int64_t ops = 0;
  body->walk([&](mlir::Operation *) { ++ops; });
  return ops > kStreamingMaxLoopOps;
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
/// an element's alignment. The bases those stores address are arguments or
/// values the entry block loads (the parallel body's trampoline reads its
/// buffers there), so the function tests them once on entry: when all are
/// aligned, it calls a clone that knows it (an `llvm.assume` per base) and
/// where LLVM's InferAlignment proves each store of a row or a block aligned
/// (`vmovntps`); otherwise its own body runs, as before. A softmax
/// [4096, 1024] whose exp row stays in an L1 row buffer and streams out:
/// 1.24 -> 1.08 ms, a layer_norm 0.64 -> 0.53 ms (2-core Zen 3).
struct AlignStreamingStores : llvm::PassInfoMixin<AlignStreamingStores> {
  llvm::PreservedAnalyses run(llvm::Module &module, llvm::ModuleAnalysisManager &mam) {
    llvm::SmallVector<llvm::Function *> candidates;
    for (llvm::Function &f : module)
      if (!f.isDeclaration())
        candidates.push_back(&f);
    bool changed = false;
    for (llvm::Function *f : candidates)
      changed |= version(*f, mam);
    return changed ? llvm::PreservedAnalyses::none() : llvm::PreservedAnalyses::all();
  }

 private:
  static bool isStreamingVectorStore(const llvm::Instruction &inst, uint64_t *bytes) {
    const auto *store = llvm::dyn_cast<llvm::StoreInst>(&inst);
    if (!store || !store->getMetadata(llvm::LLVMContext::MD_nontemporal))
      return false;
    llvm::Type *type = store->getValueOperand()->getType();
    if (!type->isVectorTy())
      return false;
    *bytes = store->getModule()->getDataLayout().getTypeStoreSize(type).getFixedValue();
    return llvm::isPowerOf2_64(*bytes) && store->getAlign().value() < *bytes;
  }

  static bool version(llvm::Function &f, llvm::ModuleAnalysisManager &mam) {
    // The bases of the under-aligned vector streaming stores, and the
    // alignment they need (the widest store's size).
    llvm::SmallSetVector<llvm::Value *, 4> bases;
    uint64_t needed = 0;
    for (llvm::BasicBlock &block : f)
      for (llvm::Instruction &inst : block) {
        uint64_t bytes = 0;
        if (!isStreamingVectorStore(inst, &bytes))
          continue;
        llvm::Value *base = llvm::getUnderlyingObject(llvm::cast<llvm::StoreInst>(inst).getPointerOperand());
        auto *defined = llvm::dyn_cast<llvm::Instruction>(base);
        if (!llvm::isa<llvm::Argument>(base) && !(defined && defined->getParent() == &f.getEntryBlock()))
          return false;  // a base the entry cannot test
        bases.insert(base);
        needed = std::max(needed, bytes);
      }
    if (bases.empty())
      return false;

    // The clone that may assume it.
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
      b.CreateAlignmentAssumption(module(f).getDataLayout(), copy, needed);
    }
    auto &fam = mam.getResult<llvm::FunctionAnalysisManagerModuleProxy>(module(f)).getManager();
    llvm::InferAlignmentPass().run(*aligned, fam);
    fam.clear(*aligned, aligned->getName());
    // Worth a test only where LLVM proved a store aligned (a row loop's
    // stores, not those of a chunk that starts anywhere).
    bool proven = false;
    for (llvm::BasicBlock &block : *aligned)
      for (llvm::Instruction &inst : block)
        if (const auto *store = llvm::dyn_cast<llvm::StoreInst>(&inst);
            store && store->getMetadata(llvm::LLVMContext::MD_nontemporal) &&
            store->getValueOperand()->getType()->isVectorTy() &&
            store->getAlign().value() >= module(f).getDataLayout().getTypeStoreSize(store->getValueOperand()->getType()))
          proven = true;
    if (!proven) {
      aligned->eraseFromParent();
      return false;
    }

    // The test, where the last base is known (the entry's loads come first).
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
      if (auto *alloca = llvm::dyn_cast<llvm::AllocaInst>(&inst); alloca && !alloca->isStaticAlloca() &&
                                                                 llvm::isa<llvm::ConstantInt>(alloca->getArraySize()))
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
    b.SetInsertPoint(call);
    llvm::SmallVector<llvm::Value *> args;
    for (llvm::Argument &arg : f.args())
      args.push_back(&arg);
    llvm::CallInst *result = b.CreateCall(aligned, args);
    if (f.getReturnType()->isVoidTy())
      b.CreateRetVoid();
    else
      b.CreateRet(result);
    return true;
  }

  static llvm::Module &module(llvm::Function &f) { return *f.getParent(); }
};

} // namespace

void registerStreamingStorePasses(llvm::PassBuilder &pb) {
  pb.registerPipelineParsingCallback(
      [](llvm::StringRef name, llvm::FunctionPassManager &fpm, llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
        if (name == "kiln-hide-nontemporal") {
          fpm.addPass(HideNontemporal());
          return true;
        }
        if (name == "kiln-restore-nontemporal") {
          fpm.addPass(RestoreNontemporal());
          return true;
        }
        return false;
      });
  pb.registerPipelineParsingCallback(
      [](llvm::StringRef name, llvm::ModulePassManager &mpm, llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
        if (name == "kiln-align-streaming-stores") {
          mpm.addPass(AlignStreamingStores());
          return true;
        }
        return false;
      });
}

int markStreamingStores(mlir::func::FuncOp fn, unsigned numInputs, unsigned numOutputs, int64_t minBytes) {
  if (fn.isExternal() || numInputs + numOutputs > fn.getNumArguments())
    return 0;
  int marked = 0;
  for (unsigned i = numInputs; i < numInputs + numOutputs; ++i) {
    auto type = llvm::dyn_cast<mlir::MemRefType>(fn.getArgument(i).getType());
    if (!type || !type.hasStaticShape() || !type.getElementType().isIntOrFloat())
      continue;
    const int64_t bits = type.getElementType().getIntOrFloatBitWidth();
    if (bits % 8 != 0 || type.getNumElements() * (bits / 8) < minBytes)
      continue;
    llvm::SmallVector<mlir::memref::StoreOp> stores;
    if (!collectStores(fn.getArgument(i), stores))
      continue;
    for (mlir::memref::StoreOp store : stores) {
      if (computeBound(store))
        continue;
      store.setNontemporal(true);
      ++marked;
    }
  }
  return marked;
}

} // namespace kiln::jit::cpu
