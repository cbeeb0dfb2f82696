// Optimizers: parameter values after N steps equal a plain reference
// implementation (PyTorch's update rules written out on host vectors).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/kiln.h"

namespace kiln {
namespace {

using Vec = std::vector<double>;
using optim::AdamOptions;
using optim::SGDOptions;

// Loss: sum(c * (p - t)^2) per parameter; gradient 2c(p - t).
const Vec kTarget{0.5, -1.5, 2.0, 0.25, -0.75, 1.0};
const Vec kScale{1.0, 0.5, 2.0, 1.5, 0.25, 3.0};
const Vec kStart{0.1, 0.2, -0.3, 0.4, -0.5, 0.6};

Vec referenceGrad(const Vec& p) {
  Vec g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = 2 * kScale[i] * (p[i] - kTarget[i]);
  return g;
}

Tensor lossOf(const Tensor& p) {
  Tensor t = from_vector<double>(kTarget, {2, 3}), c = from_vector<double>(kScale, {2, 3});
  return sum(mul(c, square(sub(p, t))));
}

/// Runs `steps` optimizer steps with backward() and returns the parameter.
template <class Opt, class Options>
Vec runKiln(Options options, int steps, bool functional = false) {
  Tensor p = from_vector<double>(kStart, {2, 3});
  Opt opt({&p}, options);
  EXPECT_TRUE(p.requires_grad_enabled());
  for (int s = 0; s < steps; ++s) {
    Tensor loss = lossOf(p);
    if (s % 3 == 1) loss.item<double>();  // a flush in the middle of some steps
    if (functional) {
      opt.step(grad(loss, {p}));
    } else {
      loss.backward();
      opt.step();
      EXPECT_FALSE(p.grad().defined());  // the updated parameter starts without a gradient
    }
    EXPECT_TRUE(p.requires_grad_enabled());
    kiln::step();
  }
  return p.to_vector<double>();
}

Vec referenceSGD(SGDOptions o, int steps) {
  Vec p = kStart, buf;
  for (int s = 0; s < steps; ++s) {
    Vec g = referenceGrad(p);
    for (size_t i = 0; i < p.size(); ++i) g[i] += o.weight_decay * p[i];
    if (o.momentum != 0) {
      if (buf.empty()) buf = g;
      else
        for (size_t i = 0; i < p.size(); ++i) buf[i] = o.momentum * buf[i] + (1 - o.dampening) * g[i];
      for (size_t i = 0; i < p.size(); ++i) g[i] = o.nesterov ? g[i] + o.momentum * buf[i] : buf[i];
    }
    for (size_t i = 0; i < p.size(); ++i) p[i] -= o.lr * g[i];
  }
  return p;
}

Vec referenceAdam(AdamOptions o, bool decoupled, int steps) {
  Vec p = kStart, m(p.size(), 0), v(p.size(), 0);
  for (int t = 1; t <= steps; ++t) {
    Vec g = referenceGrad(p);
    for (size_t i = 0; i < p.size(); ++i) {
      if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
      else g[i] += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      const double mHat = m[i] / (1 - std::pow(o.beta1, t));
      const double vHat = v[i] / (1 - std::pow(o.beta2, t));
      p[i] -= o.lr * mHat / (std::sqrt(vHat) + o.eps);
    }
  }
  return p;
}

void expectNear(const Vec& a, const Vec& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << "element " << i;
}

TEST(Optimizer, SGDPlain) {
  SGDOptions o;
  o.lr = 0.05;
  expectNear(runKiln<optim::SGD>(o, 7), referenceSGD(o, 7));
}

TEST(Optimizer, SGDMomentumWeightDecay) {
  SGDOptions o;
  o.lr = 0.03;
  o.momentum = 0.9;
  o.dampening = 0.1;
  o.weight_decay = 0.01;
  expectNear(runKiln<optim::SGD>(o, 8), referenceSGD(o, 8));
  o.nesterov = true;
  o.dampening = 0;
  expectNear(runKiln<optim::SGD>(o, 8), referenceSGD(o, 8));
  expectNear(runKiln<optim::SGD>(o, 8, /*functional=*/true), referenceSGD(o, 8));
}

TEST(Optimizer, Adam) {
  AdamOptions o;
  o.lr = 0.1;
  expectNear(runKiln<optim::Adam>(o, 10), referenceAdam(o, false, 10));
  o.weight_decay = 0.05;
  expectNear(runKiln<optim::Adam>(o, 10), referenceAdam(o, false, 10));
}

// f16 parameters and gradients: the second moment's (1 - b2) g^2 fits (90
// for g = 300) though g^2 does not (65536 and up is inf in f16: v became inf
// and the element never moved again). One step: m = 30, v = 90, and the
// update lr * m_hat / sqrt(v_hat) = 0.1.
TEST(Optimizer, AdamOnHalfParametersTakesLargeGradients) {
  Tensor p = cast(from_vector<float>({1.f, 1.f}, {2}), DType::f16);
  AdamOptions o;
  o.lr = 0.1;
  optim::Adam adam({&p}, o);
  for (int step = 0; step < 2; ++step) adam.step({cast(from_vector<float>({300.f, 1000.f}, {2}), DType::f16)});
  const std::vector<float> got = cast(p, DType::f32).to_vector<float>();
  EXPECT_NEAR(got[0], 0.8f, 2e-3);  // two steps of 0.1
  EXPECT_NEAR(got[1], 0.8f, 2e-3);
}

TEST(Optimizer, AdamW) {
  AdamOptions o = optim::AdamW::defaults();
  o.lr = 0.1;
  EXPECT_EQ(o.weight_decay, 0.01);
  expectNear(runKiln<optim::AdamW>(o, 10), referenceAdam(o, true, 10));
  expectNear(runKiln<optim::AdamW>(o, 10, /*functional=*/true), referenceAdam(o, true, 10));
}

TEST(Optimizer, StepsRepeatOneTraceKey) {
  // Optimizer state lives in tensors, created as buffers (not recorded
  // fills), and the parameters get dense buffers of their own when the
  // optimizer takes them (zeros() and ones() are one broadcast element in a
  // block shared with other constants): every step, the first included,
  // records the same trace (same TraceKey), which is what lets the step tier
  // up from its second run.
  Tensor p = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor bias = zeros({2}), scale = ones({2});
  Tensor x = from_vector<float>({1, 0, 0, 1}, {2, 2});
  sync();
  EXPECT_EQ(bias.strides(), (std::vector<int64_t>{0}));  // a broadcast constant before
  optim::Adam opt({&p, &bias, &scale});
  EXPECT_EQ(bias.strides(), (std::vector<int64_t>{1}));
  EXPECT_EQ(bias.to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(scale.to_vector<float>(), (std::vector<float>{1, 1}));
  const uint64_t keysBefore = stats().distinct_trace_keys;
  uint64_t keysAfterFirst = 0;
  for (int s = 0; s < 5; ++s) {
    sum(square(add(mul(matmul(x, p), scale), bias))).backward();
    opt.step();
    kiln::step();
    if (s == 0) keysAfterFirst = stats().distinct_trace_keys;
  }
  EXPECT_LE(keysAfterFirst, keysBefore + 1);
  EXPECT_EQ(stats().distinct_trace_keys, keysAfterFirst);
}

TEST(Optimizer, MomentumStepsRepeatOneTraceKeyWithoutDampening) {
  // SGD's momentum buffer starts as zeros (momentum * 0 + g is PyTorch's
  // first buffer, g): the first step records the trace of every later one.
  Tensor p = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor x = from_vector<float>({1, 0, 0, 1}, {2, 2});
  sync();
  SGDOptions o;
  o.lr = 0.01;
  o.momentum = 0.9;
  optim::SGD opt({&p}, o);
  const uint64_t keysBefore = stats().distinct_trace_keys;
  uint64_t keysAfterFirst = 0;
  for (int s = 0; s < 4; ++s) {
    sum(square(matmul(matmul(x, p), x))).backward();
    opt.step();
    kiln::step();
    if (s == 0) keysAfterFirst = stats().distinct_trace_keys;
  }
  EXPECT_LE(keysAfterFirst, keysBefore + 1);
  EXPECT_EQ(stats().distinct_trace_keys, keysAfterFirst);
}

TEST(Optimizer, RejectsBadParameters) {
  Tensor i = from_vector<int64_t>({1}, {1});
  EXPECT_THROW(optim::SGD({&i}), Error);
  Tensor p = from_vector<float>({1}, {1});
  optim::SGD opt({&p});
  EXPECT_THROW(opt.step({}), Error);
  // A computed tensor gets no .grad() from backward(): it would never move.
  Tensor w = from_vector<float>({1, 2}, {2}).requires_grad();
  Tensor scaled = mul(w, 2.0f);
  try {
    optim::Adam({&scaled});
    ADD_FAILURE() << "a non-leaf parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a leaf"), std::string::npos) << e.what();
  }
  Tensor detached = scaled.detach();
  EXPECT_NO_THROW(optim::Adam({&detached}));
}

}  // namespace
}  // namespace kiln
