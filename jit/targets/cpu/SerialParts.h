//===- SerialParts.h - A large kernel's serial code in parts ---*- C++ -*-===//
//
// A whole training step compiles into one kernel function whose serial part
// (small loops, runtime calls, dispatches) holds most of the trace: on the
// 800-op transformer step, 16,700 of 21,400 lines of LLVM IR in one
// function. LLVM's optimisation and code generation cost more than
// linearly in a function's size (SCEV and dominance queries walk every
// dominating loop guard), and one function cannot be optimised on two
// threads. This step cuts that serial code into parts of about a given size,
// each a private function that takes the kernel arguments it reads, which the
// kernel calls in order: the same operations in the same order on the same
// buffers, with the same aliasing facts (the parts' arguments get the
// kernel's noalias marks; finalizeLLVMModule in CpuTransforms.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_SERIALPARTS_H
#define KILN_JIT_TARGETS_CPU_SERIALPARTS_H

#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::jit::cpu {

/// Moves runs of `kernel`'s top-level operations into private functions
/// `<kernel>_part<i>(kernel args it reads..., live-ins...)` of at least `partOps`
/// nested operations each, and calls them in their place. A run ends only
/// where no value it defines is used after it. Pure operations without
/// regions (constants, views) stay in the kernel and are cloned into each
/// part that uses them; a part's other live-ins (row buffers on the stack,
/// scalars) become extra arguments. Kernels of fewer than 2 * `partOps`
/// operations are left whole. Returns the parts' names, in call order.
std::vector<std::string> outlineSerialParts(mlir::ModuleOp module, mlir::func::FuncOp kernel, int64_t partOps);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_SERIALPARTS_H
