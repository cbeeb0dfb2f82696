// Optimizers: SGD (momentum, Nesterov, weight decay), Adam and AdamW.
//
// An optimizer holds pointers to the caller's parameter handles. step()
// records the update with the ordinary ops (inside a NoGradGuard), so that
// forward, backward and update form one trace, and rebinds each handle to
// its updated value: a fresh leaf that requires grad, with no gradient yet.
// Parameters are values (see tensor.h): other copies of an old handle keep
// the old value. Optimizer state (momentum, Adam moments and bias-correction
// powers) lives in tensors, so every step records the same ops with the same
// constants and its trace key repeats (and tiers up). The state starts as
// buffers, and the constructor gives each parameter a dense buffer of its own
// (computing pending ones), so the first step's trace is the same as every
// later one's: the step is hot at its second run (SGD with dampening keeps
// a first step of its own: PyTorch's first momentum buffer is the gradient).
//
// Parameter buffers are not updated in place (no buffer donation yet): each
// step produces new parameter buffers, recycled by the caching allocator.
#pragma once

#include <cstddef>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::optim {

class Optimizer {
 public:
  /// `params` must outlive the optimizer; each must be a floating tensor and
  /// is marked requires_grad().
  explicit Optimizer(std::vector<Tensor*> params);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Updates every parameter whose .grad() is defined.
  void step();
  /// Functional form: one gradient per parameter, in order (undefined: skip).
  void step(const std::vector<Tensor>& grads);
  /// Clears every parameter's .grad().
  void zero_grad();
  const std::vector<Tensor*>& params() const { return params_; }
  /// Changes the learning rate (a new constant in the recorded update, so
  /// the next step's trace is keyed, and compiled, anew).
  virtual void set_lr(double lr) = 0;
  virtual double lr() const = 0;

 protected:
  /// The new value of parameter i given its gradient (grad mode is off).
  virtual Tensor update(std::size_t i, const Tensor& param, const Tensor& grad) = 0;

 private:
  std::vector<Tensor*> params_;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  ///< L2 penalty added to the gradient
  bool nesterov = false;
};

/// PyTorch's SGD: g += wd*p; buf = momentum*buf + (1-dampening)*g (buf = g
/// at the first step); g = nesterov ? g + momentum*buf : buf; p -= lr*g.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, SGDOptions options = {});
  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const override { return options_.lr; }

 protected:
  Tensor update(std::size_t i, const Tensor& param, const Tensor& grad) override;

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};

/// PyTorch's Adam (weight decay as an L2 term added to the gradient):
/// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
/// p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps), the rank-0
/// factors computed once per step (one division and one square root per
/// element, as torch.optim.Adam arranges it).
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, AdamOptions options = {});
  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const override { return options_.lr; }

 protected:
  Adam(std::vector<Tensor*> params, AdamOptions options, bool decoupled);
  Tensor update(std::size_t i, const Tensor& param, const Tensor& grad) override;

 private:
  AdamOptions options_;
  bool decoupled_;
  std::vector<Tensor> m_, v_, beta1Power_, beta2Power_;
};

/// PyTorch's AdamW: Adam with decoupled weight decay, p *= 1 - lr*wd before
/// the Adam step. Its default weight_decay is 0.01.
class AdamW : public Adam {
 public:
  static AdamOptions defaults() {
    AdamOptions o;
    o.weight_decay = 0.01;
    return o;
  }
  AdamW(std::vector<Tensor*> params, AdamOptions options = defaults()) : Adam(std::move(params), options, true) {}
};

}  // namespace kiln::optim
