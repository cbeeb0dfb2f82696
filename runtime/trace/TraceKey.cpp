#include "runtime/trace/TraceKey.h"

#include <bit>
#include <cstring>

namespace kiln::trace {

namespace {
uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}
}  // namespace

TraceKey computeTraceKey(const Trace& trace, const std::vector<uint8_t>& needed) {
  TraceKey key;
  std::vector<uint64_t>& w = key.words;
  // Positions of words that only encode sizes (skipped by structureHash).
  std::vector<uint8_t> sizeWord;
  auto markSizes = [&](size_t from) { sizeWord.resize(w.size(), 0); std::fill(sizeWord.begin() + from, sizeWord.end(), 1); };
  w.reserve(trace.nodes.size() * 8 + 4);
  w.push_back((static_cast<uint64_t>(trace.device.kind) << 32) | static_cast<uint32_t>(trace.device.index));

  // Dead nodes are skipped, so values are renumbered densely.
  std::vector<uint32_t> renum(trace.nodes.size(), 0);
  uint32_t next = 0;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!needed[i]) continue;
    renum[i] = next++;
    const Node& n = trace.nodes[i];
    w.push_back((static_cast<uint64_t>(n.op) << 48) | (static_cast<uint64_t>(n.dtype) << 40) |
                (static_cast<uint64_t>(n.keepdim) << 32) | (static_cast<uint64_t>(n.shape.rank()) << 16) |
                n.numInputs);
    const size_t shapeBegin = w.size();
    for (int64_t d : n.shape) w.push_back(static_cast<uint64_t>(d));
    markSizes(shapeBegin);
    for (uint32_t in : trace.inputsOf(n)) w.push_back(renum[in]);
    w.push_back(n.numAttrs);
    for (int64_t a : trace.attrsOf(n)) w.push_back(static_cast<uint64_t>(a));
    if (n.op == OpKind::Param) {
      // Layout and aliasing of the parameter, not its data: strides, and the
      // first earlier parameter sharing its storage.
      const core::View& v = trace.params[n.i0].view;
      const size_t strideBegin = w.size();
      for (int d = 0; d < n.shape.rank(); ++d) w.push_back(static_cast<uint64_t>(v.strides[d]));
      markSizes(strideBegin);
      uint64_t alias = ~0ull;
      for (int64_t p = 0; p < n.i0; ++p) {
        if (trace.params[p].view.storage == v.storage) {
          alias = static_cast<uint64_t>(p);
          break;
        }
      }
      w.push_back(alias);
      w.push_back(static_cast<uint64_t>(n.i0));
    } else {
      w.push_back(std::bit_cast<uint64_t>(n.f0));
      w.push_back(std::bit_cast<uint64_t>(n.f1));
      w.push_back(static_cast<uint64_t>(n.i0));
    }
  }
  // The live output set.
  w.push_back(~0ull);
  for (size_t i = 0; i < trace.nodes.size(); ++i)
    if (trace.holders[i]) w.push_back(renum[i]);

  sizeWord.resize(w.size(), 0);
  uint64_t h = 0x84222325cbf29ce4ull, structure = h;
  for (size_t i = 0; i < w.size(); ++i) {
    h = mix(h, w[i]);
    if (!sizeWord[i]) structure = mix(structure, w[i]);
  }
  key.hash = h;
  key.structureHash = structure;
  return key;
}

}  // namespace kiln::trace
