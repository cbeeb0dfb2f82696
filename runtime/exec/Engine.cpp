#include "runtime/exec/Engine.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <time.h>
#include <unordered_set>

#include "kiln/error.h"
#include "kiln/runtime.h"
#include "runtime/core/ShapeRules.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/exec/CompileQueue.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/support/Log.h"
#include "runtime/exec/RegionExecutor.h"
#include "runtime/exec/Regions.h"
#include "runtime/exec/WarmStart.h"
#include "runtime/support/StatsCounters.h"
#include "runtime/backends/Hal.h"
#include "runtime/backends/cpu/CachingHostAllocator.h"
#include "runtime/exec/LaunchTarget.h"
#include "runtime/support/LeastRecentlyUsed.h"
#include "runtime/support/ProcessId.h"
#include "runtime/interp/Kernels.h"
#include "runtime/trace/Recorder.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::exec {

namespace {
/// Per-run scratch. Not thread_local: a thread's recorder flushes at thread
/// exit, after thread_local objects constructed later are already gone.
struct RunScratch {
  std::vector<uint8_t> needed;
  std::vector<uint32_t> lastUse;
  std::vector<int64_t> paramOfInput;
  std::vector<uint32_t> nodeOfOutput;
};

/// launchCompiled's per-launch tables.
struct LaunchScratch {
  std::vector<int64_t> paramOfInput;
  std::vector<uint32_t> nodeOfOutput, nodeOfInput;
  std::vector<core::View> dense;
  std::vector<int64_t> donor;
};

/// A thread's reused instance of `T`: a dispatch-bound loop of small steps
/// otherwise allocates and frees its tables at every step (7 % of a tiny
/// compiled step's instructions). A nested use on the same thread, and a
/// use after the thread's instance is gone (the exit's last flush runs
/// after the main thread's thread_locals are destroyed), get a fresh
/// instance of their own.
template <class T>
class ThreadScratch {
 public:
  ThreadScratch() {
    if (!slotGone()) {
      Slot& slot = slotOfThread();
      if (!slot.busy) {
        slot.busy = true;
        claimed_ = &slot;
        value_ = &slot.value;
        return;
      }
    }
    own_.emplace();
    value_ = &*own_;
  }
  ~ThreadScratch() {
    if (claimed_) claimed_->busy = false;
  }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  T& operator*() { return *value_; }
  T* operator->() { return value_; }

 private:
  struct Slot {
    T value;
    bool busy = false;
    ~Slot() { slotGone() = true; }
  };
  static Slot& slotOfThread() {
    thread_local Slot slot;
    return slot;
  }
  /// Trivially destructible, so readable until the thread ends.
  static bool& slotGone() {
    thread_local bool gone = false;
    return gone;
  }
  Slot* claimed_ = nullptr;
  std::optional<T> own_;
  T* value_ = nullptr;
};

using core::OpKind;

bool jitEnabled() {
  const JitMode mode = settings().jit;
  return mode == JitMode::Async || mode == JitMode::Sync;
}

/// Modes that run compiled kernels: KILN_JIT=off interprets everything,
/// also a trace compiled while another mode was set (the fuzzer's seed 6637
/// came back one ulp off the interpreter's result under off).
bool kernelsEnabled() { return settings().jit != JitMode::Off; }

/// Modes that run kernels from the cache.
bool cacheEnabled() { return kernelsEnabled(); }

std::string opsOf(const trace::Trace& trace, const std::vector<uint8_t>& needed) {
  std::string ops;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!needed[i] || trace.nodes[i].op == OpKind::Param) continue;
    if (!ops.empty()) ops += ',';
    ops += core::opName(trace.nodes[i].op);
  }
  return ops;
}

uint64_t toUs(double ms) { return static_cast<uint64_t>(ms * 1000.0); }

/// Does the device compile hot traces (for the host or for itself)?
bool compilesTraces(Device device) { return hal::deviceContext(device).compileTarget().has_value(); }

/// Whether an integer cast from `from` to `to` keeps every index the launch
/// check lets through (those in [0, extent)): `to` holds them all. An index
/// read through a cast that wraps it (i64 200 as i8 is -56) is not the
/// parameter's value, which is all the check sees.
bool keepsIndicesBelow(int64_t extent, DType from, DType to) {
  const auto range = core::integerRange(to);
  return is_integral(from) && range && extent - 1 <= range->second;
}
}  // namespace

