#include "runtime/exec/DynamicShapes.h"

#include <bit>
#include <chrono>
#include <map>
#include <thread>

#include "kiln/runtime.h"
#include "runtime/exec/CompileQueue.h"
#include "runtime/exec/Engine.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/cache/TraceKeyCodec.h"
#include "runtime/support/Log.h"
#include "runtime/support/StatsCounters.h"

namespace kiln::exec {

using core::OpCategory;
using core::OpKind;

namespace {

std::vector<int64_t> shapeSample(const trace::Trace& trace, const std::vector<uint8_t>& needed) {
  std::vector<int64_t> sample;
  for (size_t i = 0; i < trace.nodes.size(); ++i)
    if (needed[i])
      for (int64_t d : trace.nodes[i].shape) sample.push_back(d);
  return sample;
}

std::string extentName(int64_t e) { return e < 0 ? "s" + std::to_string(-1 - e) : std::to_string(e); }

std::string patternStr(const Shape& s) {
  std::string r = "[";
  for (int i = 0; i < s.rank(); ++i) r += (i ? ", " : "") + extentName(s[i]);
  return r + "]";
}

/// The operand extent `in` may stand for result extent `out`: the same
/// extent or size, or a static 1 that broadcasts.
bool broadcastsTo(int64_t in, int64_t out) { return in == out || in == 1; }

}  // namespace

bool DynamicShapes::noteNewShape(uint64_t structure, const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                 int64_t maxShapes) {
  StructureShapes& s = structures_[structure];
  if (s.kernel) return false;
  s.samples.push_back(shapeSample(trace, needed));
  return static_cast<int64_t>(s.samples.size()) > maxShapes;
}

std::shared_ptr<DynamicKernel> DynamicShapes::kernelOf(uint64_t structure) const {
  auto it = structures_.find(structure);
  return it == structures_.end() ? nullptr : it->second.kernel;
}

std::shared_ptr<DynamicKernel> DynamicShapes::plan(uint64_t structure, const trace::Trace& trace,
                                                   const std::vector<uint8_t>& needed,
                                                   std::span<const uint32_t> scalarArgs,
                                                   const std::vector<std::pair<uint32_t, int64_t>>* indexChecks,
                                                   const std::string& reason) {
  StructureShapes& s = structures_[structure];
  auto kernel = std::make_shared<DynamicKernel>();
  s.kernel = kernel;
  std::vector<std::vector<int64_t>> samples = std::move(s.samples);
  s.samples.clear();
  auto fail = [&](std::string why) {
    kernel->state = DynamicKernel::State::Failed;
    kernel->failure = std::move(why);
    return kernel;
  };
  if (!indexChecks) return fail(reason);
  // Extents that varied become sizes; equal columns of values share one.
  const std::vector<int64_t> current = shapeSample(trace, needed);
  std::map<std::vector<int64_t>, int> sizeOf;
  std::vector<int64_t> pattern(current.size());
  for (size_t pos = 0; pos < current.size(); ++pos) {
    std::vector<int64_t> column;
    bool varied = false;
    for (const std::vector<int64_t>& sample : samples) {
      if (sample.size() != current.size()) return fail("its traces differ in rank (hash collision)");
      column.push_back(sample[pos]);
      varied |= sample[pos] != current[pos];
    }
    if (!varied) {
      pattern[pos] = current[pos];
      continue;
    }
    auto [it, inserted] = sizeOf.emplace(std::move(column), static_cast<int>(sizeOf.size()));
    pattern[pos] = -1 - it->second;
  }
  std::vector<int64_t> paramOfInput;
  std::vector<uint32_t> nodeOfOutput;
  kernel->graph = trace::extractGraph(trace, needed, &paramOfInput, &nodeOfOutput, scalarArgs);
  kernel->scalarArgs = scalarArgs.size();
  size_t pos = 0;
  for (trace::Node& n : kernel->graph.nodes)
    for (int d = 0; d < n.shape.rank(); ++d) n.shape[d] = pattern[pos++];
  kernel->sizes = static_cast<int>(sizeOf.size());
  if (kernel->sizes == 0) return fail("its shapes do not differ");
  if (std::string why = checkDynamicSupport(kernel->graph); !why.empty()) return fail(why);
  kernel->indexChecks = *indexChecks;
  kernel->key = cache::encodeDynamicKey(structure, kernel->graph, trace, paramOfInput);
  return kernel;
}

std::shared_ptr<DynamicKernel> planFromCachedKey(uint64_t structure, const trace::Trace& trace,
                                                 const std::vector<uint8_t>& needed,
                                                 std::span<const uint32_t> scalarArgs,
                                                 const std::vector<uint64_t>& keyWords,
                                                 std::vector<std::pair<uint32_t, int64_t>> indexChecks) {
  auto kernel = std::make_shared<DynamicKernel>();
  std::vector<int64_t> paramOfInput;
  std::vector<uint32_t> nodeOfOutput;
  kernel->graph = trace::extractGraph(trace, needed, &paramOfInput, &nodeOfOutput, scalarArgs);
  kernel->scalarArgs = scalarArgs.size();
  std::vector<int64_t> pattern;
  if (!cache::dynamicExtents(kernel->graph, keyWords, &pattern)) return nullptr;
  size_t pos = 0;
  int sizes = 0;
  for (trace::Node& n : kernel->graph.nodes)
    for (int d = 0; d < n.shape.rank(); ++d) {
      n.shape[d] = pattern[pos++];
      if (n.shape[d] < 0) sizes = std::max(sizes, static_cast<int>(-n.shape[d]));
    }
  kernel->key = cache::encodeDynamicKey(structure, kernel->graph, trace, paramOfInput);
  if (kernel->key.words != keyWords || sizes == 0) return nullptr;
  kernel->sizes = sizes;
  kernel->indexChecks = std::move(indexChecks);
  return kernel;
}

std::string checkDynamicSupport(const trace::TraceGraph& g) {
  auto dynamic = [](const Shape& s) {
    for (int64_t d : s)
      if (d < 0) return true;
    return false;
  };
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const trace::Node& n = g.nodes[id];
    auto ins = g.inputsOf(n);
    const std::string at = std::string(core::opName(n.op)) + " (node " + std::to_string(id) + ", " +
                           patternStr(n.shape) + ")";
    // One operand, same type as the result: folders may forward the operand,
    // so its sizes must be the result's.
    if (ins.size() == 1) {
      const trace::Node& in = g.nodes[ins[0]];
      bool sameType = in.dtype == n.dtype && in.shape.rank() == n.shape.rank();
      for (int d = 0; sameType && d < n.shape.rank(); ++d)
        sameType = (in.shape[d] < 0) == (n.shape[d] < 0) && (in.shape[d] < 0 || in.shape[d] == n.shape[d]);
      if (sameType && in.shape != n.shape) return at + ": operand and result differ in size";
    }
    switch (core::opCategory(n.op)) {
      case OpCategory::Binary:
      case OpCategory::Compare:
      case OpCategory::Select:
      case OpCategory::Matmul:
      case OpCategory::Shape:
        break;
      case OpCategory::Conv: {
        bool any = dynamic(n.shape);
        for (uint32_t in : ins) any |= dynamic(g.nodes[in].shape);
        if (any) return at + ": conv2d with dynamic extents";
        continue;
      }
      case OpCategory::Scan:
      case OpCategory::Index: {
        const trace::Node& in = g.nodes[ins[0]];
        // Its lowering computes flat offsets from static strides.
        if (n.op == OpKind::ScatterAdd && (dynamic(in.shape) || dynamic(g.nodes[ins[1]].shape)))
          return at + ": scatter_add with dynamic extents";
        const int axis = static_cast<int>(n.i0 < 0 ? n.i0 + in.shape.rank() : n.i0);
        if (axis >= 0 && axis < in.shape.rank() && in.shape[axis] < 0)
          return at + ": the indexed axis has a dynamic extent";
        continue;
      }
      default:
        continue;
    }
    if (n.op == OpKind::Concat) {
      bool any = dynamic(n.shape);
      for (uint32_t in : ins) any |= dynamic(g.nodes[in].shape);
      if (any) return at + ": concat with dynamic extents";
      continue;
    }
    if (n.op == OpKind::Reshape) {
      const trace::Node& in = g.nodes[ins[0]];
      if ((dynamic(in.shape) || dynamic(n.shape)) && (in.shape.rank() == 0 || n.shape.rank() == 0))
        return at + ": reshape between rank 0 and dynamic extents";
      continue;
    }
    if (n.op == OpKind::Permute || n.op == OpKind::Slice) continue;
    // Broadcasting (elementwise, broadcast_to, matmul batch axes): each
    // operand extent is the result's, or a static 1.
    const int batch = n.op == OpKind::Matmul ? n.shape.rank() - 2 : n.shape.rank();
    for (uint32_t operand : ins) {
      const Shape& s = g.nodes[operand].shape;
      const int rank = n.op == OpKind::Matmul ? s.rank() - 2 : s.rank();
      for (int d = 0; d < rank; ++d) {
        const int64_t out = n.shape[batch - rank + d];
        if ((s[d] < 0 || out < 0) && !broadcastsTo(s[d], out))
          return at + ": operand extent " + extentName(s[d]) + " would have to broadcast to " + extentName(out) +
                 " at run time";
      }
    }
  }
  return {};
}

