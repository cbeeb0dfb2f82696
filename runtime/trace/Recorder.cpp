#include "runtime/trace/Recorder.h"

#include <atomic>
#include <cstring>
#include <iterator>
#include <optional>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime.h"
#include "runtime/core/TensorSize.h"
#include "runtime/support/StatsCounters.h"
#include "runtime/trace/TraceRunner.h"

namespace kiln::trace {

namespace {

std::atomic<uint64_t> gNextEpoch{1};

/// What flushes run through (installTraceRunner); constant-initialized, so
/// installing it during start-up does not depend on the order of statics.
constinit std::atomic<TraceRunner*> gRunner{nullptr};

/// Recorders of exited threads, reused by new threads. Recorders are never
/// destroyed, so a TensorImpl may always lock the recorder it points to.
struct RecorderPool {
  std::mutex mutex;
  std::vector<Recorder*> free;
};
RecorderPool& pool() {
  static RecorderPool* p = new RecorderPool();
  return *p;
}

struct ThreadRecorder {
  Recorder* recorder = nullptr;
  ~ThreadRecorder() {
    if (!recorder) return;
    try {
      recorder->flush(FlushReason::ThreadExit);
    } catch (...) {
      // Failures are stored in the tensors themselves; nothing to report here.
    }
    std::lock_guard<std::mutex> lock(pool().mutex);
    pool().free.push_back(recorder);
  }
};
thread_local ThreadRecorder tRecorder;

/// The slow path of the size check in record(): throws unless the result
/// may be a view (or a splat) whose bytes are never allocated.
[[gnu::noinline, gnu::cold]] void checkResultSize(const NodeSpec& spec) {
  const char* op = core::opName(spec.op).data();
  core::requireElementCount(op, spec.shape);
  const bool mayBeView = spec.op == core::OpKind::Full ||
                         (core::opCategory(spec.op) == core::OpCategory::Shape && spec.op != core::OpKind::Concat);
  if (!mayBeView) core::requireDenseBytes(op, spec.shape, spec.dtype);
}

}  // namespace

void installTraceRunner(TraceRunner& runner) { gRunner.store(&runner, std::memory_order_release); }

Recorder::Recorder() { trace_.epoch = gNextEpoch.fetch_add(1); }

Recorder& Recorder::current() {
  if (!tRecorder.recorder) {
    {
      std::lock_guard<std::mutex> lock(pool().mutex);
      if (!pool().free.empty()) {
        tRecorder.recorder = pool().free.back();
        pool().free.pop_back();
      }
    }
    if (!tRecorder.recorder) tRecorder.recorder = new Recorder();
  }
  return *tRecorder.recorder;
}

uint32_t Recorder::operandLocked(detail::TensorImpl* impl) {
  if (impl->owner.load(std::memory_order_relaxed) == this) return impl->value;
  if (impl->error) throw Error("input tensor was produced by a failed computation: " + *impl->error);
  uint64_t tag = impl->paramTag.load(std::memory_order_relaxed);
  uint32_t epochLow = static_cast<uint32_t>(trace_.epoch);
  if (tag != 0 && static_cast<uint32_t>(tag >> 32) == epochLow) return static_cast<uint32_t>(tag);
  Node n;
  n.op = OpKind::Param;
  n.dtype = impl->dtype;
  n.shape = impl->shape;
  n.i0 = static_cast<int64_t>(trace_.params.size());
  trace_.params.push_back(Param{impl->view});
  auto id = static_cast<uint32_t>(trace_.nodes.size());
  trace_.nodes.push_back(n);
  trace_.holders.push_back(nullptr);
  impl->paramTag.store((static_cast<uint64_t>(epochLow) << 32) | id, std::memory_order_relaxed);
  return id;
}

Tensor Recorder::record(const NodeSpec& spec, std::span<const Tensor* const> inputs) {
  // Every op's result passes here: a shape whose element count overflows is
  // refused before anything is recorded, and so is a result that is always a
  // dense buffer (not a view or a splat constant) whose bytes overflow.
  if (!core::denseSizeFits(spec.shape, dtype_size(spec.dtype))) [[unlikely]] checkResultSize(spec);
  // A trace runs on one device: an op on another device flushes first.
  const Device device = inputs.empty() ? spec.device : inputs[0]->impl()->device;
  for (const Tensor* t : inputs)
    if (t->impl()->device != device) [[unlikely]]
      throw Error(std::string(core::opName(spec.op)) + ": operands live on different devices (" + device.str() +
                  " and " + t->impl()->device.str() + "); move one with to()");
  // Inputs pending in another thread's trace are computed first, without
  // holding our own lock (two threads may exchange tensors both ways).
  for (const Tensor* t : inputs) {
    detail::TensorImpl* impl = t->impl();
    Recorder* o = impl->owner.load(std::memory_order_acquire);
    if (o && o != this) o->flushFor(impl, FlushReason::CrossThread);
  }
  std::optional<Released> released;  // a flush's, destroyed after the lock is released
  std::lock_guard<SpinMutex> lock(mutex_);
  return appendLocked(spec, device, inputs, released);
}

Tensor Recorder::appendLocked(const NodeSpec& spec, Device device, std::span<const Tensor* const> inputs,
                              std::optional<Released>& released) {
  if (device != trace_.device) [[unlikely]] {
    flushLocked(released.emplace());
    trace_.device = device;
  }
  auto inputsBegin = static_cast<uint32_t>(trace_.operands.size());
  try {
    for (const Tensor* t : inputs) trace_.operands.push_back(operandLocked(t->impl()));
  } catch (...) {
    trace_.operands.resize(inputsBegin);
    throw;
  }
  Node n;
  n.op = spec.op;
  n.dtype = spec.dtype;
  n.shape = spec.shape;
  n.keepdim = spec.keepdim;
  n.numInputs = static_cast<uint16_t>(inputs.size());
  n.inputs = inputsBegin;
  n.attrs = static_cast<uint32_t>(trace_.attrs.size());
  n.numAttrs = static_cast<uint16_t>(spec.attrs.size());
  trace_.attrs.insert(trace_.attrs.end(), spec.attrs.begin(), spec.attrs.end());
  n.f0 = spec.f0;
  n.f1 = spec.f1;
  n.i0 = spec.i0;
  auto id = static_cast<uint32_t>(trace_.nodes.size());
  trace_.nodes.push_back(n);
  detail::TensorImpl* impl = detail::TensorImpl::create(spec.dtype, spec.shape, trace_.device);
  impl->value = id;
  impl->owner.store(this, std::memory_order_release);
  trace_.holders.push_back(impl);
  ++trace_.opCount;
  Tensor result(impl);
  if (trace_.opCount >= settings().max_trace_ops) {
    exec::counters().flushesSizeLimit.fetch_add(1, std::memory_order_relaxed);
    flushLocked(released ? *released : released.emplace());
  }
  return result;
}

Tensor Recorder::recordScalarConstant(const NodeSpec& spec) {
  // The table tells constants apart by dtype and value only.
  if (spec.op != OpKind::Full || spec.shape.rank() != 0) [[unlikely]]
    return record(spec, {});
  uint64_t bits = 0;
  std::memcpy(&bits, &spec.f0, sizeof bits);
  const uint64_t hash = (bits ^ static_cast<uint64_t>(spec.i0) * 0x9e3779b97f4a7c15ull ^
                         static_cast<uint64_t>(spec.dtype) << 56) * 0xff51afd7ed558ccdull;
  std::optional<Released> released;  // a flush's, destroyed after the lock is released
  std::lock_guard<SpinMutex> lock(mutex_);
  const uint64_t epoch = trace_.epoch;
  if (scalarConstantsEpoch_ != epoch) {
    scalarConstantsEpoch_ = epoch;
    scalarConstantCount_ = 0;
  }
  // The table is at most half full, so the probe ends at an empty slot.
  size_t at = (hash >> 32) % kScalarConstantSlots;
  for (; scalarConstants_[at].epoch == epoch; at = (at + 1) % kScalarConstantSlots) {
    const ScalarConstant& c = scalarConstants_[at];
    if (c.valueBits != bits || c.i0 != spec.i0 || c.dtype != spec.dtype || spec.device != trace_.device) continue;
    // A second handle on a held constant (an autograd node keeps the
    // operands it reads), or a new one on a node whose handles are gone.
    if (detail::TensorImpl* held = trace_.holders[c.node]) {
      if (held->tryRetain()) return Tensor(held);
      // Its last handle went away on another thread, which waits for our
      // lock to forget it, then deletes it: disowned, its forget() leaves
      // the new holder alone.
      held->owner.store(nullptr, std::memory_order_relaxed);
    }
    detail::TensorImpl* impl = detail::TensorImpl::create(spec.dtype, spec.shape, trace_.device);
    impl->value = c.node;
    impl->owner.store(this, std::memory_order_release);
    trace_.holders[c.node] = impl;
    return Tensor(impl);
  }
  Tensor t = appendLocked(spec, spec.device, {}, released);
  // Unless recording it ran the trace (it was on another device, or full).
  if (trace_.epoch == epoch && scalarConstantCount_ < kMaxScalarConstants) {
    ++scalarConstantCount_;
    scalarConstants_[at] = ScalarConstant{epoch, bits, spec.i0, spec.dtype, t.impl()->value};
  }
  return t;
}

void Recorder::flush(FlushReason reason) {
  Released released;
  std::lock_guard<SpinMutex> lock(mutex_);
  flushLocked(released);
}

void Recorder::flushFor(detail::TensorImpl* impl, FlushReason reason) {
  Released released;
  std::lock_guard<SpinMutex> lock(mutex_);
  if (impl->owner.load(std::memory_order_relaxed) != this) return;
  if (reason == FlushReason::CrossThread) exec::counters().flushesCrossThread.fetch_add(1, std::memory_order_relaxed);
  flushLocked(released);
}

void Recorder::forget(detail::TensorImpl* impl) {
  std::lock_guard<SpinMutex> lock(mutex_);
  if (impl->owner.load(std::memory_order_relaxed) != this) return;
  trace_.holders[impl->value] = nullptr;
  impl->owner.store(nullptr, std::memory_order_relaxed);
}

void Recorder::flushLocked(Released& released) {
  if (trace_.nodes.empty()) return;
  NodeResults& result = released.results;
  // The parameters go with `released` (moved: the trace keeps its capacity).
  auto releaseParams = [&] {
    released.params.insert(released.params.end(), std::make_move_iterator(trace_.params.begin()),
                           std::make_move_iterator(trace_.params.end()));
  };
  try {
    TraceRunner* runner = gRunner.load(std::memory_order_acquire);
    if (!runner) throw Error("no trace runner is installed (libkiln installs its engine when it is loaded)");
    runner->run(trace_, result, lastKey_);
  } catch (const std::exception& e) {
    // The whole trace failed (e.g. out of memory): every live tensor reports it.
    auto msg = std::make_shared<const std::string>(e.what());
    for (detail::TensorImpl* h : trace_.holders) {
      if (!h) continue;
      h->error = msg;
      h->owner.store(nullptr, std::memory_order_release);
    }
    releaseParams();
    trace_.clear();
    trace_.epoch = gNextEpoch.fetch_add(1);
    throw;
  }
  for (size_t i = 0; i < trace_.nodes.size(); ++i) {
    detail::TensorImpl* h = trace_.holders[i];
    if (!h) continue;
    h->view = std::move(result.values[i]);
    h->error = std::move(result.errors[i]);
    h->owner.store(nullptr, std::memory_order_release);
  }
  releaseParams();
  trace_.clear();
  trace_.epoch = gNextEpoch.fetch_add(1);
}

void Recorder::materialize(detail::TensorImpl* impl, FlushReason reason) {
  if (Recorder* o = impl->owner.load(std::memory_order_acquire)) {
    if (o != &current()) reason = FlushReason::CrossThread;
    o->flushFor(impl, reason);
  }
  if (impl->error) throw Error(*impl->error);
}

size_t Recorder::pendingNodes() {
  std::lock_guard<SpinMutex> lock(mutex_);
  return trace_.nodes.size();
}

TraceKey Recorder::lastKey() {
  std::lock_guard<SpinMutex> lock(mutex_);
  return lastKey_;
}

void Recorder::inspectPending(const std::function<void(const Trace&)>& f) {
  std::lock_guard<SpinMutex> lock(mutex_);
  f(trace_);
}

std::vector<Tensor> Recorder::runCaptured(const Trace& captured, std::span<const core::View> params,
                                          std::span<const uint32_t> outputNodes) {
  Released released;  // both flushes', destroyed after the lock is released
  std::lock_guard<SpinMutex> lock(mutex_);
  flushLocked(released);
  // Copies into the pools' kept capacity: no allocation in steady state.
  trace_.device = captured.device;
  trace_.nodes.assign(captured.nodes.begin(), captured.nodes.end());
  trace_.operands.assign(captured.operands.begin(), captured.operands.end());
  trace_.attrs.assign(captured.attrs.begin(), captured.attrs.end());
  trace_.params.clear();
  for (const core::View& v : params) trace_.params.push_back(Param{v});
  trace_.holders.assign(trace_.nodes.size(), nullptr);
  trace_.opCount = captured.opCount;
  std::vector<Tensor> outputs;
  outputs.reserve(outputNodes.size());
  for (uint32_t id : outputNodes) {
    if (detail::TensorImpl* held = trace_.holders[id]) {
      held->retain();  // the same value named twice: a second handle
      outputs.emplace_back(held);
      continue;
    }
    const Node& n = trace_.nodes[id];
    detail::TensorImpl* impl = detail::TensorImpl::create(n.dtype, n.shape, trace_.device);
    impl->value = id;
    impl->owner.store(this, std::memory_order_release);
    trace_.holders[id] = impl;
    outputs.emplace_back(impl);
  }
  flushLocked(released);
  return outputs;
}

TraceGraph Recorder::pendingGraphForTesting() {
  std::lock_guard<SpinMutex> lock(mutex_);
  std::vector<uint8_t> needed;
  std::vector<uint32_t> lastUse;
  trace_.liveness(needed, lastUse);
  std::vector<int64_t> paramOfInput;
  std::vector<uint32_t> nodeOfOutput;
  return extractGraph(trace_, needed, &paramOfInput, &nodeOfOutput);
}

std::string Recorder::traceListing() {
  std::lock_guard<SpinMutex> lock(mutex_);
  return trace_.str();
}

}  // namespace kiln::trace
