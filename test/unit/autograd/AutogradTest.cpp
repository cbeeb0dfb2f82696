// The autograd graph: leaves, backward() accumulation, flushes in the middle
// of a step, non-differentiable paths, freeing, grad mode.
#include <gtest/gtest.h>

#include <pthread.h>

#include <cmath>
#include <memory>

#include "kiln/kiln.h"
#include "runtime/autograd/GradInfo.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/trace/Recorder.h"

namespace kiln {
namespace {

std::vector<double> vec(const Tensor& t) { return t.to_vector<double>(); }

// grad(loss, wrt) runs only the rules on paths to wrt and frees only them,
// as PyTorch's autograd.grad: the rest of the graph stays for another pass
// (a GAN's discriminator step leaves the generator's graph), and a wanted
// intermediate's own rule does not run.
TEST(Autograd, GradRunsAndFreesOnlyThePathsToWhatItIsAskedFor) {
  Tensor x = from_vector<double>({1, 2}, {2});
  x.requires_grad();
  Tensor h = mul(x, x);
  EXPECT_EQ(grad(sum(square(h)), {h})[0].to_vector<double>(), (std::vector<double>{2, 8}));
  EXPECT_EQ(grad(sum(mul(h, 2.0)), {x})[0].to_vector<double>(), (std::vector<double>{4, 8}));

  Tensor w = from_vector<double>({0.5, -1}, {2});
  w.requires_grad();
  Tensor a = mul(x, 3.0);  // shared: the "generator's" output
  EXPECT_EQ(grad(sum(mul(a, w)), {w})[0].to_vector<double>(), (std::vector<double>{3, 6}));
  EXPECT_EQ(grad(sum(a), {x})[0].to_vector<double>(), (std::vector<double>{3, 3}));
  // A path that was walked is freed as before.
  Tensor b = mul(x, 5.0);
  grad(sum(b), {x});
  EXPECT_THROW(grad(sum(b), {x}), Error);
  // A wanted tensor whose own graph was freed is where the walk stops.
  EXPECT_EQ(grad(sum(mul(b, 3.0)), {b})[0].to_vector<double>(), (std::vector<double>{3, 3}));
}

// A freed node keeps its edges (not its tensors), so grad() knows where a
// gradient reaching it would have gone: to a wanted tensor, which another
// path also reaches, is an error (it gave that path's part alone, silently);
// to nothing wanted, it is passed by.
TEST(Autograd, GradThroughAFreedNodeFailsOnlyWhereItLedToAWantedTensor) {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor w = from_vector<double>({0.5, 4}, {2}).requires_grad();
  Tensor h = mul(x, x);
  grad(sum(mul(h, x)), {x});  // frees h's node
  EXPECT_THROW(grad(sum(add(h, x)), {x}), Error);  // gave {1, 1}: d(h)/dx lost
  EXPECT_THROW(sum(add(h, x)).backward(), Error);
  // Nothing wanted lies behind h: w's gradient is whole.
  EXPECT_EQ(grad(sum(add(mul(h, w), w)), {w})[0].to_vector<double>(), (std::vector<double>{2, 5}));
  // Behind a chain of freed nodes too (b's edges lead through a to x).
  Tensor a = mul(x, x), b = mul(a, 3.0);
  grad(sum(b), {x});  // frees b's and a's nodes
  EXPECT_THROW(grad(sum(add(b, x)), {x}), Error);
  EXPECT_EQ(grad(sum(add(mul(b, w), w)), {w})[0].to_vector<double>(), (std::vector<double>{4, 13}));
}

TEST(Autograd, OnlyTensorsComputedFromGradLeavesCarryAGraph) {
  Tensor a = from_vector<float>({1, 2}, {2});
  Tensor b = exp(a) + 1.0f;
  EXPECT_FALSE(a.requires_grad_enabled());
  EXPECT_FALSE(b.requires_grad_enabled());
  EXPECT_EQ(b.impl()->autograd, nullptr);
  Tensor w = from_vector<float>({3, 4}, {2}).requires_grad();
  EXPECT_TRUE(w.requires_grad_enabled());
  EXPECT_TRUE((b * w).requires_grad_enabled());
  EXPECT_FALSE(gt(w, 0.0f).requires_grad_enabled());           // bool result
  EXPECT_FALSE(argmax(w, 0).requires_grad_enabled());          // integer result
  EXPECT_FALSE(cast(w, DType::i32).requires_grad_enabled());   // integer result
}

TEST(Autograd, RequiresGradOnIntegerTensorThrows) {
  Tensor i = from_vector<int64_t>({1, 2}, {2});
  EXPECT_THROW(i.requires_grad(), Error);
  Tensor u;
  EXPECT_THROW(u.requires_grad(), Error);
}

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor x = from_vector<double>({1, 2, 3}, {3}).requires_grad();
  Tensor y = from_vector<double>({4, 5, 6}, {3}).requires_grad();
  EXPECT_FALSE(x.grad().defined());
  sum(mul(x, y)).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(vec(y.grad()), (std::vector<double>{1, 2, 3}));
  sum(mul(x, x)).backward();  // adds 2x
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{6, 9, 12}));
  x.set_grad({});
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, GradSurvivesAFlushInTheMiddleOfTheStep) {
  Tensor w = from_vector<double>({0.5, -1, 2}, {3}).requires_grad();
  Tensor x = from_vector<double>({1, 2, 3}, {3});
  Tensor h = tanh(mul(w, x));
  Tensor loss = sum(square(h));
  const double l = loss.item<double>();  // flushes: h and loss are materialized
  EXPECT_TRUE(h.is_materialized());
  EXPECT_GT(l, 0);
  Tensor g = grad(loss, {w})[0];
  std::vector<double> wv{0.5, -1, 2}, xv{1, 2, 3}, gv = vec(g);
  for (int i = 0; i < 3; ++i) {
    const double t = std::tanh(wv[i] * xv[i]);
    EXPECT_NEAR(gv[i], 2 * t * (1 - t * t) * xv[i], 1e-12);
  }
  // ... and with kiln::step() between forward and backward.
  Tensor loss2 = sum(mul(w, w));
  kiln::step();
  loss2.backward();
  EXPECT_EQ(vec(w.grad()), (std::vector<double>{1, -2, 4}));
}