/// An out-of-range index can be caught before launch when the index comes
/// from a parameter through shape-only ops and casts that keep the indices
/// the check allows; an index computed inside the trace (a cast that may
/// wrap one included) makes it uncompilable.
bool planIndexChecks(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                     std::vector<std::pair<uint32_t, int64_t>>* checks, std::string* reason) {
  std::vector<int64_t> inputPos(trace.nodes.size(), -1);
  int64_t nextInput = 0;
  for (size_t i = 0; i < trace.nodes.size(); ++i)
    if (needed[i] && trace.nodes[i].op == OpKind::Param) inputPos[i] = nextInput++;
  const RegionBoundaries boundaries(trace.device);
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const OpKind op = trace.nodes[i].op;
    if (needed[i] && boundaries.contains(trace, trace.nodes[i])) {
      // Collectives call the communicator between kernels, CUDA matmuls and
      // row reductions and GPUs' index_add, scatter_add and cumsum the
      // device's library: the trace runs as compiled regions around them
      // (Regions.h).
      *reason = "the trace has " + std::string(core::opName(op)) + ", which runs between compiled regions";
      return false;
    }
  }
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    // Zero-size values cost nothing to interpret, and bare-pointer kernel
    // signatures cannot carry them.
    if (needed[i] && trace.nodes[i].shape.numel() == 0) {
      *reason = "the trace has zero-size tensors (they run interpreted)";
      return false;
    }
  }
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const trace::Node& n = trace.nodes[i];
    if (!needed[i] || (n.op != OpKind::IndexSelect && n.op != OpKind::Gather && n.op != OpKind::IndexAdd &&
                       n.op != OpKind::ScatterAdd))
      continue;
    auto ins = trace.inputsOf(n);
    const int64_t extent = trace.nodes[ins[0]].shape[static_cast<int>(n.i0)];
    uint32_t src = ins[1];
    for (;;) {
      const trace::Node& s = trace.nodes[src];
      const bool passThrough = s.op == OpKind::Reshape || s.op == OpKind::Permute || s.op == OpKind::BroadcastTo ||
                               s.op == OpKind::Slice ||
                               (s.op == OpKind::Cast &&
                                keepsIndicesBelow(extent, trace.nodes[trace.inputsOf(s)[0]].dtype, s.dtype));
      if (!passThrough) break;
      src = trace.inputsOf(s)[0];
    }
    if (trace.nodes[src].op != OpKind::Param) {
      *reason = std::string(core::opName(n.op)) + " uses an index computed inside the trace";
      return false;
    }
    checks->emplace_back(static_cast<uint32_t>(inputPos[src]), extent);
  }
  return true;
}

Engine& Engine::instance() {
  static Engine* e = new Engine();  // never destroyed: threads may flush at exit
  return *e;
}

namespace {
/// Start-up: the exec layer installs its engine as the runner of every
/// flushed trace while libkiln is loaded, before any code can record.
[[maybe_unused]] const bool gEngineInstalled = [] {
  trace::installTraceRunner(Engine::instance());
  return true;
}();
}  // namespace

trace::TraceKey Engine::lastKey() { return trace::Recorder::current().lastKey(); }

void Engine::compileRegion(std::shared_ptr<TraceProfile> profile, std::shared_ptr<const trace::TraceGraph> graph,
                           trace::TraceKey key, bool now) {
  compiles_.submit(CompileService::Lane::Regions, now,
                   [this, held = std::move(profile), graph = std::move(graph), key = std::move(key)] {
                     compileJob(held, graph, key, CodegenEffort::Full);
                   });
}

void Engine::drainCompiles() { compiles_.drain(); }

void Engine::shutdownCompiles() { compiles_.shutdown(); }

uint64_t Engine::runCount(const trace::TraceKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = profiles_.find(key);
  return it == profiles_.end() ? 0 : it->second->runs;
}

Tier Engine::tierOf(const trace::TraceKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = profiles_.find(key);
  return it == profiles_.end() ? Tier::Interpreted : it->second->tier;
}

void Engine::resetProfilesForTesting() {
  drainCompiles();
  std::lock_guard<std::mutex> lock(mutex_);
  profiles_.clear();
  shapesPerStructure_.clear();
  dynamic_.clear();
  scalarArgs_.clear();
}

double Engine::compileMsPerOpForTesting() {
  std::lock_guard<std::mutex> lock(mutex_);
  return compileCost_.msPerOp();
}

std::pair<size_t, size_t> Engine::profileCountsForTesting() {
  std::lock_guard<std::mutex> lock(mutex_);
  return {profiles_.size(), scalarArgs_.size()};
}

size_t Engine::structureCountForTesting() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::max({scalarArgs_.size(), dynamic_.size(), shapesPerStructure_.size()});
}

std::shared_ptr<Executable> Engine::probeCache(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                               const trace::TraceKey& key, TraceProfile* profile, bool always) {
  std::vector<std::pair<uint32_t, int64_t>> checks;
  std::string reason;
  // Only traces the engine would compile can have cached kernels.
  if (!planIndexChecks(trace, needed, &checks, &reason)) return nullptr;
  const auto probe = always ? KernelCache::Probe::Always : KernelCache::Probe::Listed;
  auto exe = KernelCache::instance().find(key, probe);
  if (!exe) return cachedDynamic(trace, needed, key, profile, std::move(checks), probe);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!profile->executable) {
    profile->indexChecks = std::move(checks);
    profile->executable = exe;
    profile->tier = Tier::Compiled;
  }
  return profile->executable;
}