bool bindDynamicSizes(const DynamicKernel& kernel, const trace::Trace& trace, const std::vector<uint8_t>& needed,
                      std::span<const uint32_t> scalarArgs, std::vector<int64_t>* sizes, std::string* why) {
  const trace::TraceGraph& g = kernel.graph;
  if (scalarArgs.size() != kernel.scalarArgs) {
    *why = "it has " + std::to_string(scalarArgs.size()) + " scalar arguments, the kernel " +
           std::to_string(kernel.scalarArgs);
    return false;
  }
  const size_t firstScalar = g.inputs.size() - kernel.scalarArgs;
  size_t nextScalar = 0;
  sizes->assign(static_cast<size_t>(kernel.sizes), -1);
  std::vector<uint32_t> renum(trace.nodes.size(), 0);
  size_t next = 0, outputs = 0;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!needed[i]) continue;
    if (next >= g.nodes.size()) {
      *why = "it has more nodes than the kernel";
      return false;
    }
    renum[i] = static_cast<uint32_t>(next);
    const trace::Node& t = trace.nodes[i];
    const trace::Node& k = g.nodes[next];
    auto tIns = trace.inputsOf(t);
    auto kIns = g.inputsOf(k);
    auto tAttrs = trace.attrsOf(t);
    auto kAttrs = g.attrsOf(k);
    // The kernel's scalar arguments are the trace's, in order.
    const bool isScalar = nextScalar < scalarArgs.size() && scalarArgs[nextScalar] == i;
    const bool kernelScalar = k.op == OpKind::Param && static_cast<size_t>(k.i0) >= firstScalar;
    nextScalar += isScalar;
    bool same = (isScalar ? kernelScalar && k.i0 == static_cast<int64_t>(firstScalar + nextScalar - 1)
                          : t.op == k.op && !kernelScalar) &&
                t.dtype == k.dtype && t.keepdim == k.keepdim && t.shape.rank() == k.shape.rank() &&
                tIns.size() == kIns.size() && std::equal(tAttrs.begin(), tAttrs.end(), kAttrs.begin(), kAttrs.end());
    for (size_t j = 0; same && j < tIns.size(); ++j) same = renum[tIns[j]] == kIns[j];
    if (same && !isScalar && t.op != OpKind::Param)
      same = std::bit_cast<uint64_t>(t.f0) == std::bit_cast<uint64_t>(k.f0) &&
             std::bit_cast<uint64_t>(t.f1) == std::bit_cast<uint64_t>(k.f1) && t.i0 == k.i0;
    if (same && trace.holders[i]) same = outputs < g.outputs.size() && g.outputs[outputs++] == next;
    if (!same) {
      *why = "node " + std::to_string(next) + " (" + std::string(core::opName(t.op)) + ") differs in structure";
      return false;
    }
    for (int d = 0; d < t.shape.rank(); ++d) {
      const int64_t want = k.shape[d], have = t.shape[d];
      if (want >= 0 && want != have) {
        *why = "node " + std::to_string(next) + " (" + std::string(core::opName(t.op)) + ") has shape " +
               t.shape.str() + ", the kernel " + patternStr(k.shape) + " (static extents differ)";
        return false;
      }
      if (want >= 0) continue;
      int64_t& size = (*sizes)[static_cast<size_t>(-1 - want)];
      if (have <= 0 || (size >= 0 && size != have)) {
        *why = "node " + std::to_string(next) + " (" + std::string(core::opName(t.op)) + ") has shape " +
               t.shape.str() + ", the kernel " + patternStr(k.shape) +
               (have <= 0 ? " (zero-size)" : " (size " + extentName(want) + " would be both " + std::to_string(size) +
                                                 " and " + std::to_string(have) + ")");
        return false;
      }
      size = have;
    }
    ++next;
  }
  if (next != g.nodes.size() || outputs != g.outputs.size()) {
    *why = "it has fewer nodes or outputs than the kernel";
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The engine's side (Engine.h): planning, compiling and binding.
//===----------------------------------------------------------------------===//

void Engine::startDynamicCompile(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                 const trace::TraceKey& key, std::span<const uint32_t> scalarArgs,
                                 const std::vector<std::pair<uint32_t, int64_t>>* indexChecks,
                                 const std::string& reason) {
  std::shared_ptr<DynamicKernel> kernel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kernel = dynamic_.plan(key.structureHash, trace, needed, scalarArgs, indexChecks, reason);
  }
  if (kernel->state == DynamicKernel::State::Failed) {
    log().info("trace structure {:016x} was seen with more than {} shapes but cannot have a dynamic-shape kernel: "
               "{}; new shapes stay interpreted",
               key.structureHash, settings().max_shapes, kernel->failure);
    return;
  }
  std::string pattern;
  for (uint32_t id : kernel->graph.inputs) {
    if (!pattern.empty()) pattern += ' ';
    pattern += patternStr(kernel->graph.nodes[id].shape);
  }
  log().info("trace structure {:016x} was seen with more than {} shapes: compiling one dynamic-shape kernel "
             "(inputs {}; s<k> are sizes)",
             key.structureHash, settings().max_shapes, pattern);
  const uint64_t structure = key.structureHash;
  compiles_.submit(CompileService::Lane::Traces, settings().jit == JitMode::Sync,
                   [this, kernel, structure] { compileDynamicJob(kernel, structure); });
}

