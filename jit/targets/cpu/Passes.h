//===- Passes.h - Kiln's own steps of the CPU pipeline as passes -*- C++ -*-===//
//
// The CPU pipeline's steps as passes (Passes.td): the compiler runs them by
// name (HostTarget.h) and kiln-opt for the lit tests. A step whose result the
// compiler needs records it as an attribute of the kernel function, which
// the compiler reads back (and removes) after the pass.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_PASSES_H
#define KILN_JIT_TARGETS_CPU_PASSES_H

#include <set>

#include "jit/targets/cpu/NextRowPrefetch.h"
#include "jit/targets/cpu/StreamingStores.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::jit::cpu {

/// kiln-cpu-buffer-donation: the (output, input) pairs that may share a
/// buffer, `[array<i64: output, input>, ...]`, and the kernel arguments of
/// those pairs, `array<i64: ...>`, which kiln-cpu-fuse-row-loops reads.
inline constexpr const char *kDonationsAttr = "kiln.donations";
inline constexpr const char *kSharedArgsAttr = "kiln.shared_args";

/// The arguments of `fn` that may share a buffer: those `listed` (a pass
/// option) and those kiln-cpu-buffer-donation recorded (kSharedArgsAttr).
std::set<unsigned> sharedArgsOf(mlir::func::FuncOp fn, llvm::ArrayRef<unsigned> listed = {});
/// kiln-cpu-assign-scratch (shrunk by kiln-cpu-localize-row-scratch): the
/// static scratch bytes, i64; with dynamic-sizes, `array<i64: ...>` per
/// dynamic temporary (see assignScratch).
inline constexpr const char *kScratchBytesAttr = "kiln.scratch_bytes";
inline constexpr const char *kDynamicScratchAttr = "kiln.dynamic_scratch";
/// kiln-cpu-outline-parallel-loops: `{declaration = @body, ...}` and the
/// number of loop nests on the kernel, the grain on each body.
inline constexpr const char *kDispatchesAttr = "kiln.dispatches";
inline constexpr const char *kLoopNestsAttr = "kiln.loop_nests";
inline constexpr const char *kGrainAttr = "kiln.grain";
/// kiln-cpu-outline-serial-parts: the parts the kernel calls,
/// `[@<kernel>_part0, ...]`.
inline constexpr const char *kSerialPartsAttr = "kiln.serial_parts";

#define GEN_PASS_DECL
#include "jit/targets/cpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "jit/targets/cpu/Passes.h.inc"

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_PASSES_H
