#include "runtime/cache/CacheEntryCheck.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <set>

#include "runtime/core/OpKind.h"
#include "runtime/cache/TraceKeyCodec.h"

namespace kiln::exec::cache {

namespace {

uint64_t addSat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t mulSat(uint64_t a, uint64_t b) { return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
uint64_t align64(uint64_t x) { return x > UINT64_MAX - 63 ? UINT64_MAX : (x + 63) / 64 * 64; }

/// Elements of a key shape; dynamic extents (< 0 as int64) count as 1.
uint64_t elements(const std::vector<uint64_t>& shape, size_t from = 0, size_t to = SIZE_MAX) {
  uint64_t n = 1;
  for (size_t d = from; d < shape.size() && d < to; ++d) {
    const auto extent = static_cast<int64_t>(shape[d]);
    n = mulSat(n, extent < 0 ? 1 : static_cast<uint64_t>(extent));
  }
  return n;
}

bool isParam(const KeyNode& n) { return n.op == static_cast<uint32_t>(core::OpKind::Param); }

std::string pairStr(uint32_t output, uint32_t input) {
  return std::to_string(output) + ":" + std::to_string(input);
}

/// Launches a GPU entry may list: each names a kernel symbol, a launch
/// shape a GPU accepts, and buffers of the kernel's own arguments.
std::string checkDispatches(const EntryMeta& meta, size_t inputs, size_t outputs) {
  if (meta.dispatches.empty()) return "a GPU binary without launches";
  if (std::string why = checkLaunchProgram(meta.launchProgram, meta.dynamicSizes); !why.empty()) return why;
  const auto steps = static_cast<int64_t>(meta.launchProgram.size());
  auto isStep = [&](int64_t step) { return step >= 0 && step < steps; };
  if (meta.kernelCount != static_cast<int>(meta.dispatches.size()))
    return "kernel_count=" + std::to_string(meta.kernelCount) + " but " + std::to_string(meta.dispatches.size()) +
           " launches";
  for (const KernelDispatch& d : meta.dispatches) {
    const std::string launch = "launch of '" + d.symbol.substr(0, 64) + "'";
    bool name = !d.symbol.empty() && d.symbol.size() <= 256;
    for (char ch : d.symbol) name &= std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
    if (!name) return launch + ": not a kernel name";
    int64_t threads = 1;
    for (int i = 0; i < 3; ++i) {
      // A grid size the launch program computes is checked as it launches.
      const bool gridOk = d.gridSteps[i] >= 0 ? isStep(d.gridSteps[i])
                                               : d.gridSteps[i] == -1 && d.grid[i] >= 1 && d.grid[i] <= 0x7fffffff;
      if (!gridOk || d.block[i] < 1 || d.block[i] > 1024) return launch + ": grid or block extent out of range";
      threads *= d.block[i];
    }
    if (threads > 1024) return launch + ": " + std::to_string(threads) + " threads in a block";
    for (const DispatchArg& a : d.args)
      if (std::string why = checkGpuDispatchArg(a, static_cast<int64_t>(inputs), static_cast<int64_t>(outputs),
                                                static_cast<uint64_t>(meta.scratchBytes), !meta.dynamicScratch.empty(),
                                                steps);
          !why.empty())
        return launch + " " + why;
  }
  return {};
}

}  // namespace

bool kernelBufferCounts(const std::vector<uint64_t>& keyWords, uint32_t* inputs, uint32_t* outputs) {
  DecodedKey key;
  if (!decodeKey(keyWords, &key)) return false;
  *inputs = 0;
  for (const KeyNode& n : key.nodes) *inputs += isParam(n);
  *outputs = static_cast<uint32_t>(key.outputs.size());
  return true;
}

std::string entrySymbolFor(const std::vector<uint64_t>& keyWords, uint64_t keyHash) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, keyHash);
  const bool dynamic = isDynamicKey(keyWords);
  return std::string("kiln_entry_") + (dynamic ? "dyn_" : "") + hex;
}

uint64_t scratchBound(const DecodedKey& key) {
  uint64_t bytes = 0;
  for (const KeyNode& n : key.nodes) {
    bytes = addSat(bytes, align64(mulSat(elements(n.shape), 8)));
    if (n.op != static_cast<uint32_t>(core::OpKind::Matmul) || n.shape.size() < 2 || n.inputs.size() != 2) continue;
    // Both operands broadcast to [batch..., m, k] and [batch..., k, n].
    if (n.inputs[0] >= key.nodes.size()) continue;
    const std::vector<uint64_t>& lhs = key.nodes[n.inputs[0]].shape;
    if (lhs.empty()) continue;
    const uint64_t batch = elements(n.shape, 0, n.shape.size() - 2);
    const uint64_t k = elements(lhs, lhs.size() - 1);
    const uint64_t m = elements(n.shape, n.shape.size() - 2, n.shape.size() - 1);
    const uint64_t cols = elements(n.shape, n.shape.size() - 1);
    bytes = addSat(bytes, align64(mulSat(mulSat(mulSat(batch, m), k), 8)));
    bytes = addSat(bytes, align64(mulSat(mulSat(mulSat(batch, k), cols), 8)));
  }
  return addSat(mulSat(bytes, 4), uint64_t{1} << 20);
}

