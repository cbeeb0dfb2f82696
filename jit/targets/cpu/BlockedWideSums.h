//===- BlockedWideSums.h - f32 sums in f64, widened once per block -*- C++ -*-===//
//
// Sums of f32 values accumulate in f64 (the interpreter's order-independent
// accuracy): each element is widened and added in double, which AVX2 does
// four lanes at a time with a conversion per half vector: in a softmax row's
// exp loop that is five instructions per eight elements next to the exp
// itself. Summed in f32 over short blocks and widened once per block, the
// loop adds eight lanes per instruction; a block's f32 partial carries at
// most a few roundings of its own few dozen terms, far inside the 1e-5
// relative bound the compiled tier keeps for sums.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_BLOCKEDWIDESUMS_H
#define KILN_JIT_TARGETS_CPU_BLOCKEDWIDESUMS_H

#include <cstdint>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// Elements of one f32 block: a loop of n iterations takes the largest of
/// kWideSumBlock, kWideSumBlock / 2, ... down to kWideSumMinBlock that it
/// holds at least twice and that leaves fewer than kWideSumMinBlock
/// iterations after its last whole block. Each block ends in a horizontal
/// add of the vector partials and a widening, a few dozen cycles of latency
/// (a softmax row of 1024 ran 12 % faster in blocks of 256 than of 64); a
/// vectorised block's lanes each add 256 / 16 terms in f32.
inline constexpr int64_t kWideSumBlock = 256;
inline constexpr int64_t kWideSumMinBlock = 64;

/// In `fn`, every innermost scf.for with constant bounds, step 1 and at
/// least 2 * `minBlock` iterations that carries an f64 accumulator whose
/// only use is `arith.addf` (reassoc) with `arith.extf` of an f32 value, the
/// sum yielded back, becomes a loop over blocks (sized as above, between
/// `minBlock` and `block`): an inner loop sums each such accumulator's terms
/// in f32 from 0 (other carried values pass through it unchanged) and the
/// outer loop adds the widened block sum to the f64 accumulator. Iterations
/// past the last whole block run in a copy of the original loop. Returns the
/// number of loops blocked.
int blockWideSums(mlir::func::FuncOp fn, int64_t block = kWideSumBlock, int64_t minBlock = kWideSumMinBlock);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_BLOCKEDWIDESUMS_H