std::shared_ptr<TraceProfile> Engine::profileLocked(const trace::TraceKey& key, bool* inserted) {
  auto [it, isNew] = profiles_.try_emplace(key);
  if (isNew) it->second = std::make_shared<TraceProfile>();
  it->second->lastUse = ++useCounter_;
  *inserted = isNew;
  std::shared_ptr<TraceProfile> profile = it->second;
  const auto limit = static_cast<size_t>(settings().max_trace_keys);
  if (profiles_.size() > limit) {
    const std::size_t dropped =
        trimLeastRecentlyUsed(profiles_, limit, [](const std::shared_ptr<TraceProfile>& p) { return p->lastUse; });
    counters().profilesEvicted.fetch_add(dropped, std::memory_order_relaxed);
    KernelCache::instance().trimMemory(limit);
    // The per-structure tables keep only structures that still have a key,
    // so they are bounded by the same limit.
    std::unordered_set<uint64_t> structures, valueBlind;
    for (const auto& entry : profiles_) {
      structures.insert(entry.first.structureHash);
      valueBlind.insert(entry.first.valueBlindHash);
    }
    std::erase_if(shapesPerStructure_, [&](const auto& e) { return !structures.contains(e.first); });
    dynamic_.retain(structures);
    scalarArgs_.retain(valueBlind);
  }
  return profile;
}

void Engine::compileJob(std::shared_ptr<TraceProfile> profile, std::shared_ptr<const trace::TraceGraph> graph,
                        trace::TraceKey key, CodegenEffort effort, std::shared_ptr<const CompileResult> quick) {
  if (int delay = compileDelayMs_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(key.hash));
  timespec cpu0{}, cpu1{};
  // The first compiled run's scratch is faulted in before the kernel is
  // installed, not in the user's step: 24 MB for the transformer bench's
  // step, which made its first compiled run 20 ms instead of 9. A thread of
  // its own starts on it as soon as the compiler knows its size, while LLVM
  // runs: on these VMs a fresh huge page's first write took 50-60 ms in one
  // run of three, all of it between the compile and the kernel (it now
  // shares the cores with the compile and the user's threads instead). Only
  // from a compile at normal priority (urgent, or in the user's thread): a
  // helper inherits its thread's priority, and one at the lowest, which the
  // governor never raises, could be starved for as long as the user's
  // threads keep the cores busy, holding the kernel back at the join below.
  auto* host = graph->device.kind == Device::CPU ? dynamic_cast<hal::CachingHostAllocator*>(&hal::hostAllocator())
                                                 : nullptr;
  std::jthread prefaulter;  // joined on every way out
  std::function<void(std::size_t)> scratchKnown;
  if (host && !quick)
    scratchKnown = [&prefaulter, host](std::size_t bytes) {
      if (prefaulter.joinable() || currentThreadIsIdlePriority()) return;
      try {
        prefaulter = std::jthread([host, bytes] { host->prefaultOne(bytes); });
      } catch (const std::system_error&) {
        // No thread: the compile thread faults it in after the compile.
      }
    };
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  BuiltKernel built = compiles_.kernelFor(key, *graph, name, -1, effort, quick.get(), std::move(scratchKnown));
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  const std::shared_ptr<Executable>& exe = built.executable;
  const bool fromCache = built.fromCache;
  const CompileResult& result = built.result;
  const auto faultStart = std::chrono::steady_clock::now();
  if (prefaulter.joinable()) prefaulter.join();
  if (host && exe && exe->dynamicSizes == 0 && exe->scratchBytes() > 0) host->prefaultOne(exe->scratchBytes());
  const double faultMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - faultStart).count();
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(mutex_);
  if (profile->region) {  // a hot region (RegionExecutor.cpp): counted apart
    RegionExecutor::noteCompiled(profile.get(), exe, fromCache, result, name);
    return;
  }
  const bool replacesQuick =
      profile->executable && profile->executable->codegen == CodegenEffort::Quick && effort == CodegenEffort::Full;
  if (!exe && replacesQuick) {
    log().log(compilesStopped() ? spdlog::level::debug : spdlog::level::warn,
              "trace {} ({} ops) keeps its quick-codegen kernel: the full compile failed: {}", name, profile->ops,
              result.error);
    profile->quickCompile.reset();  // tried once; its modules are megabytes
    return;
  }
  if (exe) {
    profile->executable = exe;
    profile->tier = Tier::Compiled;
    if (fromCache) return;
    // The compile thread's CPU time, not its wall time (which depends on
    // its priority); a sync compile cuts the module into shares that
    // compile on other threads, so only background compiles teach it. The
    // model estimates Full compiles (chooseCodegenEffort) from the trace,
    // which a Quick kernel's upgrade does not make: it only redoes machine
    // code, and taught the model compiles several times cheaper than they are.
    if (onCompileQueueThread() && exe->codegen == CodegenEffort::Full && !built.codegenOnly)
      compileCost_.noteCompile(profile->ops, 1e3 * static_cast<double>(cpu1.tv_sec - cpu0.tv_sec) +
                                                 1e-6 * static_cast<double>(cpu1.tv_nsec - cpu0.tv_nsec));
    c.compileUs.fetch_add(toUs(result.timings.totalMs()));
    c.importUs.fetch_add(toUs(result.timings.importMs));
    c.lowerUs.fetch_add(toUs(result.timings.lowerMs));
    c.llvmUs.fetch_add(toUs(result.timings.llvmMs));
    c.jitUs.fetch_add(toUs(result.timings.jitMs));
    if (replacesQuick) {
      c.fullRecompiles.fetch_add(1);
      profile->quickCompile.reset();
      log().info("trace {} ({} ops): its quick-codegen kernel is replaced by a full one, compiled in {:.1f} ms "
                 "(codegen+link {:.1f})",
                 name, profile->ops, result.timings.totalMs(), result.timings.jitMs);
      return;
    }
    c.compiles.fetch_add(1);
    log().info("tier-up: trace {} ({} ops) compiled into {} fused kernel(s) in {:.1f} ms (import {:.1f}, lower "
               "{:.1f}, llvm {:.1f}, {} codegen+link {:.1f}; its scratch faulted in, {:.1f} ms more); {:.0f}% of "
               "executed ops ran compiled so far",
               name, profile->ops, exe->kernelCount(), result.timings.totalMs(), result.timings.importMs,
               result.timings.lowerMs, result.timings.llvmMs, codegenEffortName(exe->codegen), result.timings.jitMs,
               faultMs, compiledOpPercent());
    if (exe->codegen == CodegenEffort::Quick) {
      c.quickCompiles.fetch_add(1);
      auto kept = std::make_shared<CompileResult>(std::move(built.result));
      kept->object = {};  // loaded: only the optimised modules are needed again
      profile->quickCompile = std::move(kept);
    }
  } else {
    profile->tier = Tier::InterpretOnly;
    profile->failure = result.error;
    c.compileFailures.fetch_add(1);
    log().log(compilesStopped() ? spdlog::level::debug : spdlog::level::warn,
              "trace {} ({} ops) stays interpreted: compilation failed: {}", name, profile->ops, result.error);
  }
}

