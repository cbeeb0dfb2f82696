#include "runtime/trace/TraceKey.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace kiln::trace {

namespace {
uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

uint64_t header(OpKind op, DType dtype, bool keepdim, int rank, uint16_t numInputs) {
  return (static_cast<uint64_t>(op) << 48) | (static_cast<uint64_t>(dtype) << 40) |
         (static_cast<uint64_t>(keepdim) << 32) | (static_cast<uint64_t>(rank) << 16) | numInputs;
}

/// Finds the scalar slots of a trace's needed nodes (TraceKey.h), in one
/// pass after a scan for pow exponents (few: kept in a short list).
class SlotFinder {
 public:
  SlotFinder(const Trace& trace, const std::vector<uint8_t>& needed) : trace_(trace) {
    for (size_t i = 0; i < trace.nodes.size(); ++i)
      if (needed[i] && trace.nodes[i].op == OpKind::Pow) exponents_.push_back(trace.inputsOf(trace.nodes[i])[1]);
  }
  bool isSlot(size_t i) const {
    const Node& n = trace_.nodes[i];
    return n.op == OpKind::Full && is_floating(n.dtype) && n.shape.rank() == 0 && !trace_.holders[i] &&
           std::find(exponents_.begin(), exponents_.end(), static_cast<uint32_t>(i)) == exponents_.end();
  }

 private:
  const Trace& trace_;
  std::vector<uint32_t> exponents_;
};
}  // namespace

TraceKey computeTraceKey(const Trace& trace, const std::vector<uint8_t>& needed, const std::vector<uint8_t>* argSlots,
                         ScalarSlots* slots) {
  TraceKey key;
  std::vector<uint64_t>& w = key.words;
  w.reserve(trace.nodes.size() * 12 + 4);
  if (slots) {
    slots->values.clear();
    slots->argNodes.clear();
  }
  // The three hashes are formed while the words are written; words that only
  // encode sizes (shapes, parameter strides) are left out of structureHash
  // and valueBlindHash, the scalar slots' values out of valueBlindHash.
  uint64_t h = 0x84222325cbf29ce4ull, structure = h, blind = h;
  auto put = [&](uint64_t word) {
    w.push_back(word);
    h = mix(h, word);
    structure = mix(structure, word);
    blind = mix(blind, word);
  };
  auto putKeyed = [&](uint64_t word) {  // a scalar slot's words: not in valueBlindHash
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
  const SlotFinder finder(trace, needed);
  size_t slot = 0;
  uint64_t args = 0;
  uint32_t next = 0;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!needed[i]) continue;
    renum[i] = next++;
    const Node& n = trace.nodes[i];
    if (finder.isSlot(i)) {
      // Its header and place count for every hash; its value only for the
      // key of a trace whose slot is not an argument (then
      // its words are those of any other node).
      blind = mix(mix(blind, header(n.op, n.dtype, false, 0, 0)), kScalarArgIndex);
      if (slots) {
        if (slots->values.empty()) slots->values.reserve(16);
        slots->values.push_back(std::bit_cast<uint64_t>(n.f0));
      }
      const bool isArg = argSlots && slot < argSlots->size() && (*argSlots)[slot] != 0;
      ++slot;
      if (isArg) {
        if (slots) slots->argNodes.push_back(static_cast<uint32_t>(i));
        putKeyed(header(OpKind::Param, n.dtype, false, 0, 0));
        putKeyed(0);     // attributes
        putKeyed(~0ull); // aliases no parameter
        putKeyed(kScalarArgIndex + args++);
        continue;
      }
      putKeyed(header(n.op, n.dtype, n.keepdim, 0, n.numInputs));
      putKeyed(n.numAttrs);
      for (int64_t a : trace.attrsOf(n)) putKeyed(static_cast<uint64_t>(a));
      putKeyed(std::bit_cast<uint64_t>(n.f0));
      putKeyed(std::bit_cast<uint64_t>(n.f1));
      putKeyed(static_cast<uint64_t>(n.i0));
      continue;
    }
    put(header(n.op, n.dtype, n.keepdim, n.shape.rank(), n.numInputs));
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
  key.valueBlindHash = blind;
  return key;
}

std::vector<uint32_t> scalarArgNodes(const Trace& trace, const std::vector<uint8_t>& needed,
                                     const std::vector<uint8_t>& argSlots) {
  std::vector<uint32_t> nodes;
  const SlotFinder finder(trace, needed);
  size_t slot = 0;
  for (size_t i = 0; i < trace.nodes.size() && slot < argSlots.size(); ++i) {
    if (!needed[i] || !finder.isSlot(i)) continue;
    if (argSlots[slot++]) nodes.push_back(static_cast<uint32_t>(i));
  }
  return nodes;
}

}  // namespace kiln::trace
