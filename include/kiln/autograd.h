// Reverse-mode automatic differentiation over Kiln's recorded ops.
//
// Mark the leaves you want gradients for with `requires_grad()`. Every op
// whose inputs include such a tensor (directly or through earlier ops)
// remembers how it was computed: its primitive, its attributes and its input
// tensors. `grad(loss, wrt)` and `loss.backward()` then walk that graph from
// the loss back to the leaves and record the backward ops through the public
// ops, like any other op: forward, backward and the optimizer update of one
// training step land in one trace, which tiers up and fuses as a whole.
//
// The graph is independent of traces: reading a value (`loss.item()`) in the
// middle of a step flushes the trace, and the gradient is still available.
//
// Rules and conventions:
// - Only floating tensors carry gradients. requires_grad() on an integer or
//   bool tensor throws. Comparisons, logical ops, argmax/argmin, casts to
//   integer types, and the index inputs of gather/index_select are not
//   differentiable: no gradient flows through them.
// - floor, ceil, round and sign have zero gradient everywhere.
// - max/min reductions and maximum/minimum split the gradient evenly between
//   tied extremes (as PyTorch's amax/amin and maximum/minimum do); where an
//   operand of maximum/minimum is NaN both get the whole gradient (PyTorch's
//   rule); clamp
//   passes it whole at its bounds and max_pool2d to the window's first
//   maximum (as PyTorch's clamp and max_pool2d do).
// - relu has gradient 0 at 0; abs has gradient sign(x) (0 at 0).
// - pow(a, b): d/db is taken as 0 where a == 0; d/da as 0 where b == 0.
// - prod: d/dx_i = prod / x_i, which is not finite where some x_i == 0.
// - The gradient of a loss with respect to a tensor it does not depend on
//   (including tensors that never required grad) is zeros of that tensor's
//   shape and dtype.
// - Gradients are first order unless create_graph is passed: then the
//   backward ops record a graph of their own (whatever the grad mode), so a
//   gradient can be differentiated again (gradient penalties, Hessian-vector
//   products, higher derivatives), and the walked graph is kept. Without it
//   a gradient is a constant: a loss built from it contributes nothing
//   through it (as in PyTorch). backward() with create_graph stores in a
//   leaf's .grad() a graph that reads the leaf: a reference cycle (as in
//   PyTorch) until set_grad({}) or a backward pass that frees that graph.
// - The graph and the .grad() slots are not synchronized: run one backward
//   pass over a given graph at a time (different threads may differentiate
//   different graphs).
// - By default a backward pass frees the graph it walked (so the trace need
//   not keep forward intermediates alive for it); pass retain_graph = true to
//   walk the same graph again.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

/// Gradients of `loss` with respect to each tensor of `wrt` (leaves or
/// intermediate results), in order, each with the shape and dtype of its
/// tensor. `loss` must hold one element unless `grad_output` (the gradient
/// of some scalar with respect to `loss`, of loss's shape) is given.
/// Leaves' .grad() slots are not touched. With `create_graph` the gradients
/// carry a graph (they can be differentiated again) and the graph behind
/// `loss` is kept whatever `retain_graph` says.
std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt, const Tensor& grad_output = {},
                         bool retain_graph = false, bool create_graph = false);

/// Called by grad() with (i, gradient of wrt[i]) as soon as that gradient is
/// final, while backward is still being recorded.
using GradReadyFn = std::function<void(std::size_t, const Tensor&)>;
/// grad() that hands each gradient to `ready` the moment backward has
/// produced it (the graph is walked from the loss towards its inputs, so the
/// last layers' gradients come first); ops `ready` records land in the trace
/// between the backward ops that follow (dist::DataParallel starts the
/// all-reduce of a bucket there, overlapping it with the rest of backward).
/// Gradients that never flow (zeros) are handed over at the end. Returns
/// them all, in order.
std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt, const GradReadyFn& ready);

/// While an instance lives, ops on this thread record no autograd graph
/// (evaluation, optimizer updates). Nests.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// Is the autograd graph being recorded on this thread (no NoGradGuard live)?
bool grad_mode_enabled();

}  // namespace kiln
