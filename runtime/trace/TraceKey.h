// TraceKey: the structural identity of a flushed trace.
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

/// First word of every dynamic-shape kernel key (exec/DynamicShapes.cpp):
/// static keys start with the device word (kind << 32 | index), which never
/// has these bits. Its Param nodes carry no strides.
inline constexpr uint64_t kDynamicKeyMarker = 0x4459'4E4B'524E'4C31ull;  // "DYNKRNL1"

/// Scalar slots: the float constants a kernel may take as arguments instead
/// of compiling them in. A slot is a needed Full node of a floating dtype
/// and rank 0 (every scalar operand of an op, e.g. an optimizer's learning
/// rate) that is not a live output and not the exponent of a pow. Other
/// constants stay in the key, because their value shapes the kernel: a pow
/// exponent (LLVM strength-reduces pow(x, 2) to x * x), integer and bool
/// constants (index arithmetic, masks, integer folds), filled tensors of
/// rank > 0, arange bounds, seeds, axes and the other integer attributes.
///
/// `argSlots` (per slot in recording order, nonzero: an argument) encodes
/// those slots as rank-0 parameters numbered kScalarArgIndex + k (k-th
/// argument), without their values: every trace of the structure then has
/// one key, and its kernel takes the values at launch after its parameters
/// (TraceGraph.h, Executable.h).
inline constexpr uint64_t kScalarArgIndex = uint64_t{1} << 62;

/// The scalar slots of a trace, as computeTraceKey found them.
struct ScalarSlots {
  std::vector<uint64_t> values;    ///< f0 bits of each slot, in recording order
  std::vector<uint32_t> argNodes;  ///< node ids of the slots `argSlots` made arguments
};

/// Encodes the needed nodes of `trace` (see Trace::liveness). `argSlots`
/// (may be null: none) as above; `slots` (may be null) receives the slots.
TraceKey computeTraceKey(const Trace& trace, const std::vector<uint8_t>& needed,
                         const std::vector<uint8_t>* argSlots = nullptr, ScalarSlots* slots = nullptr);

/// The node ids of the slots `argSlots` makes arguments (ScalarSlots::argNodes).
std::vector<uint32_t> scalarArgNodes(const Trace& trace, const std::vector<uint8_t>& needed,
                                     const std::vector<uint8_t>& argSlots);

struct TraceKeyHash {
  std::size_t operator()(const TraceKey& k) const { return static_cast<std::size_t>(k.hash); }
};

}  // namespace kiln::trace
