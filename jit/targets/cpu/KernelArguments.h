//===- KernelArguments.h - Outlined functions take what they read -*- C++ -*-===//
//
// Parallel bodies and serial parts are cut out of a kernel that takes every
// buffer of the trace (164 on the 800-op training step). Handing each of
// them all of those made signatures 40% of the loop-level IR of a training
// step, and every lowering to LLVM walked and rebuilt them: the function
// conversion alone took longer than any other pass. An outlined function
// keeps only the kernel arguments it reads, and records which they are,
// because noalias holds for a kernel argument by its position in the kernel
// (the donated pairs excepted; finalizeLLVMModule in CpuTransforms.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_KERNELARGUMENTS_H
#define KILN_JIT_TARGETS_CPU_KERNELARGUMENTS_H

#include <optional>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// On an outlined function: `array<i64: ...>`, the kernel argument each of
/// its leading kernel-argument parameters is.
inline constexpr const char *kKernelArgsAttr = "kiln.kernel_args";

/// `fn`'s parameters [first, first + count) are the kernel's arguments
/// 0..count-1. Erases those its body does not read from `fn`, the same
/// positions [calleeFirst, calleeFirst + count) from `callee` (the
/// declaration the kernel calls in `fn`'s place, or `fn` itself) and from
/// `call`, its one call, and records the kept ones as kKernelArgsAttr.
mlir::LogicalResult pruneKernelArguments(mlir::func::FuncOp fn, unsigned first, unsigned count,
                                         mlir::func::FuncOp callee, unsigned calleeFirst, mlir::func::CallOp call);

/// The kernel argument that parameter `param` of an outlined function with
/// kernel-argument parameters from `first` on is (kKernelArgsAttr on `fn`,
/// any function-like op); none for other parameters. Without the attribute
/// the function takes every kernel argument, in order.
std::optional<unsigned> kernelArgumentOf(mlir::Operation *fn, unsigned first, unsigned param);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_KERNELARGUMENTS_H
