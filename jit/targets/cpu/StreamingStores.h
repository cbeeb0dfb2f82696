//===- StreamingStores.h - Large outputs written past the caches -*- C++ -*-===//
//
// An elementwise kernel over arrays larger than the caches is bound by memory
// traffic, and a plain store of a line the core does not hold first reads
// that line (write-allocate): chain8's 64 MB output cost 64 MB of reads on
// top of its 64 MB in and 64 MB out. Non-temporal stores write whole lines
// without reading them (a 2-thread copy of 2^24 floats: 5.2 -> 3.7 ms on
// the AVX2 EPYC). They pay off only for data no one reads soon, so they are
// used for the stores into a large output the kernel never reads back.
//
// The kernel marks them `nontemporal` here; LLVM's loop vectoriser refuses
// non-temporal scalar stores it cannot prove aligned, so the LLVM pipeline
// hides the mark during vectorisation and puts it back on the vector stores
// (CpuCompiler's optimize()), and fences them (sfence) before each return of
// a function that has them, as weakly ordered stores need before another
// thread reads them: a parallel body returns at the end of each chunk.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_STREAMINGSTORES_H
#define KILN_JIT_TARGETS_CPU_STREAMINGSTORES_H

#include <cstdint>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace llvm {
class PassBuilder;
} // namespace llvm

namespace kiln::jit::cpu {

/// Outputs of at least this many bytes may be written with streaming
/// stores: a softmax or layer_norm [4096, 1024] (16 MiB) qualifies.
inline constexpr int64_t kStreamingOutputBytes = int64_t{16} << 20;

/// ... and only in a kernel whose input and output buffers together take at
/// least half of the last-level cache (`llcBytes`, exec::lastLevelCacheBytes):
/// below that, what it writes stays in cache for whoever reads it next, and
/// a streaming store sends it to memory for nothing. A 2-core Zen 3 (32 MiB
/// L3): 16 MiB, every output above streams, as measured there. A 2-core
/// slice of a Xeon reporting a 480 MiB L3: 240 MiB, where plain stores took
/// softmax [4096, 1024] (32 MiB in and out) from 1.08 to 0.83 ms and
/// layer_norm from 0.80 to 0.60 ms, chain8 (128 MiB) ran as fast either way
/// (6.9 ms), and a*b+c over 2^24 floats (256 MiB) still wants streaming
/// stores (5.2 ms; 7.1 with plain ones). Medians of 3 alternating runs of
/// bench/kiln_bench, 2 threads.
inline int64_t streamingFootprintBytes(int64_t llcBytes) { return llcBytes / 2; }

/// Operations in a store's loop body above which its streaming stores must
/// be alignable (markStreamingStores).
inline constexpr int64_t kStreamingMaxLoopOps = 24;

/// In the bufferized kernel `fn` (`numInputs` input memrefs, then
/// `numOutputs` out-params) whose static input and output memrefs take at
/// least `minFootprintBytes` in all, marks `nontemporal` every memref.store into
/// an out-param of static shape and at least `minBytes` bytes whose every
/// use, through view-like ops, is the memref of a memref.store (no load,
/// call, copy or linalg op reads or writes it otherwise). A store in a loop
/// body of more than kStreamingMaxLoopOps operations qualifies only where
/// its vector stores can be aligned (kiln-align-streaming-stores): into a
/// flat (rank-1) buffer or rows of whole 64-byte lines. An unaligned
/// streaming store is written as 8-byte pieces, which cost a long body
/// more than the write-allocate reads it saves (chain8, unaligned: 10 %
/// slower); aligned, chain8's ~55 operations of tanh and sigmoid ran
/// 2.69-2.81 ms streaming against 2.79-3.29 plain on a 2-core Zen 5 (3
/// alternating runs). An out-param that may share its buffer with an input
/// (buffer donation) qualifies too: the input's element is read before the
/// store that replaces it, in the same iteration. Returns the number of
/// stores marked.
int markStreamingStores(mlir::func::FuncOp fn, unsigned numInputs, unsigned numOutputs, int64_t minBytes,
                        int64_t minFootprintBytes = 0);

/// Makes Kiln's streaming-store passes known to `pb`'s pipeline parser: the
/// function passes `kiln-hide-nontemporal` and `kiln-restore-nontemporal`
/// and the module pass `kiln-align-streaming-stores`. The first takes the
/// `!nontemporal` off scalar stores (the loop vectoriser would not
/// vectorise their loop) and puts a scope of Kiln's own into their
/// `!alias.scope` instead, which the vectoriser carries over to the vector
/// stores (no `!noalias` names it: it changes no alias query); the second
/// turns that scope back into `!nontemporal` and fences the function's
/// streaming stores before each of its returns. The module pass, after
/// them, versions each function whose vector streaming stores are not known
/// to be aligned: on entry it tests the buffers they address and, when
/// those are aligned, tail-calls a clone in which LLVM proves the stores
/// aligned (x86 writes an unaligned one as 8-byte pieces, or as a plain
/// store). A softmax [4096, 1024] whose exp row stays in an L1 row buffer
/// and streams out: 1.24 -> 1.08 ms, a layer_norm 0.64 -> 0.53 ms (2-core
/// Zen 3).
void registerStreamingStorePasses(llvm::PassBuilder &pb);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_STREAMINGSTORES_H
