// TraceGraph: a self-contained copy of the part of a trace that a kernel
// computes (the needed nodes, renumbered), handed to the compiler so the
// recorder can move on.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/trace/Trace.h"

namespace kiln::trace {

struct TraceGraph {
  /// Needed nodes in recording order. Param nodes have i0 = their position
  /// in `inputs`.
  std::vector<Node> nodes;
  std::vector<uint32_t> operands;
  std::vector<int64_t> attrs;
  /// Node ids of the parameters, in kernel argument order: the trace's
  /// parameters, then its scalar arguments (TraceKey.h), rank-0 Param nodes
  /// in place of their Full nodes.
  std::vector<uint32_t> inputs;
  /// Node ids of the live outputs, in kernel argument order (after inputs).
  std::vector<uint32_t> outputs;
  /// Where the kernel runs (its compile target comes from the device).
  Device device;

  std::span<const uint32_t> inputsOf(const Node& n) const { return {operands.data() + n.inputs, n.numInputs}; }
  std::span<const int64_t> attrsOf(const Node& n) const { return {attrs.data() + n.attrs, n.numAttrs}; }
};

/// Copies the needed nodes of `trace`. `paramOfInput[i]` receives the trace
/// param index of graph input i; `nodeOfOutput[j]` the trace node of output j.
/// `scalarArgs` (trace node ids, ascending: ScalarSlots::argNodes) become
/// inputs after the parameters, in that order, without their values.
TraceGraph extractGraph(const Trace& trace, const std::vector<uint8_t>& needed, std::vector<int64_t>* paramOfInput,
                        std::vector<uint32_t>* nodeOfOutput, std::span<const uint32_t> scalarArgs = {});

}  // namespace kiln::trace

namespace kiln::trace {
/// The same bindings as extractGraph computes, without copying the graph
/// (for runs of a key whose kernel already exists); `nodeOfInput` gets the
/// Param node of each input.
void graphBindings(const Trace& trace, const std::vector<uint8_t>& needed, std::vector<int64_t>* paramOfInput,
                   std::vector<uint32_t>* nodeOfOutput, std::vector<uint32_t>* nodeOfInput);
}  // namespace kiln::trace
