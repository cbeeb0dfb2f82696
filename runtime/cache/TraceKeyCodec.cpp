#include "runtime/cache/TraceKeyCodec.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace kiln::exec::cache {

namespace {
uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

uint64_t header(core::OpKind op, DType dtype, bool keepdim, int rank, uint16_t numInputs) {
  return (static_cast<uint64_t>(op) << 48) | (static_cast<uint64_t>(dtype) << 40) |
         (static_cast<uint64_t>(keepdim) << 32) | (static_cast<uint64_t>(rank) << 16) | numInputs;
}

/// Finds the scalar slots of a trace's needed nodes (trace::ScalarSlots), in one
/// pass after a scan for pow exponents (few: kept in a short list).
class SlotFinder {
 public:
  SlotFinder(const trace::Trace& trace, const std::vector<uint8_t>& needed) : trace_(trace) {
    for (size_t i = 0; i < trace.nodes.size(); ++i)
      if (needed[i] && trace.nodes[i].op == core::OpKind::Pow) exponents_.push_back(trace.inputsOf(trace.nodes[i])[1]);
  }
  bool isSlot(size_t i) const {
    const trace::Node& n = trace_.nodes[i];
    return n.op == core::OpKind::Full && is_floating(n.dtype) && n.shape.rank() == 0 && !trace_.holders[i] &&
           std::find(exponents_.begin(), exponents_.end(), static_cast<uint32_t>(i)) == exponents_.end();
  }

 private:
  const trace::Trace& trace_;
  std::vector<uint32_t> exponents_;
};

uint64_t deviceWord(Device device) {
  return (static_cast<uint64_t>(device.kind) << 32) | static_cast<uint32_t>(device.index);
}
}  // namespace

trace::TraceKey encodeTraceKey(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                               const std::vector<uint8_t>* argSlots, trace::ScalarSlots* slots) {
  trace::TraceKey key;
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
  put(deviceWord(trace.device));

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
    const trace::Node& n = trace.nodes[i];
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
        putKeyed(header(core::OpKind::Param, n.dtype, false, 0, 0));
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
    if (n.op == core::OpKind::Param) {
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

std::vector<uint32_t> scalarArgNodes(const trace::Trace& trace, const std::vector<uint8_t>& needed,
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

bool isDynamicKey(const std::vector<uint64_t>& words) { return !words.empty() && words[0] == kDynamicKeyMarker; }

uint64_t dynamicEntryHash(uint64_t structure) { return mix(structure, kDynamicKeyMarker); }

trace::TraceKey encodeDynamicKey(uint64_t structure, const trace::TraceGraph& g, const trace::Trace& trace,
                                 const std::vector<int64_t>& paramOfInput) {
  trace::TraceKey key;
  std::vector<uint64_t>& w = key.words;
  w.push_back(kDynamicKeyMarker);
  w.push_back(deviceWord(trace.device));
  for (const trace::Node& n : g.nodes) {
    w.push_back(header(n.op, n.dtype, n.keepdim, n.shape.rank(), n.numInputs));
    for (int64_t d : n.shape) w.push_back(static_cast<uint64_t>(d));
    for (uint32_t in : g.inputsOf(n)) w.push_back(in);
    w.push_back(n.numAttrs);
    for (int64_t a : g.attrsOf(n)) w.push_back(static_cast<uint64_t>(a));
    if (n.op == core::OpKind::Param && static_cast<size_t>(n.i0) >= paramOfInput.size()) {
      // A scalar argument, encoded as encodeTraceKey encodes it.
      w.push_back(~0ull);
      w.push_back(kScalarArgIndex + (static_cast<uint64_t>(n.i0) - paramOfInput.size()));
    } else if (n.op == core::OpKind::Param) {
      const int64_t p = paramOfInput[static_cast<size_t>(n.i0)];
      uint64_t alias = ~0ull;
      for (int64_t q = 0; q < p; ++q)
        if (trace.params[q].view.storage == trace.params[p].view.storage) {
          alias = static_cast<uint64_t>(q);
          break;
        }
      w.push_back(alias);
      w.push_back(static_cast<uint64_t>(p));
    } else {
      w.push_back(std::bit_cast<uint64_t>(n.f0));
      w.push_back(std::bit_cast<uint64_t>(n.f1));
      w.push_back(static_cast<uint64_t>(n.i0));
    }
  }
  w.push_back(~0ull);
  for (uint32_t o : g.outputs) w.push_back(o);
  uint64_t h = 0x84222325cbf29ce4ull;
  for (uint64_t x : w) h = mix(h, x);
  key.hash = dynamicEntryHash(structure);
  key.structureHash = h;
  return key;
}

bool dynamicExtents(const trace::TraceGraph& g, const std::vector<uint64_t>& words, std::vector<int64_t>* pattern) {
  size_t at = 2;  // the marker and the device word
  for (const trace::Node& n : g.nodes) {
    if (at >= words.size()) return false;
    const uint64_t head = words[at++];
    if (((head >> 16) & 0xffff) != static_cast<uint64_t>(n.shape.rank())) return false;
    for (int d = 0; d < n.shape.rank(); ++d) {
      if (at >= words.size()) return false;
      pattern->push_back(static_cast<int64_t>(words[at++]));
    }
    at += g.inputsOf(n).size() + 1 + g.attrsOf(n).size() + (n.op == core::OpKind::Param ? 2 : 3);
  }
  return at <= words.size();
}

bool decodeKey(const std::vector<uint64_t>& w, DecodedKey* k) {
  size_t i = 0;
  auto take = [&](size_t n, std::vector<uint64_t>* into) {
    if (n > w.size() - i) return false;
    if (into) into->assign(w.begin() + static_cast<long>(i), w.begin() + static_cast<long>(i + n));
    i += n;
    return true;
  };
  if (w.empty()) return false;
  k->dynamic = w[0] == kDynamicKeyMarker;
  if (k->dynamic) ++i;
  if (i >= w.size()) return false;
  k->device = w[i++];
  while (i < w.size() && w[i] != ~0ull) {
    KeyNode n;
    const uint64_t h = w[i++];
    n.op = static_cast<uint32_t>(h >> 48);
    n.dtype = static_cast<uint32_t>((h >> 40) & 0xff);
    n.keepdim = static_cast<uint32_t>((h >> 32) & 0xff);
    const size_t rank = (h >> 16) & 0xffff, numInputs = h & 0xffff;
    if (!take(rank, &n.shape) || !take(numInputs, &n.inputs) || i >= w.size()) return false;
    const uint64_t numAttrs = w[i++];
    if (numAttrs > w.size() || !take(static_cast<size_t>(numAttrs), &n.attrs)) return false;
    // Param: strides (static keys only), the aliased parameter, the position.
    const bool isParam = n.op == static_cast<uint32_t>(core::OpKind::Param);
    if (!take(isParam ? (k->dynamic ? 2 : rank + 2) : 3, &n.rest)) return false;
    k->nodes.push_back(std::move(n));
  }
  if (i >= w.size()) return false;
  k->outputs.assign(w.begin() + static_cast<long>(i + 1), w.end());
  return true;
}

}  // namespace kiln::exec::cache