std::string checkMetadata(const EntryMeta& meta, uint64_t keyHash) {
  DecodedKey key;
  if (!decodeKey(meta.keyWords, &key)) return "its key does not decode";
  if (meta.keyHash != keyHash) return "key_hash does not match the key it is filed under";
  const bool host = meta.format == BinaryFormat::SharedObject;
  if (host) {
    const std::string symbol = entrySymbolFor(meta.keyWords, keyHash);
    if (meta.entry != symbol) return "entry symbol '" + meta.entry + "' is not this key's kernel ('" + symbol + "')";
    if (!meta.dispatches.empty()) return "a host kernel with GPU launches";
    if (!meta.launchProgram.empty()) return "a host kernel with a launch program";
  } else if (!meta.entry.empty()) {
    return "a GPU binary with a host entry symbol '" + meta.entry + "'";
  }
  if (meta.device != deviceOfFormat(meta.format))
    return "device '" + meta.device + "' does not run " + binaryFormatName(meta.format) + " code";

  // The kernel's arguments: the key's parameters, then its live outputs.
  std::vector<const KeyNode*> inputs, outputs;
  int64_t sizes = 0;
  for (const KeyNode& n : key.nodes) {
    if (isParam(n)) inputs.push_back(&n);
    for (uint64_t e : n.shape)
      if (static_cast<int64_t>(e) < 0) sizes = std::max(sizes, -static_cast<int64_t>(e));
  }
  for (uint64_t o : key.outputs) {
    if (o >= key.nodes.size()) return "its key names a live output beyond its nodes";
    outputs.push_back(&key.nodes[o]);
  }
  if (!key.dynamic && (meta.dynamicSizes != 0 || !meta.dynamicScratch.empty()))
    return "dynamic_sizes=" + std::to_string(meta.dynamicSizes) + " on a static-shape kernel";
  if (key.dynamic && meta.dynamicSizes != sizes)
    return "dynamic_sizes=" + std::to_string(meta.dynamicSizes) + ", but the key has " + std::to_string(sizes) +
           " dynamic sizes";

  // GPU kernels take no donated buffers (their compilers assume outputs
  // and inputs never alias).
  if (meta.format != BinaryFormat::SharedObject && !meta.donations.empty())
    return "buffer donations in a GPU binary";
  std::set<uint32_t> donatedOutputs, donorInputs;
  for (auto [output, input] : meta.donations) {
    if (output >= outputs.size() || input >= inputs.size())
      return "donation " + pairStr(output, input) + " beyond the kernel's " + std::to_string(outputs.size()) +
             " outputs and " + std::to_string(inputs.size()) + " inputs";
    // Pairs of different types are the compiler's to offer and the
    // launcher's to skip (Engine::launchCompiled); sharing twice is not.
    if (!donatedOutputs.insert(output).second || !donorInputs.insert(input).second)
      return "donation " + pairStr(output, input) + " shares a buffer twice";
  }

  const uint64_t bound = scratchBound(key);
  uint64_t scratch = meta.scratchBytes;
  // dynamic_scratch: per temporary, bytes per unit of its sizes, the number
  // of sizes, the size numbers (see Executable::dynamicScratchBytes).
  for (size_t i = 0; i < meta.dynamicScratch.size();) {
    if (i + 1 >= meta.dynamicScratch.size()) return "malformed dynamic_scratch";
    const int64_t bytes = meta.dynamicScratch[i], count = meta.dynamicScratch[i + 1];
    if (bytes < 0 || count < 0 || static_cast<uint64_t>(count) > meta.dynamicScratch.size() - i - 2)
      return "malformed dynamic_scratch";
    for (int64_t k = 0; k < count; ++k) {
      const int64_t size = meta.dynamicScratch[i + 2 + static_cast<size_t>(k)];
      if (size < 0 || size >= meta.dynamicSizes)
        return "dynamic_scratch names size " + std::to_string(size) + " of " + std::to_string(meta.dynamicSizes);
    }
    scratch = addSat(scratch, static_cast<uint64_t>(bytes));
    i += 2 + static_cast<size_t>(count);
  }
  if (scratch > bound)
    return "scratch of " + std::to_string(scratch) + " bytes, more than the " + std::to_string(bound) +
           " bytes any kernel of this trace can need";
  if (!host) {
    if (std::string why = checkDispatches(meta, inputs.size(), outputs.size()); !why.empty()) return why;
  }
  const uint64_t maxKernels = 16 * (key.nodes.size() + 1);
  if (meta.kernelCount < 1 || static_cast<uint64_t>(meta.kernelCount) > maxKernels)
    return "kernel_count=" + std::to_string(meta.kernelCount) + " (1 to " + std::to_string(maxKernels) +
           " for this trace)";
  return {};
}

}  // namespace kiln::exec::cache
