// The autograd graph (GradInfo attached by the recording hook), the backward
// pass, grad mode, and the autograd members of kiln::Tensor.
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "runtime/autograd/GradInfo.h"
#include "runtime/autograd/GradientSum.h"

namespace kiln {

namespace autograd {

namespace {

thread_local bool tGradMode = true;

/// Sets grad mode for its lifetime: off while a backward pass records its
/// ops, on with create_graph (they then build a graph of their own, which a
/// later pass differentiates), whatever the caller's mode.
class GradModeScope {
 public:
  explicit GradModeScope(bool on) : previous_(tGradMode) { tGradMode = on; }
  ~GradModeScope() { tGradMode = previous_; }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

[[noreturn]] void fail(const char* what, const std::string& msg) { throw Error(std::string(what) + ": " + msg); }

detail::TensorImpl* checkedImpl(const Tensor& t, const char* what) {
  if (!t.defined()) fail(what, "the tensor is undefined (default-constructed); pass the result of an op");
  return t.impl();
}

/// The tensors reachable from `root` through autograd nodes, each after
/// every tensor it was computed from (so reverse order visits a tensor
/// before its inputs). Iterative, so deep graphs do not overflow the stack.
std::vector<Tensor> topologicalOrder(const Tensor& root) {
  std::vector<Tensor> order;
  std::unordered_set<detail::TensorImpl*> seen;
  struct Frame {
    Tensor t;
    size_t next;
  };
  std::vector<Frame> stack;
  seen.insert(root.impl());
  stack.push_back({root, 0});
  while (!stack.empty()) {
    Frame& f = stack.back();
    const GradInfo& info = *f.t.impl()->autograd;
    if (!info.leaf && f.next < info.inputs.size()) {
      const Tensor& in = info.inputs[f.next++];
      if (in.impl()->autograd && seen.insert(in.impl()).second) stack.push_back({in, 0});
      continue;
    }
    order.push_back(std::move(f.t));
    stack.pop_back();
  }
  return order;
}

/// The axis along which slice node `n` (result `out`) takes a block of its
/// input, the other axes whole; nullopt for a strided slice, one that cuts
/// several axes, or one that takes the whole input.
std::optional<int> blockAxis(const GradInfo& n, const Tensor& out) {
  const Shape& in = n.inputs[0].shape();
  const int rank = in.rank();
  std::optional<int> axis;
  for (int d = 0; d < rank; ++d) {
    if (n.attrs[rank + d] != 1) return std::nullopt;
    if (n.attrs[d] == 0 && out.shape()[d] == in[d]) continue;
    if (axis) return std::nullopt;
    axis = d;
  }
  return axis;
}

/// Runs the backward pass from `root` seeded with `seed`; returns the
/// gradient of every tensor reached (undefined where none flowed) and the
/// visiting order.
struct BackwardResult {
  std::vector<Tensor> order;
  std::unordered_map<detail::TensorImpl*, Tensor> grads;
};

/// grad()'s `wrt`, checked, as runBackward's `wanted`.
std::unordered_set<detail::TensorImpl*> wantedSet(const std::vector<Tensor>& wrt) {
  std::unordered_set<detail::TensorImpl*> wanted;
  for (const Tensor& w : wrt) wanted.insert(checkedImpl(w, "grad"));
  return wanted;
}

constexpr const char* kFreedGraph =
    "the graph behind this tensor was already freed by an earlier backward pass; pass retain_graph = true to "
    "the first one to walk it twice";

/// Called with each tensor whose gradient is final (all its consumers done),
/// before its own rule runs.
using FinalFn = std::function<void(const Tensor&, const Tensor&)>;

/// `wanted` (grad()): the tensors whose gradients are asked for; only the
/// nodes on a path from the root to one of them run, and only they are freed
/// (as PyTorch's autograd.grad: the rest of the graph stays for another
/// pass). Null (backward()): every node that leads to a leaf.
/// `createGraph`: the rules' ops record a graph (the gradients can be
/// differentiated again), and the walked graph is kept, as the new one
/// reads its tensors.
BackwardResult runBackward(const char* what, const Tensor& root, const Tensor& gradOutput, bool retainGraph,
                           bool createGraph, const FinalFn& final = {},
                           const std::unordered_set<detail::TensorImpl*>* wanted = nullptr) {
  checkedImpl(root, what);
  if (!is_floating(root.dtype()))
    fail(what, "the loss has dtype " + std::string(dtype_name(root.dtype())) + "; gradients need a floating loss");
  // From the seed on: with create_graph a grad_output that requires grad
  // stays in the new graph (its cast too).
  GradModeScope mode(createGraph);
  Tensor seed;
  if (gradOutput.defined()) {
    if (gradOutput.shape() != root.shape())
      fail(what, "grad_output has shape " + gradOutput.shape().str() + " but the loss has shape " +
                     root.shape().str());
    seed = cast(gradOutput, root.dtype());
  } else {
    if (root.numel() != 1)
      fail(what, "the loss has shape " + root.shape().str() +
                     "; implicit gradients need a one-element loss (reduce it with sum/mean, or pass grad_output)");
    seed = ones(root.shape(), root.dtype(), root.device());
  }
  BackwardResult r;
  if (!root.impl()->autograd) return r;  // the loss depends on nothing that requires grad
  retainGraph = retainGraph || createGraph;
  r.order = topologicalOrder(root);
  // With `wanted`: a gradient flows into a tensor that is wanted or leads to
  // one, and a node's rule runs when one of its inputs does (a wanted
  // tensor's own rule does not, unless another wanted one lies behind it).
  // Inputs come before their readers in r.order.
  std::unordered_set<detail::TensorImpl*> leads, running;
  if (wanted) {
    // Whether a freed node's edges lead to a wanted tensor: a depth-first
    // walk of the nodes behind it (iterative, as deep graphs are), memoised.
    std::unordered_set<const GradInfo*> wantedNodes;
    for (detail::TensorImpl* w : *wanted)
      if (w->autograd) wantedNodes.insert(w->autograd.get());
    std::unordered_map<const GradInfo*, bool> leadsMemo;
    auto edgesOf = [&wantedNodes](const GradInfo& n) {
      std::vector<const GradInfo*> edges;
      for (const auto& e : n.freedEdges) edges.push_back(e.get());
      for (const auto& weak : n.freedLeafEdges)
        if (auto leaf = weak.lock(); leaf && wantedNodes.count(leaf.get())) edges.push_back(leaf.get());
      for (const Tensor& in : n.inputs)
        if (const GradInfo* e = in.impl()->autograd.get()) edges.push_back(e);
      return edges;
    };
    auto leadsThrough = [&](const GradInfo& start) {
      struct Frame {
        const GradInfo* node;
        std::vector<const GradInfo*> edges;
        size_t next = 0;
        bool found = false;
      };
      if (auto it = leadsMemo.find(&start); it != leadsMemo.end()) return it->second;
      std::vector<Frame> stack;
      stack.push_back({&start, edgesOf(start)});
      while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.found || f.next == f.edges.size()) {
          const bool found = f.found;
          leadsMemo[f.node] = found;
          stack.pop_back();
          if (!stack.empty()) stack.back().found = stack.back().found || found;
          continue;
        }
        const GradInfo* e = f.edges[f.next++];
        if (wantedNodes.count(e)) {
          f.found = true;
        } else if (auto it = leadsMemo.find(e); it != leadsMemo.end()) {
          f.found = it->second;
        } else {
          stack.push_back({e, edgesOf(*e)});  // invalidates f
        }
      }
      return leadsMemo[&start];
    };
    for (const Tensor& t : r.order) {
      // A freed node whose edges lead to a wanted tensor runs (and fails:
      // its inputs are gone); one that leads to nothing wanted is passed by.
      const GradInfo& info = *t.impl()->autograd;
      bool runsHere = info.freed && leadsThrough(info);
      for (const Tensor& in : info.inputs) runsHere = runsHere || leads.count(in.impl()) > 0;
      if (runsHere) running.insert(t.impl());
      if (runsHere || wanted->count(t.impl())) leads.insert(t.impl());
    }
  }
  auto runs = [&](const Tensor& t) { return !wanted || running.count(t.impl()) > 0; };
  auto flowsInto = [&](const Tensor& t) { return !wanted || leads.count(t.impl()) > 0; };
  // The contributions to each tensor's gradient, summed when it is reached.
  std::unordered_map<detail::TensorImpl*, GradientSum> pending;
  pending[root.impl()].add(seed);
  std::vector<bool> needs;
  for (auto it = r.order.rbegin(); it != r.order.rend(); ++it) {
    const Tensor& t = *it;
    GradInfo& info = *t.impl()->autograd;
    // Topological order: every reader of t came before it in this walk.
    Tensor g;
    if (auto found = pending.find(t.impl()); found != pending.end()) {
      g = found->second.take(t.shape());
      pending.erase(found);
      r.grads[t.impl()] = g;
    }
    if (final && g.defined()) final(t, g);
    if (info.leaf || !g.defined() || !runs(t)) continue;
    if (info.freed) fail(what, kFreedGraph);
    needs.assign(info.inputs.size(), false);
    for (size_t i = 0; i < info.inputs.size(); ++i)
      needs[i] = info.inputs[i].impl()->autograd != nullptr && is_floating(info.inputs[i].dtype()) &&
                 flowsInto(info.inputs[i]);
    if (info.op == core::OpKind::Slice && needs[0]) {
      if (auto block = blockAxis(info, t)) {
        const Tensor& in = info.inputs[0];
        pending[in.impl()].addPiece(*block, info.attrs[*block], cast(g, in.dtype()));
        continue;
      }
    }
    std::vector<Tensor> contributions = vjp(info, t, g, needs);
    for (size_t i = 0; i < info.inputs.size(); ++i) {
      if (!needs[i] || i >= contributions.size() || !contributions[i].defined()) continue;
      const Tensor& in = info.inputs[i];
      Tensor c = contributions[i];
      if (c.shape() != in.shape())
        throw Error(std::string(what) + ": internal error: the gradient rule of " +
                    std::string(core::opName(info.op)) + " gave shape " + c.shape().str() + " for an input of shape " +
                    in.shape().str());
      pending[in.impl()].add(cast(c, in.dtype()));
    }
  }
  if (!retainGraph) {
    for (const Tensor& t : r.order) {
      GradInfo& info = *t.impl()->autograd;
      if (info.leaf || !runs(t)) continue;
      for (const Tensor& in : info.inputs)
        if (const auto& node = in.impl()->autograd) {
          if (node->leaf) info.freedLeafEdges.push_back(node);
          else info.freedEdges.push_back(node);
        }
      info.inputs.clear();
      info.inputs.shrink_to_fit();
      info.freed = true;
    }
  }
  return r;
}

}  // namespace

bool gradModeEnabled() { return tGradMode; }

GradInfo::~GradInfo() {
  std::vector<std::shared_ptr<GradInfo>> release = std::move(freedEdges);
  while (!release.empty()) {
    std::shared_ptr<GradInfo> node = std::move(release.back());
    release.pop_back();
    // The last owner takes the node's edges before it goes, so its own
    // destructor has none to release.
    if (node.use_count() == 1) {
      for (auto& e : node->freedEdges) release.push_back(std::move(e));
      node->freedEdges.clear();
    }
  }
}

void attach(const Tensor& out, const trace::NodeSpec& spec, std::span<const Tensor* const> inputs) {
  if (!tGradMode || !is_floating(spec.dtype)) return;
  auto info = std::make_shared<GradInfo>();
  info->op = spec.op;
  info->attrs.assign(spec.attrs.begin(), spec.attrs.end());
  info->f0 = spec.f0;
  info->f1 = spec.f1;
  info->i0 = spec.i0;
  info->keepdim = spec.keepdim;
  info->inputs.reserve(inputs.size());
  for (const Tensor* t : inputs) info->inputs.push_back(*t);
  out.impl()->autograd = std::move(info);
}

}  // namespace autograd