TEST(Autograd, GradientOfAnUnrelatedTensorIsZeros) {
  Tensor a = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor b = from_vector<double>({3, 4, 5}, {3}).requires_grad();
  Tensor c = from_vector<double>({1}, {1});  // never required grad
  std::vector<Tensor> g = grad(sum(mul(a, 2.0)), {a, b, c});
  EXPECT_EQ(vec(g[0]), (std::vector<double>{2, 2}));
  EXPECT_EQ(vec(g[1]), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(vec(g[2]), (std::vector<double>{0}));
  // A loss with no graph at all.
  Tensor constant = sum(from_vector<double>({1, 2}, {2}));
  EXPECT_EQ(vec(grad(constant, {a})[0]), (std::vector<double>{0, 0}));
}

TEST(Autograd, NonDifferentiablePathsGiveNoGradient) {
  Tensor x = from_vector<double>({-1, 2, 3}, {3}).requires_grad();
  // Through a comparison and argmax only: zeros.
  Tensor viaCompare = sum(cast(gt(x, 0.0), DType::f64));
  EXPECT_EQ(vec(grad(viaCompare, {x})[0]), (std::vector<double>{0, 0, 0}));
  Tensor viaArgmax = cast(argmax(x, 0), DType::f64);
  EXPECT_EQ(vec(grad(viaArgmax, {x})[0]), (std::vector<double>{0, 0, 0}));
  // The mask is constant, the multiplied value is not.
  Tensor masked = sum(mul(cast(gt(x, 0.0), DType::f64), x));
  EXPECT_EQ(vec(grad(masked, {x})[0]), (std::vector<double>{0, 1, 1}));
}

TEST(Autograd, GradWithRespectToAnIntermediate) {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor h = mul(x, 3.0);
  Tensor loss = sum(square(h));
  std::vector<Tensor> g = grad(loss, {h, x});
  EXPECT_EQ(vec(g[0]), (std::vector<double>{6, 12}));
  EXPECT_EQ(vec(g[1]), (std::vector<double>{18, 36}));
}

TEST(Autograd, GraphIsFreedUnlessRetained) {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor loss = sum(exp(x));
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  std::vector<double> g = vec(x.grad());
  EXPECT_NEAR(g[0], 2 * std::exp(1.0), 1e-12);
  EXPECT_THROW(loss.backward(), Error);
}

// A freed graph keeps its edges to computed nodes only: a kept loss does not
// keep the leaves it was computed from (an optimizer's replaced parameters
// and their gradients), and a leaf whose .grad() carries a graph
// (create_graph) is not kept by the freed graph of that gradient.
TEST(Autograd, AFreedGraphKeepsNoLeafAlive) {
  Tensor loss;
  std::weak_ptr<autograd::GradInfo> oldLeaf;
  {
    Tensor w = from_vector<double>({1, 2}, {2}).requires_grad();
    oldLeaf = w.impl()->autograd;
    loss = sum(mul(exp(w), w));
    loss.backward();
  }
  EXPECT_TRUE(oldLeaf.expired());
  std::weak_ptr<autograd::GradInfo> cycle;
  {
    Tensor y = from_vector<double>({2}, {1}).requires_grad();
    cycle = y.impl()->autograd;
    sum(mul(mul(y, y), y)).backward(Tensor(), false, true);
    EXPECT_EQ(grad(sum(y.grad()), {y})[0].to_vector<double>(), (std::vector<double>{12}));
  }
  EXPECT_TRUE(cycle.expired());
}

// Dropping a long freed chain releases it without one nested destructor
// call per node: on a thread with a 256 KiB stack, 20,000 nodes.
int gChainDone = 0;
void* dropALongFreedChain(void*) {
  Tensor x = from_vector<double>({1}, {1}).requires_grad();
  Tensor h = x;
  for (int i = 0; i < 20000; ++i) h = mul(h, 1.0);
  sum(h).backward();
  h = Tensor();  // the chain's last tensor goes: its freed chain with it
  return x.grad().defined() ? &gChainDone : nullptr;
}

TEST(Autograd, DroppingALongFreedChainKeepsTheStack) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, &dropALongFreedChain, nullptr), 0);
  pthread_attr_destroy(&attr);
  void* result = nullptr;
  pthread_join(thread, &result);
  EXPECT_EQ(result, &gChainDone);
}

