// TraceKeyCodec: the one place that knows the words of a TraceKey, the
// content key of a compiled kernel in memory and in the disk cache. It
// encodes the key of a trace (its shapes static) and of a dynamic-shape
// kernel, and decodes the words a cache entry stores (entry checks,
// listings, miss explanations, a cached dynamic kernel's extents).
//
// The words: a static key starts with the device word (kind << 32 | index);
// a dynamic kernel's with kDynamicKeyMarker, then the device word. Then, per
// needed node (renumbered densely): a header (op << 48 | dtype << 40 |
// keepdim << 32 | rank << 16 | operand count), the extents (< 0: a dynamic
// size), the operands' node numbers, the attribute count and attributes; a
// Param then has its strides (static keys only), the earlier parameter it
// shares storage with (~0: none) and its position (kScalarArgIndex + k for
// scalar argument k); any other node the bits of f0 and f1 and i0. Last, ~0
// and the node numbers of the live outputs.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceGraph.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::exec::cache {

/// First word of every dynamic-shape kernel key: static keys start with the
/// device word, which never has these bits.
inline constexpr uint64_t kDynamicKeyMarker = 0x4459'4E4B'524E'4C31ull;  // "DYNKRNL1"

/// Position of the first scalar argument (trace::ScalarSlots): the slots a
/// key makes arguments are encoded as rank-0 parameters numbered
/// kScalarArgIndex + k, without their values, so every trace of the
/// structure has one key and its kernel takes the values at launch after
/// its parameters (TraceGraph.h, Executable.h).
inline constexpr uint64_t kScalarArgIndex = uint64_t{1} << 62;

/// The key of the needed nodes of `trace` (see Trace::liveness), with the
/// three hashes of trace::TraceKey. `argSlots` (may be null: none; per
/// scalar slot in recording order, nonzero: an argument) as above; `slots`
/// (may be null) receives the slots (trace::ScalarSlots).
trace::TraceKey encodeTraceKey(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                               const std::vector<uint8_t>* argSlots = nullptr, trace::ScalarSlots* slots = nullptr);

/// The node ids of the slots `argSlots` makes arguments
/// (trace::ScalarSlots::argNodes).
std::vector<uint32_t> scalarArgNodes(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                     const std::vector<uint8_t>& argSlots);

/// The disk-cache name hash of a structure's dynamic-shape kernel: known
/// from the structure alone, so a replaying process that never saw the
/// shapes that made it can find it.
uint64_t dynamicEntryHash(uint64_t structure);

/// The key of a dynamic-shape kernel of `structure`: `graph` (the trace's
/// graph with its dynamic extents), `trace`'s device and its parameters'
/// aliasing (`paramOfInput`: the trace parameter of each graph input). Its
/// hash is dynamicEntryHash(structure); its structureHash hashes the words.
trace::TraceKey encodeDynamicKey(uint64_t structure, const trace::TraceGraph& graph, const trace::Trace& trace,
                                 const std::vector<int64_t>& paramOfInput);

/// Whether `words` are a dynamic-shape kernel's key.
bool isDynamicKey(const std::vector<uint64_t>& words);

/// One node decoded from key words.
struct KeyNode {
  uint32_t op = 0, dtype = 0, keepdim = 0;
  std::vector<uint64_t> shape, inputs, attrs, rest;
};
struct DecodedKey {
  bool dynamic = false;  ///< a dynamic-shape kernel's key (extents < 0 are sizes)
  uint64_t device = 0;
  std::vector<KeyNode> nodes;
  std::vector<uint64_t> outputs;  ///< node numbers of the live outputs
};
/// Decodes key words; false when they are not a well-formed key.
bool decodeKey(const std::vector<uint64_t>& words, DecodedKey* key);

/// The extents of a dynamic kernel key's words, node by node, read onto
/// `graph` (a trace's graph with static extents) into `extents`: false when
/// the words do not have the graph's layout.
bool dynamicExtents(const trace::TraceGraph& graph, const std::vector<uint64_t>& words, std::vector<int64_t>* extents);

}  // namespace kiln::exec::cache
