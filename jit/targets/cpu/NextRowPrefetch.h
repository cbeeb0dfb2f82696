//===- NextRowPrefetch.h - Fetch a row kernel's next row ahead --*- C++ -*-===//
//
// A row kernel (softmax, layer_norm: RowFusion's loop over rows, several
// passes over each row) reads a row first from L3 or memory, then again
// from L1. Its first pass waits for the row: the L2 streamer stops at 4 KiB
// pages, so it starts over at each row of 4 KiB. Software prefetches of the
// next row, one cache line per vector, spread over the current row's
// heaviest later pass (its arithmetic hides their latency), take softmax
// [4096, 1024] from 0.77 to 0.64 ms in a hand-written AVX-512 loop (2
// threads, Xeon); all of a row's 64 prefetches at once, or 16 at a time,
// made it slower (0.80-0.95 ms: they queue for fill buffers ahead of the
// pass's own loads).
//
// On Zen 5 (EPYC, 2 threads, softmax [4096, 1024] in L3) the prefetch
// paid only once the vectoriser's widened induction it indexes by was
// computed in scalars (FirstLaneScalars.h): 0.44 ms without it, 0.49-0.51
// with it and the vector induction, 0.43 with scalar first lanes; layer_norm
// 0.27 ms without, 0.23-0.24 with.
//
// The kernel gets `memref.prefetch` ops here. LLVM's loop vectoriser does
// not vectorise a loop with a call to llvm.prefetch, so the LLVM pipeline
// hides each one behind a call to a marker with vector variants (one
// prefetch per vector: a line per zmm of f32) while loops vectorise, and
// turns the calls back into prefetches after (CpuCompiler's optimize()).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_NEXTROWPREFETCH_H
#define KILN_JIT_TARGETS_CPU_NEXTROWPREFETCH_H

#include <cstdint>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace llvm {
class PassBuilder;
} // namespace llvm

namespace kiln::jit::cpu {

/// Rows of at least this many bytes get their next row prefetched. Softmax
/// (2 threads, Xeon, prefetch off -> on): rows of 256 and 512 bytes level,
/// [32768, 256] 1.64-1.67 -> 1.51-1.54 ms, [16384, 512] 1.51-1.63 ->
/// 1.19-1.27, [8192, 1024] 1.42-1.50 -> 1.20-1.28, rows of 16 and 64 KiB
/// level (the streamer is well into each row by then).
inline constexpr int64_t kPrefetchMinRowBytes = 1024;

/// In `fn`'s loops over rows (a one-dimensional scf.parallel whose body
/// holds two or more scf.for nests, its passes over the row): in the
/// innermost loop of the pass after the first with the most operations,
/// before each load from a function argument that `fn` never writes,
/// indexed by the row first and of static shape with rows of at least
/// `minRowBytes`, adds a prefetch of the same element of the next row (the
/// last row prefetches itself). One prefetch per argument and loop.
/// Returns the number of prefetches added.
int prefetchNextRows(mlir::func::FuncOp fn, int64_t minRowBytes = kPrefetchMinRowBytes);

/// Registers `kiln-hide-prefetches` and `kiln-restore-prefetches` (function
/// passes) with `pb`'s pipeline parser.
void registerPrefetchPasses(llvm::PassBuilder &pb);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_NEXTROWPREFETCH_H