// ---- public API --------------------------------------------------------------

NoGradGuard::NoGradGuard() : previous_(autograd::tGradMode) { autograd::tGradMode = false; }
NoGradGuard::~NoGradGuard() { autograd::tGradMode = previous_; }
bool grad_mode_enabled() { return autograd::tGradMode; }

std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt, const GradReadyFn& ready) {
  const std::unordered_set<detail::TensorImpl*> wanted = autograd::wantedSet(wrt);
  std::unordered_map<detail::TensorImpl*, std::vector<size_t>> positions;
  for (size_t i = 0; i < wrt.size(); ++i) positions[wrt[i].impl()].push_back(i);
  std::vector<Tensor> out(wrt.size());
  autograd::runBackward(
      "grad", loss, Tensor(), false, false,
      [&](const Tensor& t, const Tensor& g) {
        auto it = positions.find(t.impl());
        if (it == positions.end()) return;
        for (size_t i : it->second) {
          out[i] = g;
          ready(i, g);
        }
      },
      &wanted);
  NoGradGuard noGrad;
  for (size_t i = 0; i < wrt.size(); ++i) {
    if (out[i].defined()) continue;
    out[i] = zeros_like(wrt[i]);
    ready(i, out[i]);
  }
  return out;
}

std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt, const Tensor& grad_output,
                         bool retain_graph, bool create_graph) {
  const std::unordered_set<detail::TensorImpl*> wanted = autograd::wantedSet(wrt);
  autograd::BackwardResult r =
      autograd::runBackward("grad", loss, grad_output, retain_graph, create_graph, {}, &wanted);
  std::vector<Tensor> out;
  out.reserve(wrt.size());
  NoGradGuard noGrad;
  for (const Tensor& w : wrt) {
    auto it = r.grads.find(w.impl());
    out.push_back(it != r.grads.end() && it->second.defined() ? it->second : zeros_like(w));
  }
  return out;
}

