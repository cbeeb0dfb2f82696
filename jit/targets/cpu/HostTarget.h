//===- HostTarget.h - The code Kiln generates for this machine --*- C++ -*-===//
//
// The target machine settings and the MLIR pipeline of the CPU compiler.
// The fingerprint the disk cache keys kernels on is the runtime's
// (runtime/cache/HostFingerprint.h, no LLVM); its pipeline field is a digest
// of the compiler's sources, this file included, so any change here makes
// earlier kernels stale. LLVM only; no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_HOSTTARGET_H
#define KILN_JIT_TARGETS_CPU_HOSTTARGET_H

#include <string>
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::jit::cpu {

/// Pipeline stages (textual, upstream passes, anchored on the module).
/// Then fuseElementwiseOps (ElementwiseFusion.h), then kAfterFusion (the
/// NVPTX pipeline's front half; the CPU's runs kCpuToLinalg).
inline constexpr const char *kToLinalg = "canonicalize,kiln-convert-to-linalg,canonicalize,cse";
inline constexpr const char *kAfterFusion = "canonicalize,cse";
inline constexpr const char *kBufferize =
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,cse";
inline constexpr const char *kToLoops = "convert-linalg-to-parallel-loops,canonicalize,cse";

/// The CPU compiler's stages with Kiln's own passes (Passes.td) in them, in
/// the order CpuCompiler.cpp runs them; it adds the passes whose options
/// depend on the kernel (buffer donation, scratch, outlining) and reads back
/// the attributes they record (Passes.h).
inline constexpr const char *kCpuToLinalg =
    "canonicalize,kiln-convert-to-linalg,canonicalize,cse,kiln-cpu-fuse-elementwise,canonicalize,cse";
inline constexpr const char *kCpuBufferize =
    "func.func(kiln-cpu-split-full-reductions,kiln-cpu-distinct-results,kiln-cpu-unshare-fills),"
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,cse";
inline constexpr const char *kCpuFoldMatmulTransposes = "func.func(kiln-cpu-fold-matmul-transposes)";
inline constexpr const char *kCpuConvCalls = "kiln-cpu-conv-to-runtime-calls";
/// Then `{num-inputs=N}` on the first and `{scalef=true}` on the second
/// where the target hasAvx512 (CpuCompiler.cpp).
inline constexpr const char *kCpuMatmulCalls = "kiln-cpu-matmul-to-runtime-calls";
inline constexpr const char *kCpuApproximateMath = "kiln-cpu-approximate-math";
inline constexpr const char *kCpuStridedCopies = "func.func(kiln-cpu-strided-copies)";
/// Then func.func(kiln-cpu-fuse-row-loops) (the donated pairs from the
/// kernel's kiln.shared_args) and, with scratch, kiln-cpu-localize-row-scratch.
inline constexpr const char *kCpuToLoops =
    "func.func(kiln-cpu-order-reduction-loops),convert-linalg-to-parallel-loops,canonicalize,cse,kiln-cpu-promote-accumulators,kiln-cpu-hoist-invariant-loads";
inline constexpr const char *kCpuFuseLoopsInRows = "func.func(kiln-cpu-fuse-loops-in-rows)";
/// After func.func(kiln-cpu-streaming-stores): an output row that streams
/// keeps its row buffer; then the row loops' sums are blocked
/// (kiln-cpu-block-wide-sums).
inline constexpr const char *kCpuRowBuffersIntoOutputs =
    "func.func(kiln-cpu-row-buffers-into-outputs,kiln-cpu-block-wide-sums)";
inline constexpr const char *kCpuIeeeMinMax = "kiln-cpu-ieee-min-max";
/// After the parallel bodies are outlined and marked: NextRowPrefetch.h.
inline constexpr const char *kCpuPrefetchNextRows = "func.func(kiln-cpu-prefetch-next-rows)";
/// Then `{lanes=N}`, the f32 lanes (CpuCompiler.cpp): the marked loops LLVM's
/// vectoriser would take become vector loops (VectorizeLoops.h).
inline constexpr const char *kCpuVectorizeParallelLoops = "kiln-cpu-vectorize-parallel-loops";
/// Last on the loops (after outlining); kToLLVM ends with its second half.
inline constexpr const char *kCpuMarkParallelLoops = "kiln-cpu-mark-parallel-loops";
/// Before kToLLVM in dynamic-shape kernels: MLIR 22's expand-strided-metadata
/// crashes (a null stride attribute) on an expand_shape of a collapse_shape
/// of a dynamically strided memref, a reshape between dynamic shapes, while
/// dims of or loads from it remain; resolving the dims and folding the
/// loads through the reshapes first removes that chain. (Static kernels
/// have no such chain and keep the IR they were measured with.)
inline constexpr const char *kResolveDynamicReshapes = "resolve-ranked-shaped-type-result-dims,fold-memref-alias-ops";
/// convert-scf-to-cf and kiln-cpu-convert-to-llvm without pattern rollback
/// (MLIR's one-shot conversion driver: cheaper, and none of their patterns
/// needs it).
inline constexpr const char *kToLLVM =
    "expand-strided-metadata,lower-affine,convert-scf-to-cf{allow-pattern-rollback=false},convert-math-to-llvm,"
    "convert-math-to-libm,arith-expand,kiln-cpu-convert-to-llvm,reconcile-unrealized-casts,"
    "kiln-cpu-fold-descriptors,kiln-cpu-tag-parallel-accesses";

/// Nested operations per part of a large kernel's serial code
/// (kiln-cpu-outline-serial-parts, SerialParts.h).
inline constexpr int64_t kSerialPartOps = 400;

/// LLVM's optimisation of a kernel module. Not the O2 pipeline: MLIR has
/// already fused, hoisted and simplified the loops, so what LLVM adds is
/// cleanup of the lowered IR (memref descriptors, address arithmetic),
/// invariant code out of loops and vectorisation; O2 ran InstCombine eight
/// times, GVN, jump threading and more for the same code. On the 800-op
/// training step's module (issue 20): translation and optimisation 0.39 ->
/// 0.24 s on one core, the same vector instructions and step time.
/// As in O2, callees are simplified before they are inlined (the kernel into
/// its entry, a parallel body into its trampoline), so the noalias scopes of
/// their arguments let LICM hoist what is invariant: left in the loop, a
/// chain of squarings of one invariant value (integer pow's unrolled
/// square-and-multiply) sent the vectoriser into exponential recursion
/// (vputils::isSingleScalar). No loop unrolling (it blew the serial loops of
/// a large trace up to ~75K lines of IR for no measurable gain) and no
/// IndVarSimplify (its SCEV queries walk every dominating condition of the
/// function that holds a trace's serial loops).
/// kiln-hide/restore-nontemporal and kiln-align-streaming-stores: see
/// StreamingStores.h; kiln-hide/restore-prefetches: NextRowPrefetch.h
/// (hidden for the vectoriser only: the earlier passes know llvm.prefetch,
/// while the marker, which may not return, would keep LICM from hoisting
/// what follows it); kiln-first-lane-scalars: FirstLaneScalars.h;
/// kiln-x86-vector-idioms (after the vectoriser, which makes the vectors it
/// rewrites): X86VectorIdioms.h; kiln-bool-bytes (bool elements as bytes,
/// which the vectoriser widens): BoolBytes.h.
inline constexpr const char *kKernelPassPipeline =
    "cgscc(inline,function(kiln-hide-nontemporal,sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-mssa(licm),loop-rotate)),"
    "function(kiln-bool-bytes,kiln-hide-prefetches,loop-vectorize,kiln-restore-prefetches,kiln-first-lane-scalars,"
    "kiln-x86-vector-idioms,instcombine<no-verify-fixpoint>,simplifycfg,kiln-restore-nontemporal),"
    "kiln-align-streaming-stores,globaldce";

/// Whether a CPU with `features` (LLVM's "+name,-name" list) has AVX-512F:
/// zmm vectors (preferredVectorWidth, 16 f32 lanes) and vscalefps for exp
/// (kiln-cpu-approximate-math{scalef}).
inline bool hasAvx512(llvm::StringRef features) { return features.contains("+avx512f"); }

/// The vector width the loop vectoriser should aim for on a CPU with
/// `features` (LLVM's "+name,-name" list), or null for LLVM's choice. LLVM
/// tunes Intel's AVX-512 server cores (Skylake-X to Sapphire Rapids) for
/// 256-bit vectors, against the clock penalty of early zmm code; Kiln's
/// kernels are long loops of arithmetic, where zmm pays: chain8 (tanh,
/// sigmoid, 2^24 floats) ran in 20 ms with ymm against Eigen's 10.6 ms with
/// zmm on a Sapphire Rapids.
inline const char *preferredVectorWidth(const std::string &features) {
  return hasAvx512(features) ? "512" : nullptr;
}

/// The host CPU with all its features, position independent (the kernel
/// becomes a shared object), small code model. Codegen optimisation O2
/// (Aggressive cost compile time and gained nothing measurable), or with
/// `quick` O0: fast instruction selection and register allocation, on IR
/// that LLVM's passes optimised as always. On the transformer bench's
/// 889-op step (2-core Zen 3) machine code took 65 ms instead of 260-275,
/// and the training steps, whose time is mostly in GEMM calls, ran as fast;
/// but chain8's long bodies of math spill and ran 2.4x slower, softmax's
/// 1.4x: a first tier only (TieringPolicy.h, chooseCodegenEffort).
/// `host` is JITTargetMachineBuilder::detectHost(), which a compiler reads
/// once: it asks the CPU its name and features with cpuid, which a VM traps
/// (read for each target machine, it made a 10-op compile 0.5-5 ms slower).
inline llvm::orc::JITTargetMachineBuilder hostTargetMachineBuilder(const llvm::orc::JITTargetMachineBuilder &host,
                                                                   bool quick = false) {
  llvm::orc::JITTargetMachineBuilder jtmb = host;
  jtmb.setCodeGenOptLevel(quick ? llvm::CodeGenOptLevel::None : llvm::CodeGenOptLevel::Default);
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  jtmb.setCodeModel(llvm::CodeModel::Small);
  return jtmb;
}

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_HOSTTARGET_H
