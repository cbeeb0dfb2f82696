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
  w.reserve(trace.nodes.size() * 12 + 4);
  // Both hashes are formed while the words are written; words that only
  // encode sizes (shapes, parameter strides) are left out of structureHash.
  uint64_t h = 0x84222325cbf29ce4ull, structure = h;
  auto put = [&](uint64_t word) {
    w.push_back(word);
    h = mix(h, word);
    structure = mix(structure, word);
  };
  auto putSize = [&](uint64_t word) {
    w.push_back(word);
    h = mix(h, word);
  };
  put((static_cast<uint64_t>(trace.device.kind) << 32) | static_cast<uint32_t>(trace.device.index));

  // Dead nodes are skipped, so values are renumbered densely (on the stack
  // for the small traces of a dispatch-bound loop).
  constexpr size_t kInline = 256;
  uint32_t inlineRenum[kInline];
  std::vector<uint32_t> heapRenum;
  uint32_t* renum = inlineRenum;
  if (trace.nodes.size() > kInline) {
    heapRenum.resize(trace.nodes.size());
    renum = heapRenum.data();
  }
  uint32_t next = 0;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!needed[i]) continue;
    renum[i] = next++;
    const Node& n = trace.nodes[i];
    put((static_cast<uint64_t>(n.op) << 48) | (static_cast<uint64_t>(n.dtype) << 40) |
        (static_cast<uint64_t>(n.keepdim) << 32) | (static_cast<uint64_t>(n.shape.rank()) << 16) | n.numInputs);
    for (int64_t d : n.shape) putSize(static_cast<uint64_t>(d));
    for (uint32_t in : trace.inputsOf(n)) put(renum[in]);
    put(n.numAttrs);
    for (int64_t a : trace.attrsOf(n)) put(static_cast<uint64_t>(a));
    if (n.op == OpKind::Param) {
      // Layout and aliasing of the parameter, not its data: strides, and the
      // first earlier parameter sharing its storage.
      const core::View& v = trace.params[n.i0].view;
      for (int d = 0; d < n.shape.rank(); ++d) putSize(static_cast<uint64_t>(v.strides[d]));
      uint64_t alias = ~0ull;
      for (int64_t p = 0; p < n.i0; ++p) {
        if (trace.params[p].view.storage == v.storage) {
          alias = static_cast<uint64_t>(p);
          break;
        }
      }
      put(alias);
      put(static_cast<uint64_t>(n.i0));
    } else {
      put(std::bit_cast<uint64_t>(n.f0));
      put(std::bit_cast<uint64_t>(n.f1));
      put(static_cast<uint64_t>(n.i0));
    }
  }
  // The live output set.
  put(~0ull);
  for (size_t i = 0; i < trace.nodes.size(); ++i)
    if (trace.holders[i]) put(renum[i]);
  key.hash = h;
  key.structureHash = structure;
  return key;
}

}  // namespace kiln::trace