void Engine::recompileFull(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                           const std::shared_ptr<TraceProfile>& profile, const trace::TraceKey& key,
                           std::span<const uint32_t> scalarArgs, std::vector<int64_t>* paramOfInput,
                           std::vector<uint32_t>* nodeOfOutput) {
  // Not where nothing compiles (KILN_JIT=off or replay: the Quick kernel
  // came from the disk cache and stays; replay says so, once a trace).
  const bool compiles = jitEnabled() && traceCompiles_;
  if (!compiles && settings().jit != JitMode::Replay) return;
  std::shared_ptr<const CompileResult> quick;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (profile->fullRecompileSubmitted || profile->region) return;
    if (compiles && ++profile->quickRuns < kFullRecompileAfterQuickRuns) return;
    profile->fullRecompileSubmitted = true;
    quick = profile->quickCompile;
  }
  if (!compiles) {
    log().warn("trace {:016x} ({} ops): KILN_JIT=replay runs its cached kernel, which has quick codegen (the "
               "process that compiled it ended before its full-codegen kernel replaced it) and runs slower; a run "
               "with compiling on (KILN_JIT=async or sync) replaces it in the cache",
               key.hash, profile->ops);
    return;
  }
  auto graph = std::make_shared<const trace::TraceGraph>(
      trace::extractGraph(trace, needed, paramOfInput, nodeOfOutput, scalarArgs));
  const bool now = settings().jit == JitMode::Sync;
  log().info("trace {:016x} ({} ops): its kernel has quick codegen; compiling it with full codegen {}{}", key.hash,
             profile->ops, now ? "now" : "in the background, at the lowest priority, behind first compiles",
             quick ? " (machine code only, from the quick compile's optimised modules)" : "");
  compiles_.submit(
      CompileService::Lane::Traces, now,
      [this, profile, graph, key, quick] { compileJob(profile, graph, key, CodegenEffort::Full, quick); },
      JobRank::Upgrade);
}

