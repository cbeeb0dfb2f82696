// Where the chunks of a compiled kernel's parallel loop start: the contract
// between kiln_rt_parallel_for (KernelRuntime.cpp) and the trampolines the
// CPU compiler writes for it (jit/targets/cpu/CpuTransforms.cpp).
#pragma once

#include <cstdint>

namespace kiln::exec {

/// A parallel loop whose grain is a multiple of this many iterations runs
/// in chunks that begin at a multiple of it. Its trampoline tells LLVM so,
/// and a flat loop's vector stores are then aligned wherever its buffer is
/// aligned: its streaming stores write whole vectors
/// (jit/targets/cpu/StreamingStores.h).
inline constexpr int64_t kParallelChunkAlign = 16;

}  // namespace kiln::exec