TEST(Autograd, NonScalarLossNeedsGradOutput) {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor y = mul(x, x);
  EXPECT_THROW(grad(y, {x}), Error);
  Tensor g = grad(y, {x}, from_vector<double>({1, 10}, {2}))[0];
  EXPECT_EQ(vec(g), (std::vector<double>{2, 40}));
}

TEST(Autograd, NoGradGuardRecordsNoGraph) {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad();
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_mode_enabled());
    EXPECT_FALSE(mul(x, 2.0).requires_grad_enabled());
    {
      NoGradGuard nested;
    }
    EXPECT_FALSE(grad_mode_enabled());
  }
  EXPECT_TRUE(grad_mode_enabled());
  EXPECT_TRUE(mul(x, 2.0).requires_grad_enabled());
}

TEST(Autograd, DetachDropsHistory) {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor y = mul(x, 2.0);
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad_enabled());
  EXPECT_EQ(vec(grad(sum(mul(d, x)), {x})[0]), (std::vector<double>{2, 4}));
  EXPECT_EQ(vec(d), (std::vector<double>{2, 4}));
}

TEST(Autograd, ForwardBackwardAndUpdateAreOneTrace) {
  sync();
  Tensor w = from_vector<float>({1, 2, 3, 4}, {2, 2}).requires_grad();
  Tensor x = from_vector<float>({1, 0, 0, 1}, {2, 2});
  reset_stats();
  Tensor loss = sum(square(matmul(x, w)));
  Tensor g = grad(loss, {w})[0];
  Tensor updated;
  {
    NoGradGuard noGrad;
    updated = sub(w, mul(g, 0.1f));
  }
  EXPECT_FALSE(updated.is_materialized());
  sync();
  EXPECT_EQ(stats().traces_recorded, 1u);
  std::vector<float> u = updated.to_vector<float>();
  EXPECT_FLOAT_EQ(u[0], 1 - 0.1f * 2);
}

}  // namespace
}  // namespace kiln
