// TraceKey: the structural identity of a flushed trace.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/trace/Trace.h"

namespace kiln::trace {

/// Equal for two traces that compute the same thing on different data (two
/// iterations of a training step); different when ops, attributes, dtypes,
/// shapes, parameter layouts and aliasing, the live output set or the device
/// differ. `words` is the full structural encoding (compared on lookup, so a
/// hash collision can never alias two keys); `hash` indexes it.
struct TraceKey {
  uint64_t hash = 0;
  /// Hash of the same encoding without shapes and parameter strides: equal
  /// for one computation at different sizes (recompilation-storm guard).
  uint64_t structureHash = 0;
  std::vector<uint64_t> words;

  bool operator==(const TraceKey& o) const { return hash == o.hash && words == o.words; }
};

/// First word of every dynamic-shape kernel key (exec/DynamicShapes.cpp):
/// static keys start with the device word (kind << 32 | index), which never
/// has these bits. Its Param nodes carry no strides.
inline constexpr uint64_t kDynamicKeyMarker = 0x4459'4E4B'524E'4C31ull;  // "DYNKRNL1"

/// Encodes the needed nodes of `trace` (see Trace::liveness).
TraceKey computeTraceKey(const Trace& trace, const std::vector<uint8_t>& needed);

struct TraceKeyHash {
  std::size_t operator()(const TraceKey& k) const { return static_cast<std::size_t>(k.hash); }
};

}  // namespace kiln::trace
