//===- StreamingStores.cpp - Large outputs written past the caches -------===//

#include "jit/targets/cpu/StreamingStores.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"

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