Tensor& Tensor::requires_grad(bool on) {
  detail::TensorImpl* i = autograd::checkedImpl(*this, "Tensor::requires_grad");
  if (!on) {
    i->autograd.reset();
    return *this;
  }
  if (!is_floating(i->dtype))
    autograd::fail("Tensor::requires_grad", "only floating tensors can require gradients, this one is " +
                                                std::string(dtype_name(i->dtype)) + "; cast it first");
  if (!i->autograd) {
    i->autograd = std::make_shared<autograd::GradInfo>();
    i->autograd->leaf = true;
  }
  return *this;
}

bool Tensor::requires_grad_enabled() const {
  return autograd::checkedImpl(*this, "Tensor::requires_grad_enabled")->autograd != nullptr;
}

Tensor Tensor::grad() const {
  detail::TensorImpl* i = autograd::checkedImpl(*this, "Tensor::grad");
  if (!i->autograd || !i->autograd->leaf) return {};
  return i->autograd->grad;
}

void Tensor::set_grad(const Tensor& g) {
  detail::TensorImpl* i = autograd::checkedImpl(*this, "Tensor::set_grad");
  if (g.defined() && g.shape() != i->shape)
    autograd::fail("Tensor::set_grad", "gradient shape " + g.shape().str() + " does not match the tensor's " +
                                           i->shape.str());
  if (!i->autograd || !i->autograd->leaf) {
    if (!g.defined()) return;
    autograd::fail("Tensor::set_grad", "the tensor is not a leaf that requires grad; call requires_grad() first");
  }
  i->autograd->grad = g;
}

