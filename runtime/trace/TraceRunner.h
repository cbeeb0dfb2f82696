// TraceRunner: what runs a flushed trace. The recorder knows only this
// interface; the exec layer installs its Engine as the runner at start-up
// (runtime/exec/Engine.cpp), so runtime/trace depends on nothing above it.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/TensorImpl.h"
#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::trace {

/// Result of one node: a view, or the error that stopped it (dependents of a
/// failed node fail with the same message; independent nodes still run).
struct NodeResults {
  std::vector<core::View> values;
  std::vector<std::shared_ptr<const std::string>> errors;
  /// Values still being computed off this thread (collectives, on the
  /// communication thread), by node id: awaitValue before reading one.
  std::vector<std::pair<uint32_t, std::shared_future<void>>> pending;
  /// Index values this run read back from a device, each the read of a
  /// view of one node's value (interp::readIndicesOnce).
  struct IndexRead {
    uint32_t root = 0;  ///< the node that produced the viewed value
    /// Its buffer, not kept alive: a later read of it holds it, and a new
    /// buffer at the same address is another storage.
    std::weak_ptr<core::Storage> storage;
    int64_t offset = 0;
    int64_t strides[Shape::kMaxRank] = {};
    DType dtype = DType::i64;
    Shape shape;
    std::vector<int64_t> values;
  };
  std::vector<IndexRead> indexReads;

  /// Starts a run of a trace of `n` nodes.
  void reset(size_t n) {
    values.assign(n, core::View{});
    errors.assign(n, nullptr);
    pending.clear();
    indexReads.clear();
  }
};

class TraceRunner {
 public:
  /// Runs the trace's needed nodes, fills `out` (an entry per node; only
  /// those of live nodes are meaningful) and sets `key` to the trace's key.
  /// Thread-safe. Called once per flush.
  virtual void run(const Trace& trace, NodeResults& out, TraceKey& key) = 0;

 protected:
  ~TraceRunner() = default;
};

/// Makes `runner` the one every recorder flushes through; it must outlive
/// every recorder (the engine is never destroyed).
void installTraceRunner(TraceRunner& runner);

}  // namespace kiln::trace
