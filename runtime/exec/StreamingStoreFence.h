// Compiled kernels write large outputs with non-temporal stores
// (jit/targets/cpu/StreamingStores.h), which are weakly ordered: before
// another thread may read what a thread wrote that way, the writer fences.
// The runtime does it where compiled code hands over: at the end of each
// chunk of a parallel loop and after each kernel (a few cycles when nothing
// is pending).
#pragma once

#include <atomic>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::exec {

inline void fenceStreamingStores() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace kiln::exec
