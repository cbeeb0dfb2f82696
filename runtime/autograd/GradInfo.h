// GradInfo: the autograd state of one tensor, and the hook that op
// implementations call after recording a primitive.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/tensor.h"
#include "runtime/core/OpKind.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/trace/Recorder.h"

namespace kiln::autograd {

/// How a tensor was computed, for the backward pass. A leaf (requires_grad)
/// has no inputs and keeps the accumulated gradient; a computed tensor keeps
/// its primitive, the primitive's attributes and its input tensors (which
/// stay alive, pending or materialized, until the graph is freed).
struct GradInfo {
  bool leaf = false;
  /// Set once a backward pass freed this node's inputs.
  bool freed = false;
  /// A freed node's edges: its inputs' nodes without their tensors (as
  /// PyTorch frees saved tensors but keeps the graph), so that grad() knows
  /// whether a gradient reaching it would have led to a wanted tensor (an
  /// error: the graph was freed) or to nothing wanted (no gradient lost).
  /// Computed inputs are held; leaves are not (a leaf leads nowhere, and a
  /// wanted one is alive): holding them kept replaced parameters and their
  /// gradients alive with any tensor of an old step, and made a cycle of a
  /// leaf whose .grad() carries a graph (create_graph).
  std::vector<std::shared_ptr<GradInfo>> freedEdges;
  std::vector<std::weak_ptr<GradInfo>> freedLeafEdges;

  GradInfo() = default;
  GradInfo(const GradInfo&) = delete;
  GradInfo& operator=(const GradInfo&) = delete;
  /// Releases a chain of freed nodes iteratively (a deep graph's would
  /// otherwise unwind one nested destructor call per node).
  ~GradInfo();
  Tensor grad;  ///< leaves: the accumulated gradient

  core::OpKind op = core::OpKind::Param;
  std::vector<int64_t> attrs;
  double f0 = 0, f1 = 0;
  int64_t i0 = 0;
  bool keepdim = false;
  std::vector<Tensor> inputs;
};

/// Is grad mode on for this thread (no NoGradGuard live)?
bool gradModeEnabled();

/// Attaches a GradInfo to `out` when grad mode is on and `out` is floating.
/// Call only when some input carries autograd state.
void attach(const Tensor& out, const trace::NodeSpec& spec, std::span<const Tensor* const> inputs);

/// The hook: cheap when no input requires grad (one pointer test each).
inline void onRecorded(const Tensor& out, const trace::NodeSpec& spec, std::span<const Tensor* const> inputs) {
  for (const Tensor* t : inputs) {
    if (t->impl()->autograd) {
      attach(out, spec, inputs);
      return;
    }
  }
}

/// The vector-Jacobian product of one primitive: for each input of `node`
/// (whose result is `out`), the gradient contribution given the gradient
/// `g` of `out`, or an undefined tensor when none flows (non-differentiable
/// input, or `needs[i]` false).
std::vector<Tensor> vjp(const GradInfo& node, const Tensor& out, const Tensor& g, const std::vector<bool>& needs);

/// Sums `g` over the axes that broadcasting added or stretched to give back
/// a tensor of `shape`.
Tensor sumToShape(const Tensor& g, const Shape& shape);

}  // namespace kiln::autograd
