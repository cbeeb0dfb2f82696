// The tier-0 interpreter: runs a flushed trace node by node.
#pragma once

#include <future>
#include <memory>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include "runtime/core/TensorImpl.h"
#include "runtime/trace/Trace.h"
#include "runtime/trace/TraceRunner.h"

namespace kiln::interp {

/// Each node's value or error (runtime/trace/TraceRunner.h).
using NodeResults = trace::NodeResults;

/// Waits for node `id` when its value is pending; a failure becomes the
/// node's error (and its value is dropped).
void awaitValue(NodeResults& results, uint32_t id);
/// Waits for every pending value (at the end of a run).
void awaitAll(NodeResults& results);

/// The values of node `id`'s value (an integer tensor) as i64 in row-major
/// order on the host: readIndices, but a device's values are read once per
/// run. A later read of the same view of the same node's value (through
/// views: an embedding's tokens checked for index_select, then made
/// index_add's table in its gradient) takes them from `results` instead of
/// waiting for the device again.
std::vector<int64_t> readIndicesOnce(const trace::Trace& trace, uint32_t id, NodeResults& results);

/// Matmuls this process's interpreter has run with their epilogue in one
/// library call (OpLibrary::matmulWithEpilogue), for tests and logs.
uint64_t fusedMatmulEpilogues();
/// Casts from f16 or bf16 to f32 left to the matmul that read them (its
/// packing widens their source) in this process (tests).
uint64_t castsIntoMatmuls();

class Interpreter {
 public:
  /// Runs the needed nodes in order; frees a value right after its last use
  /// unless a live tensor holds it. Fills results for every needed node,
  /// but for a value only the next op reads, where the device's library
  /// runs the two as one call (a product and the add after it,
  /// OpLibrary::productThenAdd; a matmul and its bias add and relu,
  /// OpLibrary::matmulWithEpilogue): that value is never made.
  void run(const trace::Trace& trace, const std::vector<uint8_t>& needed, const std::vector<uint32_t>& lastUse,
           NodeResults& results) const;
  /// Runs `nodes` in the given order on results that already hold every
  /// value they read (a trace run as a mix of compiled regions and
  /// interpreted nodes). `nodes[k]` is at schedule position `first + k`;
  /// `lastUse[id]` is the position of the last reader of node `id`: a value
  /// is freed after it unless a live tensor holds it. Pairs ops as run()
  /// does, within `nodes`.
  void runNodes(const trace::Trace& trace, std::span<const uint32_t> nodes, uint32_t first,
                const std::vector<uint32_t>& lastUse, NodeResults& results) const;
};

}  // namespace kiln::interp
