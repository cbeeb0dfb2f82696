// SGD, Adam and AdamW as recorded functional updates (see kiln/optim.h).
#include <cmath>
#include <string>
#include <utility>

#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "runtime/api/OpSupport.h"
#include "runtime/autograd/GradInfo.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor*> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor* p = params_[i];
    if (!p || !p->defined())
      throw Error("optimizer: parameter " + std::to_string(i) + " is null or undefined; pass initialized tensors");
    if (!is_floating(p->dtype()))
      throw Error("optimizer: parameter " + std::to_string(i) + " has dtype " + std::string(dtype_name(p->dtype())) +
                  "; only floating tensors can be optimized");
    // A computed tensor (say w * 2 of a leaf w) never gets a .grad() from
    // backward(), so step() would pass it by every time, silently.
    if (p->impl()->autograd && !p->impl()->autograd->leaf)
      throw Error("optimizer: parameter " + std::to_string(i) + " (shape " + p->shape().str() +
                  ") is computed from tensors that require grad (by an op, or a to(device) copy), not a leaf; "
                  "optimize the leaf it comes from, or pass a leaf (detach() it, or make it with requires_grad())");
    if (!p->requires_grad_enabled()) p->requires_grad();
  }
  // Parameters initialised by zeros() or ones() are one element broadcast,
  // in a block shared with other constants; every step's update gives them
  // dense buffers of their own. Given those now, the first step's trace reads
  // its parameters as every later one does (the trace key keeps parameter
  // strides and aliasing) and the step tiers up a run sooner.
  api::giveOwnDenseBuffers(params_);
}

Optimizer::~Optimizer() = default;

void Optimizer::step() {
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (Tensor* p : params_) grads.push_back(p->grad());
  step(grads);
}

void Optimizer::step(const std::vector<Tensor>& grads) {
  if (grads.size() != params_.size())
    throw Error("optimizer step: " + std::to_string(grads.size()) + " gradients for " +
                std::to_string(params_.size()) + " parameters");
  NoGradGuard noGrad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    Tensor& p = *params_[i];
    if (grads[i].shape() != p.shape())
      throw Error("optimizer step: gradient " + std::to_string(i) + " has shape " + grads[i].shape().str() +
                  " but its parameter has shape " + p.shape().str());
    Tensor next = cast(update(i, p, cast(grads[i], p.dtype())), p.dtype());
    next.requires_grad();
    p = next;
  }
}

void Optimizer::zero_grad() {
  for (Tensor* p : params_) p->set_grad({});
}

SGD::SGD(std::vector<Tensor*> params, SGDOptions options)
    : Optimizer(std::move(params)), options_(options), momentum_(this->params().size()) {}

Tensor SGD::update(size_t i, const Tensor& p, const Tensor& grad) {
  const SGDOptions& o = options_;
  Tensor g = grad;
  if (o.weight_decay != 0) g = add(g, mul(p, o.weight_decay));
  if (o.momentum != 0) {
    Tensor& buf = momentum_[i];
    // PyTorch's first buffer is g itself. Without dampening a buffer that
    // starts as zeros gives the same values (momentum * 0 + g), so it starts
    // as a buffer and the first step records the same trace as every later
    // one (see Adam::update); with dampening the first step stays apart.
    if (!buf.defined() && o.dampening == 0) buf = api::zerosNow(p.shape(), p.dtype(), p.device());
    buf = buf.defined() ? add(mul(buf, o.momentum), o.dampening == 0 ? g : mul(g, 1 - o.dampening)) : g;
    g = o.nesterov ? add(g, mul(buf, o.momentum)) : buf;
  }
  return sub(p, mul(g, o.lr));
}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params)), options_(options), decoupled_(decoupled) {
  const size_t n = this->params().size();
  m_.resize(n);
  v_.resize(n);
  beta1Power_.resize(n);
  beta2Power_.resize(n);
}

Tensor Adam::update(size_t i, const Tensor& param, const Tensor& grad) {
  const AdamOptions& o = options_;
  Tensor p = param, g = grad;
  if (o.weight_decay != 0) {
    if (decoupled_) p = mul(p, 1 - o.lr * o.weight_decay);
    else g = add(g, mul(p, o.weight_decay));
  }
  if (!m_[i].defined()) {
    // Bias-correction powers b^t are tensors (f64, rank 0), so the step's
    // constants do not change with t. The state starts as buffers, not as
    // recorded fills, so the first step's trace reads it like every later
    // one: the step's trace key repeats from its first run and tiers up a
    // step sooner (its fills made a trace of its own, 871 ops against 889,
    // in the transformer bench).
    m_[i] = api::zerosNow(p.shape(), p.dtype(), p.device());
    v_[i] = api::zerosNow(p.shape(), p.dtype(), p.device());
    beta1Power_[i] = from_vector<double>({1.0}, Shape{}, p.device());
    beta2Power_[i] = from_vector<double>({1.0}, Shape{}, p.device());
  }
  m_[i] = add(mul(m_[i], o.beta1), mul(g, 1 - o.beta1));
  // (1 - b2) * g * g in that order, as PyTorch's addcmul: squared first, an
  // f16 gradient of 256 or more overflowed to inf and froze its element.
  v_[i] = add(mul(v_[i], o.beta2), mul(mul(g, 1 - o.beta2), g));
  beta1Power_[i] = mul(beta1Power_[i], o.beta1);
  beta2Power_[i] = mul(beta2Power_[i], o.beta2);
  // PyTorch's arrangement: the bias corrections fold into rank-0 factors,
  // the step size lr / (1 - b1^t) and 1 / sqrt(1 - b2^t), so that an element
  // costs one square root and one division (three divisions and a square
  // root were the MLP bench's Adam kernels' bound: a 512-bit vdivps issues
  // once every 16 cycles on Sapphire Rapids).
  Tensor stepSize = div(o.lr, sub(1.0, beta1Power_[i]));
  Tensor vScale = div(1.0, sqrt(sub(1.0, beta2Power_[i])));
  Tensor denom = add(mul(sqrt(v_[i]), vScale), o.eps);
  return sub(p, mul(div(m_[i], denom), stepSize));
}

}  // namespace kiln::optim