void Engine::compileDynamicJob(std::shared_ptr<DynamicKernel> kernel, uint64_t structure) {
  if (int delay = compileDelayMs_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  char name[40];
  std::snprintf(name, sizeof(name), "dyn_%016llx", static_cast<unsigned long long>(kernel->key.hash));
  BuiltKernel built = compiles_.kernelFor(kernel->key, kernel->graph, name, kernel->sizes);
  std::shared_ptr<Executable> exe = built.executable;
  const bool fromCache = built.fromCache;
  const CompileResult& result = built.result;
  if (exe && exe->dynamicSizes != kernel->sizes) exe = nullptr;
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!exe) {
    kernel->failure = "its dynamic-shape kernel failed to compile: " + result.error;
    kernel->state = DynamicKernel::State::Failed;
    c.compileFailures.fetch_add(1);
    log().warn("trace structure {:016x}: {}; new shapes stay interpreted", structure, kernel->failure);
    return;
  }
  kernel->executable = exe;
  kernel->state = DynamicKernel::State::Ready;
  if (fromCache) return;
  c.compiles.fetch_add(1);
  c.compileUs.fetch_add(static_cast<uint64_t>(result.timings.totalMs() * 1000.0));
  log().info("tier-up: trace structure {:016x} compiled into one dynamic-shape kernel ({} sizes, {} fused "
             "kernel(s)) in {:.1f} ms",
             structure, kernel->sizes, exe->kernelCount(), result.timings.totalMs());
}

