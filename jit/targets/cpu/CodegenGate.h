//===- CodegenGate.h - LLVM codegen passes Kiln's kernels skip ---*- C++ -*-===//
//
// An llvm::OptPassGate set on each compilation's LLVMContext, so nothing
// else in the process changes:
//  - Loop Strength Reduction, everywhere. It was a third of codegen's time on
//    large traces (0.25 of 0.8 s on the 800-op training step: all the
//    trace's serial loops share one function), and turning it off changed
//    neither that step's time (1 thread, 5 alternating runs each: medians
//    16.4-20.3 ms with, 16.5-19.8 ms without) nor the tests' results: the
//    loops index memrefs with x86's base+index*scale addressing either way.
//  - The machine scheduler (before register allocation) in functions that
//    hold a latency-bound element loop (ParallelLoops.h: four or eight vector
//    iterations interleaved). It spreads the four copies' long chains of
//    math over more live registers than the target has, and the spills cost
//    more than its schedule gains on an out-of-order core: chain8 (2^24 f32,
//    2 threads, AVX2 Zen 3) ran in 8.54 ms without it instead of 9.70, 0.99
//    of Eigen instead of 0.88 (5 alternating runs). Skipped everywhere it
//    cost softmax 3-4 % and left the transformer step's time as it was.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_CODEGENGATE_H
#define KILN_JIT_TARGETS_CPU_CODEGENGATE_H

#include <set>
#include <string>

#include "llvm/IR/Module.h"
#include "llvm/IR/OptBisect.h"

namespace kiln::jit::cpu {

/// The function attribute markLatencyBound sets (it survives LLVM's passes
/// and bitcode, so a Quick compile's kept modules carry it).
inline constexpr const char *kUnscheduledAttr = "kiln-unscheduled";

class KernelPassGate final : public llvm::OptPassGate {
public:
  /// Marks with kUnscheduledAttr the functions of `module`, before LLVM's
  /// passes, that hold a loop asking for four or more interleaved vector
  /// iterations, and the functions that call them (LLVM inlines a parallel
  /// body into its trampoline). Returns the number marked.
  static int markLatencyBound(llvm::Module &module);
  /// The machine scheduler skips `module`'s functions that carry
  /// kUnscheduledAttr (call before codegen, after LLVM's passes).
  void noteModule(const llvm::Module &module);

  bool isEnabled() const override { return true; }
  bool shouldRunPass(llvm::StringRef pass, llvm::StringRef ir) const override;

private:
  std::set<std::string, std::less<>> unscheduled_;
};

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_CODEGENGATE_H
