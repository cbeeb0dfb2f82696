//===- CpuTransforms.h - Kiln's own steps of the CPU pipeline ---*- C++ -*-===//
//
// The steps of the CPU pipeline that upstream MLIR does not provide: scratch
// memory from the runtime instead of malloc, matmul through the runtime's
// packed GEMM, parallel loops outlined into bodies that the runtime's TBB
// pool runs (kiln_rt_parallel_for), and the `void(void** args)` entry.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_CPUTRANSFORMS_H
#define KILN_JIT_TARGETS_CPU_CPUTRANSFORMS_H

#include <cstdint>
#include <map>
#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::jit::cpu {

/// Replaces every memref.alloc in `kernel` by a view into one new trailing
/// argument (the scratch buffer the runtime passes), so kernels never call
/// malloc. Fails on a dynamic or non-identity allocation, or one inside a
/// loop. `scratchBytes` receives the buffer size (0: no argument added).
mlir::LogicalResult assignScratch(mlir::func::FuncOp kernel, int64_t &scratchBytes);

/// Gives every result of `kernel` its own tensor: a value returned twice, a
/// returned argument or a returned constant becomes a linalg.copy, so each
/// output buffer is written exactly once (bufferization to out-params needs
/// that).
void makeResultsDistinct(mlir::func::FuncOp kernel);

/// Rewrites f32 linalg.matmul / linalg.batch_matmul on memrefs into calls of
/// the runtime's packed GEMM, kiln_rt_matmul_f32.
mlir::LogicalResult matmulToRuntimeCalls(mlir::ModuleOp module);

/// Expands tanh, exp, log, erf, ... on f32 into polynomial approximations
/// that LLVM vectorises (libm calls would stay scalar).
mlir::LogicalResult approximateMath(mlir::ModuleOp module);

/// What outlineParallelLoops made: for each dispatch declaration, the body
/// function it runs and the grain size.
struct ParallelDispatch {
  std::string body;
  int64_t grain;
};
using ParallelDispatches = std::map<std::string, ParallelDispatch>;

/// Moves each top-level scf.parallel of `kernel` (from 0 by 1 to a constant
/// on its first dimension) into a function `<kernel>_par<i>(begin, end,
/// kernel args...)` and calls a declaration `__kiln_parallel_<i>(n, kernel
/// args...)` in its place. `loopNests` receives the number of top-level loop
/// nests and runtime calls (the fused kernels).
mlir::LogicalResult outlineParallelLoops(mlir::ModuleOp module, mlir::func::FuncOp kernel,
                                         ParallelDispatches &dispatches, int &loopNests);

/// After conversion to the LLVM dialect (bare-pointer memrefs): turns each
/// `__kiln_parallel_<i>` call into kiln_rt_parallel_for over a trampoline,
/// adds the `void <entry>(void** args)` entry that calls `kernelName`, marks
/// pointer arguments noalias and every other function internal.
mlir::LogicalResult finalizeLLVMModule(mlir::ModuleOp module, const std::string &kernelName,
                                       const std::string &entryName, const ParallelDispatches &dispatches);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_CPUTRANSFORMS_H
