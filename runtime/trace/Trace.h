// Trace: the SSA list of nodes one thread recorded since its last flush.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"
#include "runtime/core/OpKind.h"
#include "runtime/core/TensorImpl.h"

namespace kiln::trace {

using core::OpKind;

/// One recorded op. A node's index is the id of the value it produces.
/// Variable-length data (operands, integer attributes) lives in the trace's
/// pools, so recording a node allocates nothing in steady state.
struct Node {
  OpKind op;
  DType dtype;
  bool keepdim = false;
  uint16_t numInputs = 0;
  uint16_t numAttrs = 0;
  uint32_t inputs = 0;  ///< offset into Trace::operands
  uint32_t attrs = 0;   ///< offset into Trace::attrs
  Shape shape;
  /// Op-specific scalars (f0, f1, i0, keepdim and the `attrs` list): what
  /// each op keeps in them is its row's "attributes" column in
  /// include/kiln/op_table.def (core::opAttributes).
  double f0 = 0, f1 = 0;
  int64_t i0 = 0;
};

/// A materialized tensor the trace reads.
struct Param {
  core::View view;
};

class Trace {
 public:
  std::vector<Node> nodes;
  std::vector<uint32_t> operands;
  std::vector<int64_t> attrs;
  std::vector<Param> params;
  /// Per node: the pending tensor that still refers to it, or null. Only
  /// values with a holder at flush time become outputs.
  std::vector<detail::TensorImpl*> holders;
  Device device;
  /// Unique id of this trace instance (changes at every flush).
  uint64_t epoch = 0;
  /// Nodes recorded, parameters excluded.
  int64_t opCount = 0;

  std::span<const uint32_t> inputsOf(const Node& n) const { return {operands.data() + n.inputs, n.numInputs}; }
  std::span<const int64_t> attrsOf(const Node& n) const { return {attrs.data() + n.attrs, n.numAttrs}; }
  bool empty() const { return nodes.empty(); }
  void clear();

  /// Marks the nodes that live outputs depend on (`needed[i] != 0`) and, for
  /// each needed node, the index of its last reader (or itself when none).
  void liveness(std::vector<uint8_t>& needed, std::vector<uint32_t>& lastUse) const;
  /// Human-readable listing, one node a line (for logs and tests).
  std::string str() const;
};

}  // namespace kiln::trace
