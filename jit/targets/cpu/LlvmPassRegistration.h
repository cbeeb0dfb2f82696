//===- LlvmPassRegistration.h - Kiln's LLVM passes by name ------*- C++ -*-===//
//
// Kiln's own LLVM IR passes are run by name (kKernelPassPipeline, HostTarget.h,
// and `opt` in their lit tests, LlvmPassPlugin.cpp): each is registered with a
// PassBuilder's pipeline parser under its name. keptAnalyses: what those
// that rewrite instructions but no branch report as kept.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_LLVMPASSREGISTRATION_H
#define KILN_JIT_TARGETS_CPU_LLVMPASSREGISTRATION_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Passes/PassBuilder.h"

namespace kiln::jit::cpu {

/// Registers the pass `Pass` as `name` (a string literal: the callback
/// keeps it) with `pb`'s pipeline parser, for pipelines of `PassManager`
/// (a function pass by default; llvm::ModulePassManager for a module pass).
template <class Pass, class PassManager = llvm::FunctionPassManager>
void registerPass(llvm::PassBuilder &pb, llvm::StringRef name) {
  pb.registerPipelineParsingCallback(
      [name](llvm::StringRef element, PassManager &pm, llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
        if (element != name)
          return false;
        pm.addPass(Pass());
        return true;
      });
}

/// What a pass that rewrote instructions but no branch keeps: the CFG
/// analyses (dominators, loops); all of them where it changed nothing.
inline llvm::PreservedAnalyses keptAnalyses(bool changed) {
  if (!changed)
    return llvm::PreservedAnalyses::all();
  llvm::PreservedAnalyses kept;
  kept.preserveSet<llvm::CFGAnalyses>();
  return kept;
}

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_LLVMPASSREGISTRATION_H
