//===- ScratchLayout.h - Where a kernel's temporaries live in scratch -*- C++ -*-===//
//
// A compiled step keeps every temporary in one scratch buffer. Given one
// slot per temporary in its own bytes, a training step's buffer is the sum
// of all its temporaries (24 MB for the transformer bench's step), most of
// which are dead long before the step ends. Temporaries whose lives do not
// meet share bytes instead: the buffer is what is live at once (about half
// of it there), which the process faults in once and the caches hold.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_SCRATCHLAYOUT_H
#define KILN_JIT_TARGETS_CPU_SCRATCHLAYOUT_H

#include <cstdint>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir {
class Operation;
class Value;
namespace func {
class FuncOp;
}
} // namespace mlir

namespace kiln::jit::cpu {

/// A temporary's bytes and its life: the positions of the first and the
/// last top-level operation of the kernel that use it (positions count
/// operations with memory effects, scratchPositions).
struct ScratchLife {
  int64_t bytes = 0;
  int64_t first = 0, last = 0;
};

/// The CPU compiler's distance: lives this close (in positions) or closer
/// never share bytes. Loops of nearby operations are fused into one pass
/// over rows later (RowFusion), which needs their buffers provably apart;
/// on the transformer bench's step a distance of 4 lost one such fusion
/// (loops that other fusions had made neighbours), 16 none, and the buffer
/// is 12.4 MB at 16 against 11.8 at 4 and 24.0 unshared.
inline constexpr int64_t kScratchReuseDistance = 16;

/// The byte offset of each temporary (multiples of `alignment`) so that
/// temporaries whose lives come within `distance` positions of each other
/// never share a byte; `totalBytes` receives the bytes the layout needs.
/// Largest first, each at the lowest offset that fits beside those placed
/// whose lives meet its own (deterministic: ties by first use, then order).
std::vector<int64_t> packScratch(llvm::ArrayRef<ScratchLife> lives, int64_t alignment, int64_t distance,
                                 int64_t &totalBytes);

/// The position of each top-level operation of `kernel`: how many
/// operations with memory effects come before it (views, constants and the
/// allocations themselves take the position of the next one).
llvm::DenseMap<mlir::Operation *, int64_t> scratchPositions(mlir::func::FuncOp kernel);

/// The life of a temporary `root` (a memref.alloc's result at the top level
/// of `kernel`) from its uses and those of everything derived from it
/// (views, casts, pointers taken from it), each counted at its top-level
/// ancestor (a value yielded out of a region goes on as the region op's
/// result); `position` is scratchPositions(kernel). A temporary that
/// escapes (returned, or its address stored to memory) lives to the end.
/// An unused one lives at `allocPosition` only.
ScratchLife scratchLife(mlir::Value root, int64_t bytes, int64_t allocPosition, mlir::func::FuncOp kernel,
                        const llvm::DenseMap<mlir::Operation *, int64_t> &position);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_SCRATCHLAYOUT_H
