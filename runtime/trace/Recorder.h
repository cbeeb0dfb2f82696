// Recorder: each thread's trace and the rules for flushing it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "kiln/tensor.h"
#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceGraph.h"
#include "runtime/trace/TraceRunner.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::trace {

/// What an op call records (besides its inputs).
struct NodeSpec {
  OpKind op;
  DType dtype;
  Shape shape;
  std::span<const int64_t> attrs = {};
  double f0 = 0, f1 = 0;
  int64_t i0 = 0;
  bool keepdim = false;
  /// Where a leaf (an op without inputs) lives; other ops live on their
  /// inputs' device.
  Device device = Device::cpu();
};

/// A lock that is nearly always uncontended (only another thread reading or
/// releasing one of our pending tensors competes): cheaper than a mutex on
/// the recording path, and it yields instead of burning a core while the
/// owner runs a long flush.
class SpinMutex {
 public:
  void lock() {
    for (int spins = 0; flag_.exchange(true, std::memory_order_acquire); ++spins) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (spins > 64) std::this_thread::yield();
        ++spins;
      }
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

enum class FlushReason : uint8_t { Read, Sync, Step, SizeLimit, CrossThread, ThreadExit };

/// Owns one thread's trace. Recording appends a node and returns at once;
/// flushing runs the trace through the installed TraceRunner (the exec
/// layer's Engine) and materializes every tensor still referring to it.
/// Other threads may flush this recorder (when they read or use one of its
/// pending tensors) and drop references to its tensors, so the trace is
/// guarded by a mutex.
class Recorder {
 public:
  /// The calling thread's recorder (created on first use, recycled after the
  /// thread exits).
  static Recorder& current();

  /// Records one node; inputs may be pending here, pending in another
  /// thread's trace (flushed first) or materialized (become parameters).
  Tensor record(const NodeSpec& spec, std::span<const Tensor* const> inputs);
  /// Records a rank-0 Full (`spec`: a scalar operand of an op, as x * 2.0f
  /// makes), or returns the node this trace already has for the same dtype
  /// and value bits: a loop of scalar ops then records, keys and runs one
  /// constant, not one per op. Only for the ops' scalar operands (api::
  /// constant): a user's full() stays a tensor of its own, which an
  /// optimizer may give a buffer and update in place.
  Tensor recordScalarConstant(const NodeSpec& spec);
  /// Runs and clears the trace (no-op when empty).
  void flush(FlushReason reason);
  /// Flushes if `impl` is still pending in this recorder.
  void flushFor(detail::TensorImpl* impl, FlushReason reason);
  /// Called when the last handle of a pending tensor goes away.
  void forget(detail::TensorImpl* impl);

  /// Makes sure `impl` is materialized: flushes its owner if pending. Throws
  /// the stored error if its computation failed.
  static void materialize(detail::TensorImpl* impl, FlushReason reason = FlushReason::Read);

  /// Number of nodes currently recorded (parameters included).
  size_t pendingNodes();
  /// A copy of the current trace's listing (for tests and logs).
  /// The graph the pending trace would compile to now (what a flush would
  /// hand the compiler), without running it: for tests of compiler targets.
  TraceGraph pendingGraphForTesting();
  std::string traceListing();
  /// The key of this recorder's most recent flush: a copy taken under the
  /// lock, because another thread that reads or uses one of our pending
  /// tensors flushes this recorder and rewrites the key meanwhile.
  TraceKey lastKey();

  /// Calls `f` with the pending trace under this recorder's lock (for
  /// TraceTemplate::capture, which reads it and the tensors' places in it).
  void inspectPending(const std::function<void(const Trace&)>& f);
  /// Flushes what is pending, then runs `captured`'s nodes as one trace
  /// reading `params` (one view per parameter of `captured`) and returns
  /// `outputNodes`' values (for TraceTemplate::run).
  std::vector<Tensor> runCaptured(const Trace& captured, std::span<const core::View> params,
                                  std::span<const uint32_t> outputNodes);

  Recorder();

 private:
  /// What a flush lets go of, destroyed by its caller after the lock is
  /// released: a parameter's buffer may hold the last reference to a
  /// producer's memory (DLPack), whose deleter may wait for a lock that a
  /// thread waiting for this recorder holds (NumPy's takes Python's GIL).
  struct Released {
    std::vector<Param> params;
    NodeResults results;
  };
  uint32_t operandLocked(detail::TensorImpl* impl);
  /// record() after its checks, under the lock: appends the node on
  /// `device` (flushing first when the trace is on another one).
  Tensor appendLocked(const NodeSpec& spec, Device device, std::span<const Tensor* const> inputs,
                      std::optional<Released>& released);
  void flushLocked(Released& released);

  /// One remembered scalar constant of the trace of `epoch` (another
  /// epoch: an empty slot).
  struct ScalarConstant {
    uint64_t epoch = 0;
    uint64_t valueBits = 0;
    int64_t i0 = 0;
    DType dtype = DType::f32;
    uint32_t node = 0;
  };
  /// An open-addressed table that never evicts: whether two constants share
  /// a node must depend only on their being equal, or a loop whose constants
  /// change every step (a decaying learning rate) would record a different
  /// trace whenever two values happened to meet in one slot. Past
  /// kMaxScalarConstants distinct values a trace records the rest as they
  /// come.
  static constexpr size_t kScalarConstantSlots = 256;
  static constexpr uint32_t kMaxScalarConstants = 128;
  SpinMutex mutex_;
  Trace trace_;
  TraceKey lastKey_;
  ScalarConstant scalarConstants_[kScalarConstantSlots];
  uint64_t scalarConstantsEpoch_ = 0;  ///< the trace scalarConstantCount_ counts
  uint32_t scalarConstantCount_ = 0;
};

}  // namespace kiln::trace
