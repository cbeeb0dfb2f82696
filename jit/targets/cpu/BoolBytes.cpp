//===- BoolBytes.cpp - Bool elements loaded and stored as bytes -----------===//

#include "jit/targets/cpu/BoolBytes.h"
#include "jit/targets/cpu/LlvmPassRegistration.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"

namespace kiln::jit::cpu {
namespace {

struct BoolBytes : llvm::PassInfoMixin<BoolBytes> {
  llvm::PreservedAnalyses run(llvm::Function &fn, llvm::FunctionAnalysisManager &) {
    llvm::SmallVector<llvm::Instruction *> accesses;
    for (llvm::Instruction &inst : llvm::instructions(fn)) {
      // Atomic accesses keep their type (none are generated; their ordering
      // would have to be carried over).
      if (auto *load = llvm::dyn_cast<llvm::LoadInst>(&inst);
          load && load->getType()->isIntegerTy(1) && !load->isAtomic())
        accesses.push_back(load);
      else if (auto *store = llvm::dyn_cast<llvm::StoreInst>(&inst);
               store && store->getValueOperand()->getType()->isIntegerTy(1) && !store->isAtomic())
        accesses.push_back(store);
    }
    if (accesses.empty())
      return llvm::PreservedAnalyses::all();
    for (llvm::Instruction *inst : accesses) {
      llvm::IRBuilder<> b(inst);
      llvm::Type *byte = b.getInt8Ty();
      if (auto *load = llvm::dyn_cast<llvm::LoadInst>(inst)) {
        llvm::LoadInst *wide = b.CreateAlignedLoad(byte, load->getPointerOperand(), load->getAlign(),
                                                   load->isVolatile(), load->getName() + ".byte");
        wide->copyMetadata(*load);
        load->replaceAllUsesWith(b.CreateTrunc(wide, load->getType()));
      } else {
        auto *store = llvm::cast<llvm::StoreInst>(inst);
        llvm::Value *value = b.CreateZExt(store->getValueOperand(), byte);
        llvm::StoreInst *wide =
            b.CreateAlignedStore(value, store->getPointerOperand(), store->getAlign(), store->isVolatile());
        wide->copyMetadata(*store);
      }
      inst->eraseFromParent();
    }
    return keptAnalyses(/*changed=*/true);
  }
};

} // namespace

void registerBoolBytesPasses(llvm::PassBuilder &pb) {
  registerPass<BoolBytes>(pb, "kiln-bool-bytes");
}

} // namespace kiln::jit::cpu