void Tensor::backward() const { backward(Tensor(), false); }

void Tensor::backward(const Tensor& grad_output, bool retain_graph, bool create_graph) const {
  autograd::BackwardResult r =
      autograd::runBackward("Tensor::backward", *this, grad_output, retain_graph, create_graph);
  // With create_graph the accumulated .grad() keeps the gradients' graph.
  autograd::GradModeScope mode(create_graph);
  for (const Tensor& t : r.order) {
    autograd::GradInfo& info = *t.impl()->autograd;
    if (!info.leaf) continue;
    auto it = r.grads.find(t.impl());
    Tensor g = it != r.grads.end() && it->second.defined() ? it->second : zeros_like(t);
    info.grad = info.grad.defined() ? add(info.grad, g) : g;
  }
}

Tensor Tensor::detach() const {
  detail::TensorImpl* i = autograd::checkedImpl(*this, "Tensor::detach");
  if (!i->autograd) return *this;
  if (is_materialized()) {
    detail::TensorImpl* d = detail::TensorImpl::create(i->dtype, i->shape, i->device);
    d->view = i->view;
    d->error = i->error;
    return Tensor(d);
  }
  // A reshape to the same shape is a view of the pending value; recorded
  // without the autograd hook.
  trace::NodeSpec spec{core::OpKind::Reshape, i->dtype, i->shape};
  const Tensor* ins[] = {this};
  return trace::Recorder::current().record(spec, ins);
}

}  // namespace kiln