void Engine::startRegionDynamicCompile(const trace::Trace& sub, const trace::TraceKey& key) {
  const std::vector<uint8_t> needed(sub.nodes.size(), 1);
  std::vector<std::pair<uint32_t, int64_t>> checks;
  std::string reason;
  const bool compilable = planIndexChecks(sub, needed, &checks, &reason);
  startDynamicCompile(sub, needed, key, {}, compilable ? &checks : nullptr, reason);
}

std::shared_ptr<Executable> Engine::bindDynamic(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                                const trace::TraceKey& key, TraceProfile* profile) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (profile->executable || profile->tier != Tier::Interpreted) return profile->executable;
  std::shared_ptr<DynamicKernel> kernel = dynamic_.kernelOf(key.structureHash);
  // Without a kernel (yet), the static tiering and its storm guard decide.
  if (!kernel || kernel->state != DynamicKernel::State::Ready) return nullptr;
  return bindLocked(*kernel, trace, needed, key, profile);
}

std::shared_ptr<Executable> Engine::cachedDynamic(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                                  const trace::TraceKey& key, TraceProfile* profile,
                                                  std::vector<std::pair<uint32_t, int64_t>> indexChecks,
                                                  KernelCache::Probe probe) {
  const uint64_t structure = key.structureHash;
  std::shared_ptr<DynamicKernel> kernel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kernel = dynamic_.kernelOf(structure);
  }
  if (!kernel) {
    std::vector<uint64_t> words;
    if (!KernelCache::instance().keyWordsOf(cache::dynamicEntryHash(structure), trace.device, probe, &words))
      return nullptr;
    const std::vector<uint32_t> scalarArgs =
        profile->scalarArgs ? cache::scalarArgNodes(trace, needed, *profile->scalarArgs) : std::vector<uint32_t>{};
    kernel = planFromCachedKey(structure, trace, needed, scalarArgs, words, std::move(indexChecks));
    if (!kernel) return nullptr;
    // Loaded and checked like any entry, under the key rebuilt from this trace.
    auto exe = KernelCache::instance().find(kernel->key, KernelCache::Probe::Always);
    if (!exe || exe->dynamicSizes != kernel->sizes) return nullptr;
    kernel->executable = std::move(exe);
    kernel->state = DynamicKernel::State::Ready;
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto known = dynamic_.kernelOf(structure)) kernel = known;  // another thread was first
    else dynamic_.adopt(structure, kernel);
    log().info("trace structure {:016x}: dynamic-shape kernel ({} sizes) loaded from the disk cache", structure,
               kernel->sizes);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (profile->executable) return profile->executable;
  if (kernel->state != DynamicKernel::State::Ready) return nullptr;
  return bindLocked(*kernel, trace, needed, key, profile);
}

std::shared_ptr<Executable> Engine::bindLocked(const DynamicKernel& kernel, const trace::Trace& trace,
                                               const std::vector<uint8_t>& needed, const trace::TraceKey& key,
                                               TraceProfile* profile) {
  std::string why;
  const std::vector<uint32_t> scalarArgs =
      profile->scalarArgs ? cache::scalarArgNodes(trace, needed, *profile->scalarArgs) : std::vector<uint32_t>{};
  if (bindDynamicSizes(kernel, trace, needed, scalarArgs, &profile->dynamicSizes, &why)) {
    profile->executable = kernel.executable;
    profile->indexChecks = kernel.indexChecks;
    profile->tier = Tier::Compiled;
    return profile->executable;
  }
  why = "its shape does not fit the dynamic-shape kernel of its structure: " + why;
  log().info("trace {:016x} stays interpreted: {}", key.hash, why);
  profile->dynamicSizes.clear();
  profile->tier = Tier::InterpretOnly;
  profile->failure = why;
  return nullptr;
}

}  // namespace kiln::exec
