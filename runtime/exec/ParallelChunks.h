// Where the chunks of a compiled kernel's parallel loop start: the contract
// between kiln_rt_parallel_for (KernelRuntime.cpp) and the trampolines the
// CPU compiler writes for it (jit/targets/cpu/CpuTransforms.cpp).
#pragma once

#include <cstdint>

namespace kiln::exec {

/// Iterations a chunk's start is a multiple of, for the loops below.
inline constexpr int64_t kParallelChunkAlign = 16;

/// Whether a parallel loop of `grain` runs in chunks that begin at a
/// multiple of kParallelChunkAlign: its trampoline tells LLVM so, and a flat
/// loop's vector stores are then aligned wherever its buffer is (its
/// streaming stores write whole vectors, jit/targets/cpu/StreamingStores.h).
/// Only grains of many such blocks (flat loops, ~16K iterations a task):
/// a row loop's rows are aligned anyway, and rounding its few chunks to 16
/// rows would unbalance them (20 rows: 16 + 4 instead of 10 + 10).
constexpr bool alignsChunks(int64_t grain) {
  return grain % kParallelChunkAlign == 0 && grain >= 16 * kParallelChunkAlign;
}

}  // namespace kiln::exec