namespace {
/// The interpreted runs of `profile` that its moving average holds (the
/// untimed ones left out: TieringPolicy.h).
uint32_t timedRuns(const TraceProfile& profile) {
  return profile.interpretedSamples > kUntimedRuns ? profile.interpretedSamples - kUntimedRuns : 0;
}
}  // namespace

CompilePriority Engine::compilePriorityLocked(const TraceProfile& profile) const {
  if (settings().compile_share == 0) return CompilePriority::Background;  // no compile ever takes a core
  TraceCompileFacts facts;
  facts.runs = profile.runs;
  facts.interpretedMs = timedRuns(profile) >= kTimedRunsForCostModel ? profile.interpretedMs : 0;
  facts.estimatedCompileMs = compileCost_.estimateMs(profile.ops);
  return decideCompilePriority(facts);
}

void Engine::noteInterpretedRun(TraceProfile* profile, uint64_t key, double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t earlier = profile->interpretedSamples++;
  if (earlier < kUntimedRuns) return;
  profile->interpretedMs = earlier == kUntimedRuns ? ms : std::min(ms, 0.5 * (profile->interpretedMs + ms));
  if (profile->tier != Tier::Compiling || profile->urgentCompile || settings().jit != JitMode::Async ||
      compilePriorityLocked(*profile) != CompilePriority::Urgent)
    return;
  profile->urgentCompile = true;
  counters().urgentCompiles.fetch_add(1, std::memory_order_relaxed);
  compiles_.makeUrgent(CompileService::Lane::Traces);
  log().info("trace {:016x}: its background compile becomes urgent (a core of its own) after {} runs: interpreted "
             "{:.2f} ms a run, compile estimated at {:.0f} ms",
             key, profile->runs, profile->interpretedMs, compileCost_.estimateMs(profile->ops));
}

bool Engine::launchCompiled(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                            const TraceProfile& profile, const std::shared_ptr<Executable>& exePtr,
                            std::span<const uint32_t> scalarArgs, TraceResult& out) {
  const Executable& exe = *exePtr;
  Counters& c = counters();
  LaunchTarget target(trace.device);
  ThreadScratch<LaunchScratch> tables;
  std::vector<int64_t>& tParamOfInput = tables->paramOfInput;
  std::vector<uint32_t>& tNodeOfOutput = tables->nodeOfOutput;
  std::vector<uint32_t>& tNodeOfInput = tables->nodeOfInput;
  trace::graphBindings(trace, needed, &tParamOfInput, &tNodeOfOutput, &tNodeOfInput);
  // Indices out of range: let the interpreter report them as errors.
  for (auto [pos, extent] : profile.indexChecks) {
    const int64_t p = tParamOfInput[pos];
    const trace::Node* node = &trace.nodes[tNodeOfInput[pos]];
    for (int64_t x : target.readIndices(trace.params[p].view, node->dtype, node->shape))
      if (x < 0 || x >= extent) {
        log().debug("compiled trace: index {} of input {} is outside [0, {}); the interpreter runs it", x, pos,
                    extent);
        return false;
      }
  }
  std::vector<void*> args;
  // Each input's dense buffer: the parameter's own view, or a dense copy.
  std::vector<core::View>& dense = tables->dense;
  dense.assign(tParamOfInput.size(), core::View{});
  // The views hold their buffers: none stays alive with the thread's tables.
  struct ReleaseViews {
    std::vector<core::View>& views;
    ~ReleaseViews() { views.clear(); }
  } releaseViews{dense};
  args.reserve(tParamOfInput.size() + tNodeOfOutput.size() + 2);
  for (size_t i = 0; i < tParamOfInput.size(); ++i) {
    const int64_t p = tParamOfInput[i];
    const trace::Node* node = &trace.nodes[tNodeOfInput[i]];
    dense[i] = target.dense(trace.params[p].view, node->dtype, node->shape);
    args.push_back(dense[i].bytes(node->dtype));
  }
  // Scalar arguments follow the parameters: each value as the interpreter
  // makes its constant (one element of the node's dtype), kept with the
  // launch (a device may run it after this returns).
  std::shared_ptr<std::vector<uint64_t>> scalarValues;
  std::vector<core::View> deviceScalars;
  if (!scalarArgs.empty()) scalarValues = std::make_shared<std::vector<uint64_t>>(scalarArgs.size());
  for (size_t k = 0; k < scalarArgs.size(); ++k) {
    const trace::Node& s = trace.nodes[scalarArgs[k]];
    args.push_back(target.constant(s.dtype, s.f0, s.i0, &(*scalarValues)[k], deviceScalars));
  }
  // Buffer donation: an output the kernel may compute in place of an input
  // takes that input's buffer when nothing else can see it any more: a dense
  // copy made above, or a Kiln allocation whose only reference is this
  // trace's parameter (an optimizer replaced the tensor that held it).
  std::vector<int64_t>& donor = tables->donor;
  donor.assign(tNodeOfOutput.size(), -1);
  for (auto [output, input] : exe.donations) {
    if (output >= donor.size() || input >= dense.size()) continue;
    const trace::Node& outNode = trace.nodes[tNodeOfOutput[output]];
    const trace::Node* inNode = &trace.nodes[tNodeOfInput[input]];
    if (outNode.dtype != inNode->dtype || outNode.shape != inNode->shape) continue;
    const core::View& v = trace.params[tParamOfInput[input]].view;
    const bool copied = dense[input].storage != v.storage;
    if (copied || (v.storage->ownedByKiln() && v.storage.use_count() == 2)) donor[output] = input;
  }
  const size_t n = trace.nodes.size();
  out.reset(n);
  for (size_t j = 0; j < tNodeOfOutput.size(); ++j) {
    const uint32_t id = tNodeOfOutput[j];
    const trace::Node& node = trace.nodes[id];
    out.values[id] = donor[j] >= 0 ? dense[donor[j]] : target.alloc(node.dtype, node.shape);
    args.push_back(out.values[id].bytes(node.dtype));
  }
  if (!exe.donations.empty())
    for (int64_t d : donor) c.donatedBuffers.fetch_add(d >= 0, std::memory_order_relaxed);
  std::shared_ptr<core::Storage> scratch;
  // A dynamic-shape kernel's scratch depends on its sizes, which follow it.
  const bool dynamic = exe.dynamicSizes > 0;
  const std::size_t scratchBytes = dynamic ? exe.dynamicScratchBytes(profile.dynamicSizes.data()) : exe.scratchBytes();
  if (scratchBytes > 0) scratch = target.scratch(scratchBytes);
  args.push_back(scratch ? scratch->data() : nullptr);
  target.launch(exePtr, std::move(args), dynamic ? profile.dynamicSizes : std::vector<int64_t>{}, scalarValues);
  c.compiledRuns.fetch_add(1, std::memory_order_relaxed);
  c.kernelLaunches.fetch_add(static_cast<uint64_t>(exe.kernelCount()), std::memory_order_relaxed);
  return true;
}

