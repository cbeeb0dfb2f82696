// Engine: the one entry point that runs flushed traces, with a profile per
// TraceKey (the tiering policy grows here).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/interp/Interpreter.h"
#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::exec {

/// Per-node results of a run; only entries of live nodes are meaningful.
using TraceResult = interp::NodeResults;

/// What the engine knows about one TraceKey.
struct TraceProfile {
  uint64_t runs = 0;
  uint32_t ops = 0;  ///< needed nodes, parameters included
};

class Engine {
 public:
  static Engine& instance();

  /// Runs the trace's needed nodes and fills `out`. Thread-safe.
  void run(const trace::Trace& trace, TraceResult& out);

  /// Runs recorded for a key so far (0 when never seen).
  uint64_t runCount(const trace::TraceKey& key);
  /// The key of the most recent run on the calling thread (for tests/tools).
  static const trace::TraceKey& lastKey();

 private:
  std::mutex mutex_;
  std::unordered_map<trace::TraceKey, TraceProfile, trace::TraceKeyHash> profiles_;
  interp::Interpreter interpreter_;
};

}  // namespace kiln::exec
