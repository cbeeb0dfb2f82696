// TraceKey: the structural identity of a flushed trace (its words are
// written and read by runtime/cache/TraceKeyCodec.*).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/trace/Trace.h"

namespace kiln::trace {

/// Equal for two traces that compute the same thing on different data (two
/// iterations of a training step); different when ops, attributes, dtypes,
/// shapes, parameter layouts and aliasing, the live output set or the device
/// differ, and when the values of constants differ, except those of scalar
/// slots made kernel arguments (below). `words` is the full structural
/// encoding (compared on lookup, so a hash collision can never alias two
/// keys); `hash` indexes it.
struct TraceKey {
  uint64_t hash = 0;
  /// Hash of the same encoding without shapes and parameter strides: equal
  /// for one computation at different sizes (recompilation-storm guard).
  uint64_t structureHash = 0;
  /// structureHash with the scalar slots' values also left out (whether or
  /// not they are arguments): equal for one computation at different sizes
  /// and with different float constants (exec/ScalarArgs.h).
  uint64_t valueBlindHash = 0;
  std::vector<uint64_t> words;

  bool operator==(const TraceKey& o) const { return hash == o.hash && words == o.words; }
};

/// Scalar slots: the float constants a kernel may take as arguments instead
/// of compiling them in. A slot is a needed Full node of a floating dtype
/// and rank 0 (every scalar operand of an op, e.g. an optimizer's learning
/// rate) that is not a live output and not the exponent of a pow. Other
/// constants stay in the key, because their value shapes the kernel: a pow
/// exponent (LLVM strength-reduces pow(x, 2) to x * x), integer and bool
/// constants (index arithmetic, masks, integer folds), filled tensors of
/// rank > 0, arange bounds, seeds, axes and the other integer attributes.
/// A key may make slots arguments: their values are then left out of it
/// (runtime/cache/TraceKeyCodec.h encodes keys).
///
/// The scalar slots of a trace, as cache::encodeTraceKey found them.
struct ScalarSlots {
  std::vector<uint64_t> values;    ///< f0 bits of each slot, in recording order
  std::vector<uint32_t> argNodes;  ///< node ids of the slots `argSlots` made arguments
};

struct TraceKeyHash {
  std::size_t operator()(const TraceKey& k) const { return static_cast<std::size_t>(k.hash); }
};

}  // namespace kiln::trace
