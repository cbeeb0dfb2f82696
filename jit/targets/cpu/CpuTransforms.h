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
#include <set>
#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"

namespace kiln::jit::cpu {

/// Replaces every memref.alloc in `kernel` by a view into one new trailing
/// argument (the scratch buffer the runtime passes), so kernels never call
/// malloc. Fails on a non-identity allocation or one inside a loop, and on a
/// dynamic one unless `dynamicScratch` is given. `scratchBytes` receives the
/// size of the static part (0 with no allocation: no argument added).
/// Dynamic-shape kernels: allocations sized by the kernel's size arguments
/// follow the static part; `dynamicScratch` receives, per allocation, its
/// bytes per element of the dynamic extents, the number of those extents and
/// their size numbers (the runtime adds up each product, rounded up to 64).
/// With `shareDistance` >= 0, static temporaries whose lives do not come
/// within that many operations of each other share bytes (ScratchLayout.h),
/// for kernels that run their operations in program order; else each has
/// its own.
mlir::LogicalResult assignScratch(mlir::func::FuncOp kernel, int64_t &scratchBytes,
                                  std::vector<int64_t> *dynamicScratch = nullptr, int64_t shareDistance = -1);

/// Gives every result of `kernel` its own tensor: a value returned twice, a
/// returned argument or a returned constant becomes a linalg.copy, so each
/// output buffer is written exactly once (bufferization to out-params needs
/// that); a result computed into a shared tensor.empty gets its own, so no
/// output buffer doubles as a temporary.
void makeResultsDistinct(mlir::func::FuncOp kernel);


/// Whether a matmul's memref operands are ones the runtime's GEMMs take: f32
/// A, B and C, or bf16 A and B with an f32 C.
bool isRuntimeMatmulOperands(mlir::linalg::LinalgOp matmul);

/// Rewrites linalg.matmul / linalg.batch_matmul on memrefs of f32 (or bf16
/// operands into f32) into calls of the runtime's packed GEMMs,
/// kiln_rt_matmul_f32 (kiln_rt_matmul_bf16); a 2-D matmul whose result is a
/// temporary (or the consumer's own output) that only feeds its consumer
/// (the next op with memory effects, on C or C's
/// rows expanded), a constant scale, bias add, residual add and/or ReLU (for
/// bf16 operands also a rounding to bf16, alone or after them), becomes one
/// call of kiln_rt_matmul_epilogue_f32 (kiln_rt_matmul_epilogue_bf16) into
/// that op's output. An f32 operand written by a cast from bf16 or f16 (a
/// temporary only the matmul reads) is replaced by the half buffer, which
/// the GEMM widens as it packs it (kiln_rt_matmul_widening_f32, or the
/// epilogue call's operand flags).
/// `numInputs`: the kernel's input buffers (its first arguments), which the
/// donation pairs of kiln.donations need; 0 when unknown.
mlir::LogicalResult matmulToRuntimeCalls(mlir::ModuleOp module, unsigned numInputs = 0);

/// Each bufferized index_add generic (mlir::kiln::kIndexAddAttr), whose
/// output already holds the input, becomes a call of kiln_rt_index_add: the
/// runtime's scatter-add (the interpreter's kernel), which visits only the
/// indexed rows where the generic's loops would visit every row of the
/// result for every index. Each cumsum generic (kCumsumAttr) becomes a call
/// of kiln_rt_cumsum, which copies its input into its output and sums in
/// place: one pass where the generic's loops take the axis' extent per
/// element.
mlir::LogicalResult runtimeCallGenericsToCalls(mlir::ModuleOp module);

/// Rewrites f32 linalg.conv_2d_ngchw_gfchw on memrefs (what kiln.conv2d
/// lowers to) into calls of the runtime's implicit-GEMM convolution,
/// kiln_rt_conv2d_f32; a zero fill of the output just before is dropped,
/// and a zero-padded copy of the input (bufferized tensor.pad) is replaced
/// by the unpadded input and the paddings (the runtime pads as it unfolds).
/// Runs before assignScratch, so the dropped copy needs no scratch.
mlir::LogicalResult convToRuntimeCalls(mlir::ModuleOp module);

/// Expands tanh, exp, log, erf, ... on f32 into polynomial approximations
/// that LLVM vectorises (libm calls would stay scalar). exp scales by 2^k
/// without flushing denormal results: with `scalef` (the target has
/// AVX-512) by llvm.intr.ldexp, elsewhere by two exactly built factors.
mlir::LogicalResult approximateMath(mlir::ModuleOp module, bool scalef = false);

/// Rewrites arith.maximumf/minimumf under `root` into llvm.intr.maximum /
/// llvm.intr.minimum, which they mean (IEEE 754-2019: NaN wins, -0 < +0).
/// arith-expand, which the LLVM lowering needs for other ops, would expand
/// them into compare-and-select chains, which LLVM does not recognise as a
/// reduction it may vectorise; the intrinsics are associative, so it does.
void lowerIeeeMinMax(mlir::Operation *root);

/// Rewrites bufferization's memref.copy ops under `fn` into linalg.copy, so
/// that they become (parallel) loops like the kernel's other ops (the NVPTX
/// pipeline's kernels). Returns the number of copies rewritten.
int copiesToLinalg(mlir::func::FuncOp fn);
/// The CPU's copies: MLIR lowers a copy between strided memrefs to a call of
/// the generic runtime `memrefCopy`, one element at a time (a concatenation
/// of [8,64,128] slices cost 6% of a transformer step). A strided copy whose
/// rows are contiguous on both sides becomes loops over its outer dimensions
/// that copy one row each with memcpy (as parallel vectorised loops it cost
/// the transformer step's compile 400 ms); other strided copies become
/// linalg.copy; contiguous ones stay. Returns the number of copies rewritten.
int stridedCopiesToRows(mlir::func::FuncOp fn);

/// Gives each linalg op that takes a tensor linalg.fill of a tensor.empty
/// as its init (CSE merges equal fills) a fill of its own, on a clone of the
/// empty. Otherwise bufferization writes the fill once into a temporary and
/// copies it for each extra user (layer_norm's two f64 sums): a loop and a
/// copy between the row loops, which then cannot fuse. Returns the number of
/// fills cloned.
int unshareFilledInits(mlir::func::FuncOp fn);

/// What outlineParallelLoops made: for each dispatch declaration, the body
/// function it runs and the grain size.
struct ParallelDispatch {
  std::string body;
  int64_t grain;
};
using ParallelDispatches = std::map<std::string, ParallelDispatch>;

/// Moves each top-level scf.parallel of `kernel` (from 0 by 1 on its first
/// dimension, to a constant or, in dynamic-shape kernels, a size) into a function `<kernel>_par<i>(begin, end,
/// kernel args it reads...)` and calls a declaration `__kiln_parallel_<i>(n,
/// the same args...)` in its place (KernelArguments.h). `loopNests` receives the number of top-level loop
/// nests and runtime calls (the fused kernels). Row buffers (RowScratch.h)
/// move to the entry of the function that runs their loop.
mlir::LogicalResult outlineParallelLoops(mlir::ModuleOp module, mlir::func::FuncOp kernel,
                                         ParallelDispatches &dispatches, int &loopNests);

/// After conversion to the LLVM dialect (bare-pointer memrefs): turns each
/// `__kiln_parallel_<i>` call into kiln_rt_parallel_for over a trampoline,
/// adds the `void <entry>(void** args)` entry that calls `kernelName`, marks
/// pointer arguments noalias (except the kernel arguments in `sharedArgs`,
/// which the runtime may pass the same buffer for, in the kernel, its
/// parallel bodies and its serial `parts`) and every other function
/// internal; the parts are never inlined (SerialParts.h). A dynamic-shape
/// kernel's i64 size arguments are read from the int64 array at
/// args[sizesSlot] (-1: a static kernel).
mlir::LogicalResult finalizeLLVMModule(mlir::ModuleOp module, const std::string &kernelName,
                                       const std::string &entryName, const ParallelDispatches &dispatches,
                                       const std::set<std::string> &parts, const std::set<unsigned> &sharedArgs,
                                       int sizesSlot = -1);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_CPUTRANSFORMS_H
