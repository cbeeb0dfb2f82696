//===- CodegenGate.cpp - LLVM codegen passes Kiln's kernels skip -*- C++ -*-===//

#include "jit/targets/cpu/CodegenGate.h"

#include "jit/targets/cpu/ParallelLoops.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Metadata.h"

namespace kiln::jit::cpu {

namespace {

/// The interleave count a loop's `!llvm.loop` metadata asks for (0: none).
uint64_t interleaveCount(llvm::MDNode *loopID) {
  const llvm::MDNode *option = llvm::findOptionMDForLoopID(loopID, "llvm.loop.interleave.count");
  if (!option || option->getNumOperands() != 2)
    return 0;
  const auto *value = llvm::mdconst::dyn_extract<llvm::ConstantInt>(option->getOperand(1));
  return value ? value->getZExtValue() : 0;
}

bool holdsLatencyBoundLoop(const llvm::Function &f) {
  for (const llvm::BasicBlock &block : f) {
    const llvm::Instruction *branch = block.getTerminator();
    llvm::MDNode *loopID = branch ? branch->getMetadata(llvm::LLVMContext::MD_loop) : nullptr;
    if (loopID && interleaveCount(loopID) >= static_cast<uint64_t>(kLatencyBoundCopies))
      return true;
  }
  return false;
}

bool callsMarked(const llvm::Function &f) {
  for (const llvm::BasicBlock &block : f)
    for (const llvm::Instruction &inst : block)
      if (const auto *call = llvm::dyn_cast<llvm::CallBase>(&inst))
        if (const llvm::Function *callee = call->getCalledFunction(); callee && callee->hasFnAttribute(kUnscheduledAttr))
          return true;
  return false;
}

} // namespace

int KernelPassGate::markLatencyBound(llvm::Module &module) {
  int marked = 0;
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && holdsLatencyBoundLoop(f)) {
      f.addFnAttr(kUnscheduledAttr);
      ++marked;
    }
  // Callers of marked functions, until none is new.
  for (bool grew = marked > 0; grew;) {
    grew = false;
    for (llvm::Function &f : module)
      if (!f.isDeclaration() && !f.hasFnAttribute(kUnscheduledAttr) && callsMarked(f)) {
        f.addFnAttr(kUnscheduledAttr);
        ++marked;
        grew = true;
      }
  }
  return marked;
}

void KernelPassGate::noteModule(const llvm::Module &module) {
  for (const llvm::Function &f : module)
    if (f.hasFnAttribute(kUnscheduledAttr))
      unscheduled_.insert(f.getName().str());
}

bool KernelPassGate::shouldRunPass(llvm::StringRef pass, llvm::StringRef ir) const {
  if (pass == "Loop Strength Reduction")
    return false;
  // A machine function pass describes its function as "function (<name>)".
  if (pass == "machine-scheduler" && ir.consume_front("function (") && ir.consume_back(")"))
    return !unscheduled_.contains(ir);
  return true;
}

} // namespace kiln::jit::cpu