void Engine::run(const trace::Trace& trace, TraceResult& out, trace::TraceKey& tLastKey) {
  auto start = std::chrono::steady_clock::now();
  WarmStart::instance().begin();
  ThreadScratch<RunScratch> scratchOfThread;
  RunScratch& scratch = *scratchOfThread;
  std::vector<uint8_t>& tNeeded = scratch.needed;
  std::vector<uint32_t>& tLastUse = scratch.lastUse;
  trace.liveness(tNeeded, tLastUse);
  uint32_t needed = 0, neededOps = 0, paramCount = 0;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const bool isParam = trace.nodes[i].op == OpKind::Param;
    paramCount += isParam;
    needed += tNeeded[i];
    neededOps += tNeeded[i] && !isParam;
  }
  Counters& c = counters();
  c.tracesRecorded.fetch_add(1, std::memory_order_relaxed);
  c.opsRecorded.fetch_add(static_cast<uint64_t>(trace.opCount), std::memory_order_relaxed);
  c.opsEliminated.fetch_add(trace.nodes.size() - paramCount - neededOps, std::memory_order_relaxed);

  if (trace.device.kind != Device::CPU && !compilesTraces(trace.device)) {
    // A device without a compiler target (CUDA until its tier 1) runs its
    // traces in its op library.
    interpreter_.run(trace, tNeeded, tLastUse, out);
    c.interpretedRuns.fetch_add(1, std::memory_order_relaxed);
    c.interpretedOps.fetch_add(neededOps, std::memory_order_relaxed);
    return;
  }
  // Float constants that varied across runs of this structure are kernel
  // arguments (ScalarArgs.h): the key leaves their values out.
  trace::ScalarSlots slots;
  std::shared_ptr<const ArgSlots> argSlots = keyTrace(trace, tNeeded, &tLastKey, &slots);
  std::shared_ptr<TraceProfile> profileRef;  // keeps it alive if dropped from the table meanwhile
  TraceProfile* profile;
  std::shared_ptr<Executable> exe;
  bool startCompile = false, probe = false, replayMiss = false, replayDecide = false, startDynamic = false;
  bool repeated = false, preload = false;
  const bool useCache = neededOps > 0 && cacheEnabled();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bool inserted = false;
    profileRef = profileLocked(tLastKey, &inserted);
    profile = profileRef.get();
    if (inserted) {
      profile->ops = needed;
      profile->scalarArgs = argSlots;
      c.distinctTraceKeys.fetch_add(1, std::memory_order_relaxed);
      // A structure seen at more than max_shapes sizes gets one
      // dynamic-shape kernel (DynamicShapes.h).
      if (neededOps > 0 && jitEnabled())
        startDynamic = dynamic_.noteNewShape(tLastKey.structureHash, trace, tNeeded, settings().max_shapes);
      preload = neededOps >= kPreloadCompilerFromOps && settings().jit == JitMode::Async && traceCompiles_ &&
                !compilerPreloadSubmitted_;
      compilerPreloadSubmitted_ = compilerPreloadSubmitted_ || preload;
    }
    repeated = ++profile->runs > 1;
    exe = kernelsEnabled() ? profile->executable : nullptr;
    if (profile->replayMiss && jitEnabled()) {  // left replay mode: compile it after all
      profile->replayMiss = false;
      profile->tier = Tier::Interpreted;
    }
    replayMiss = profile->replayMiss;
    if (!exe && profile->tier == Tier::Interpreted && useCache && !profile->cacheChecked) {
      profile->cacheChecked = true;
      probe = true;
    }
  }
  if (repeated) WarmStart::instance().noteRepeat();  // the process's start is over
  if (preload && !compilerLoaded()) {
    log().info("trace {:016x} ({} ops) is large: loading the compiler in the background", tLastKey.hash, neededOps);
    compiles_.submit(CompileService::Lane::Traces, false, [] { loadCompiler(); }, JobRank::Background);
  }
  const bool replay = settings().jit == JitMode::Replay;
  // Warm start: a kernel an earlier process cached runs from the first run.
  // Only keys the cache directory listed are opened, so cold keys cost no
  // file access and no loader; hot ones look again before compiling.
  if (probe) exe = probeCache(trace, tNeeded, tLastKey, profile, false);
  if (startDynamic) {
    std::vector<std::pair<uint32_t, int64_t>> checks;
    std::string reason;
    const bool compilable = planIndexChecks(trace, tNeeded, &checks, &reason);
    startDynamicCompile(trace, tNeeded, tLastKey, slots.argNodes, compilable ? &checks : nullptr, reason);
  }
  if (!exe && jitEnabled() && neededOps > 0) exe = bindDynamic(trace, tNeeded, tLastKey, profile);
  if (!exe) {
    std::lock_guard<std::mutex> lock(mutex_);
    exe = kernelsEnabled() ? profile->executable : nullptr;
    if (profile->tier == Tier::Compiling && profile->compilingIn != 0 &&
        profile->compilingIn != support::processId()) {
      // Forked while it compiled: the compile went with the parent's thread.
      // It compiles again below, counted once among its structure's shapes.
      profile->tier = Tier::Interpreted;
      profile->urgentCompile = false;
      if (auto it = shapesPerStructure_.find(tLastKey.structureHash); it != shapesPerStructure_.end() && it->second > 0)
        --it->second;
    }
    if (!exe && profile->tier == Tier::Interpreted && neededOps > 0 && traceCompiles_ &&
        profile->runs >= static_cast<uint64_t>(settings().jit_threshold)) {
      // Recompilation-storm guard: a structure run at many sizes (varying
      // batch or sequence lengths) gets kernels for its first max_shapes
      // sizes, then one dynamic-shape kernel (bindDynamic) or, when it cannot
      // have one, interpretation.
      int64_t* shapes = jitEnabled() ? &shapesPerStructure_[tLastKey.structureHash] : nullptr;
      if (shapes && dynamic_.coveredByKernel(tLastKey.structureHash)) {
        // Waits for its structure's dynamic-shape kernel (bindDynamic).
      } else if (shapes && *shapes >= settings().max_shapes) {
        profile->tier = Tier::InterpretOnly;
        profile->failure = "its structure was already compiled for KILN_MAX_SHAPES shapes";
        if ((*shapes)++ == settings().max_shapes)
          log().info("trace {:016x}: structure compiled for {} shapes and it cannot have a dynamic-shape kernel; "
                     "new shapes stay interpreted",
                     tLastKey.hash, settings().max_shapes);
      } else if (shapes) {
        ++*shapes;
        profile->tier = Tier::Compiling;
        profile->compilingIn = support::processId();
        startCompile = true;
      } else if (replay) {
        profile->tier = Tier::Compiling;  // decided below, outside the lock
        replayDecide = true;
      }
    }
  }
  if (replayDecide) {
    // Hot in replay mode: only the cache may serve it (another process may
    // have filled it since the first look). Never compiled.
    std::vector<std::pair<uint32_t, int64_t>> checks;
    std::string reason;
    const bool compilable = planIndexChecks(trace, tNeeded, &checks, &reason);
    if (compilable) exe = probeCache(trace, tNeeded, tLastKey, profile, true);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!compilable) {
      profile->tier = Tier::InterpretOnly;
      profile->failure = reason;
    } else if (!exe) {
      replayMiss = true;
      profile->tier = Tier::InterpretOnly;
      profile->replayMiss = true;
      profile->failure = "KILN_JIT=replay: no cached kernel";
      c.replayMisses.fetch_add(1, std::memory_order_relaxed);
      log().warn("KILN_JIT=replay: hot trace {:016x} ({}) has no cached kernel; it runs interpreted", tLastKey.hash,
                 opsOf(trace, tNeeded));
    }
  }
  if (!exe && replay && settings().replay_strict && replayMiss) {
    std::string dir = KernelCache::instance().usableDirectory();
    throw Error("KILN_JIT=replay with KILN_REPLAY_STRICT=1: trace " + [&] {
      char h[17];
      std::snprintf(h, sizeof(h), "%016llx", static_cast<unsigned long long>(tLastKey.hash));
      return std::string(h);
    }() + " (" + opsOf(trace, tNeeded) + ") has no cached kernel in " + (dir.empty() ? "the (unusable) kernel cache" : dir) +
                ". Record it with KILN_JIT=async or sync first, or import a bundle with kiln-cache import");
  }
  if (startCompile) {
    std::vector<std::pair<uint32_t, int64_t>> checks;
    std::string reason;
    if (!planIndexChecks(trace, tNeeded, &checks, &reason)) {
      std::lock_guard<std::mutex> lock(mutex_);
      profile->tier = Tier::InterpretOnly;
      profile->failure = reason;
      log().info("trace {:016x} stays interpreted: {}", tLastKey.hash, reason);
    } else {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        profile->indexChecks = std::move(checks);
      }
      auto graph = std::make_shared<const trace::TraceGraph>(
          trace::extractGraph(trace, tNeeded, &scratch.paramOfInput, &scratch.nodeOfOutput, slots.argNodes));
      // In the background, the compile thread loads the compiler library
      // on its first job, so this step does not wait for it.
      const bool now = settings().jit == JitMode::Sync;
      bool urgent = false;
      CodegenEffort effort = CodegenEffort::Full;
      if (!now) {
        std::lock_guard<std::mutex> lock(mutex_);
        urgent = compilePriorityLocked(*profile) == CompilePriority::Urgent;
        profile->urgentCompile = urgent;
        if (urgent) c.urgentCompiles.fetch_add(1, std::memory_order_relaxed);
        effort = chooseCodegenEffort(compileCost_.estimateMs(profile->ops), true, quickCodegenFromMs_.load());
        const uint32_t timed = timedRuns(*profile);
        const char* priority = urgent                           ? "urgent (a core of its own)"
                               : settings().compile_share == 0 ? "at the lowest priority"
                                                               : "at the lowest priority and a bounded share of a core";
        log().info("trace {:016x} ({} ops): compiling in the background, {}, {} codegen ({}, compile estimated at "
                   "{:.0f} ms)",
                   tLastKey.hash, profile->ops, priority, codegenEffortName(effort),
                   timed >= kTimedRunsForCostModel
                       ? fmt::format("interpreted {:.2f} ms a run over {} timed runs", profile->interpretedMs, timed)
                       : fmt::format("{} of the {} timed runs its payback needs", timed, kTimedRunsForCostModel),
                   compileCost_.estimateMs(profile->ops));
      }
      compiles_.submit(
          CompileService::Lane::Traces, now,
          [this, profileRef, graph, key = tLastKey, effort] { compileJob(profileRef, graph, key, effort); },
          urgent ? JobRank::Urgent : JobRank::Background);
      if (now) {
        std::lock_guard<std::mutex> lock(mutex_);
        exe = profile->executable;
      }
    }
  }
  if (exe && launchCompiled(trace, tNeeded, *profile, exe, slots.argNodes, out)) {
    if (trace.device.kind == Device::CPU) WarmStart::instance().noteKernel(tLastKey.hash);
    c.compiledOps.fetch_add(neededOps, std::memory_order_relaxed);
    if (exe->codegen == CodegenEffort::Quick)
      recompileFull(trace, tNeeded, profileRef, tLastKey, slots.argNodes, &scratch.paramOfInput, &scratch.nodeOfOutput);
    return;
  }
  // No whole-trace kernel: hot regions (tier 1) may run parts of it compiled.
  if (!exe && neededOps > 0 && RegionExecutor(*this).run(trace, tNeeded, profile, out)) return;

  interpreter_.run(trace, tNeeded, tLastUse, out);
  c.interpretedRuns.fetch_add(1, std::memory_order_relaxed);
  c.interpretedOps.fetch_add(neededOps, std::memory_order_relaxed);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (neededOps > 0 && jitEnabled()) noteInterpretedRun(profile, tLastKey.hash, ms);
  if (log().should_log(spdlog::level::debug)) {
    log().debug("trace {:016x}: {} nodes ({} needed), run #{}, interpreted in {:.3f} ms", tLastKey.hash,
                trace.nodes.size(), needed, profile->runs, ms);
  }
}

}  // namespace kiln::exec
