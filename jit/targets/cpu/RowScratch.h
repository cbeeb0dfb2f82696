//===- RowScratch.h - Row temporaries on the stack, not in scratch -*- C++ -*-===//
//
// After row fusion (RowFusion.h) softmax and layer_norm run as one parallel
// loop over rows, but their temporaries (the exp of a softmax row, the
// centred row of a layer_norm, each row's max and sums) are still views of
// the full-size scratch buffer: 16 MiB for a [4096, 1024] softmax, written
// and read back once per call, so the row leaves L1 and the scratch costs
// a write-back to memory. A temporary that only the loop touches, and only
// at the loop's row, needs one row per task: a stack buffer that stays in L1.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_ROWSCRATCH_H
#define KILN_JIT_TARGETS_CPU_ROWSCRATCH_H

#include <cstdint>
#include <set>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// Default bound on the row buffers of one loop (bytes of stack per task).
inline constexpr int64_t kMaxRowBufferBytes = 64 * 1024;
/// Bound on the row buffers of all loops of one kernel.
inline constexpr int64_t kMaxRowBufferBytesPerKernel = 256 * 1024;

/// Replaces the scratch temporaries of `kernel` (views of argument
/// `scratchArg`) that live within one row of one top-level one-dimensional
/// scf.parallel by a row buffer: a `memref.alloca` at the start of the
/// loop's body (private to the iteration) holding one row. A temporary
/// qualifies when every access in the kernel to bytes it may share is a
/// load or store in that loop, through a view that splits the same bytes
/// into the loop's rows (see RowFusion.h), at the loop's variable as first
/// index. Row buffers of one loop take at most `maxBytes`, those of the
/// whole kernel at most kMaxRowBufferBytesPerKernel; smaller rows go first,
/// temporaries past the bounds stay in scratch. Returns the number of temporaries moved.
int localizeRowScratch(mlir::func::FuncOp kernel, unsigned scratchArg, int64_t maxBytes = kMaxRowBufferBytes);

/// The bytes of argument `scratchArg` that `kernel` still addresses: the end
/// of its last live view (0 with none). Unknown (-1) when a use of the
/// argument is not a view at a constant offset.
int64_t scratchBytesInUse(mlir::func::FuncOp kernel, unsigned scratchArg);

/// Writes row buffers into the output rows they end up in. A row buffer
/// (a static `memref.alloca` of i8, all of whose uses are `memref.view`s at
/// byte 0 of one row `[1, ..., 1, n]`, accessed only inside one top-level
/// row loop) whose last reader is an inner loop over `[0, n)` that loads
/// element j of the buffer and stores element j of row r (the row loop's
/// variable) of an output `M[r, 0, ..., j]` of the same element type, where
/// no other access in the row loop may touch M's bytes (`sharedArgs`: the
/// argument numbers the runtime may pass one buffer for), is replaced by
/// that output row: the loops before write the row where it ends, and the
/// last one scales or shifts it in place. The store that leaves the
/// temporary then streams the output line into the cache while the loop
/// computes (a softmax row's exp), instead of a copy loop that only waits
/// for write misses. A buffer whose output store is `nontemporal` stays: the
/// streaming store (StreamingStores.h) writes the row out without reading
/// the output's lines. Returns the number of buffers replaced.
int rowBuffersIntoOutputs(mlir::func::FuncOp kernel, const std::set<unsigned> &sharedArgs);

/// Moves the static `memref.alloca`s at the top level of the body of each
/// top-level scf.parallel of `fn` to its entry block. Each call of `fn`
/// runs its loop's iterations one after another (outlined bodies run one
/// task's range), so one buffer serves them all, and LLVM sees a fixed-size
/// frame instead of stack growing by a row per iteration.
void hoistRowBuffers(mlir::func::FuncOp fn);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_ROWSCRATCH_H
