// Gradients of gradients (create_graph): every vector-Jacobian rule is itself
// differentiated and checked against central differences of the first-order
// gradient in f64, on the op families of GradCheckTest; plus higher
// derivatives in closed form, backward(create_graph), grad mode, and a
// gradient penalty.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "test/unit/autograd/GradCases.h"

namespace kiln {
namespace {

using gradcases::Fn;
using gradcases::Input;

/// With weights w and v drawn at random, G(x) = sum(v * d/dx sum(w * f(x)))
/// (a scalar of the first-order gradient). Compares grad(G, x), where the
/// first gradient was taken with create_graph, with central differences of
/// G, itself computed from first-order gradients only.
void gradgradcheck(const std::string& what, const Fn& f, const std::vector<Input>& inputs, uint64_t seed = 1,
                   double tol = 1e-6) {
  SCOPED_TRACE(what);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> values;
  for (const Input& in : inputs) values.push_back(gradcases::randomValues(in, rng));
  auto leaves = [&]() {
    std::vector<Tensor> ts;
    for (size_t i = 0; i < inputs.size(); ++i) ts.push_back(from_vector<double>(values[i], inputs[i].shape).requires_grad());
    return ts;
  };
  std::uniform_real_distribution<double> uw(-1, 1);
  auto randomLike = [&](const Shape& s) {
    std::vector<double> w(static_cast<size_t>(s.numel()));
    for (double& x : w) x = uw(rng);
    return from_vector<double>(w, s);
  };
  Tensor w;
  std::vector<Tensor> v;
  // G at the current values; `createGraph` keeps the graph of its gradients.
  auto G = [&](const std::vector<Tensor>& xs, bool createGraph) {
    Tensor out = f(xs);
    if (!w.defined()) w = randomLike(out.shape());
    std::vector<Tensor> g = grad(sum(mul(out, w)), xs, {}, false, createGraph);
    if (v.empty())
      for (const Tensor& gi : g) v.push_back(randomLike(gi.shape()));
    Tensor total = sum(mul(g[0], v[0]));
    for (size_t i = 1; i < g.size(); ++i) total = add(total, sum(mul(g[i], v[i])));
    return total;
  };
  std::vector<Tensor> xs = leaves();
  Tensor g = G(xs, true);
  // A first gradient that does not depend on x (linear ops) carries no
  // graph: its gradient is zeros, which the differences confirm.
  std::vector<Tensor> analytic = grad(g, xs);
  gradcases::expectCentralDifferences(inputs, values, analytic, [&] { return G(leaves(), false).item<double>(); },
                                      1e-5, tol);
}

// ---- closed forms and the API -----------------------------------------------------

TEST(HigherOrderGrad, DerivativesOfACubeUpToTheFourth) {
  Tensor x = from_vector<double>({-1.5, 0.5, 2}, {3}).requires_grad();
  Tensor d1 = grad(sum(pow(x, 3.0)), {x}, {}, false, true)[0];
  EXPECT_EQ(d1.to_vector<double>(), (std::vector<double>{6.75, 0.75, 12}));  // 3x^2
  Tensor d2 = grad(sum(d1), {x}, {}, false, true)[0];
  EXPECT_EQ(d2.to_vector<double>(), (std::vector<double>{-9, 3, 12}));  // 6x
  Tensor d3 = grad(sum(d2), {x}, {}, false, true)[0];
  EXPECT_EQ(d3.to_vector<double>(), (std::vector<double>{6, 6, 6}));
  // The fourth derivative is zero: d3 no longer depends on x.
  EXPECT_EQ(grad(sum(d3), {x})[0].to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

TEST(HigherOrderGrad, FirstOrderGradientsAreConstants) {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor g = grad(sum(mul(x, x)), {x})[0];
  EXPECT_FALSE(g.requires_grad_enabled());
  // A loss built from it contributes nothing through it, as in PyTorch
  // without create_graph.
  Tensor y = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor gy = grad(sum(mul(y, y)), {y}, {}, false, true)[0];
  EXPECT_TRUE(gy.requires_grad_enabled());
}

TEST(HigherOrderGrad, CreateGraphRecordsTheGraphEvenUnderNoGrad) {
  Tensor x = from_vector<double>({0.5, -1}, {2}).requires_grad();
  Tensor loss = sum(exp(x));
  Tensor g;
  {
    NoGradGuard noGrad;
    g = grad(loss, {x}, {}, false, true)[0];
    EXPECT_FALSE(grad_mode_enabled());  // restored
  }
  EXPECT_TRUE(grad_mode_enabled());
  std::vector<double> d2 = grad(sum(g), {x})[0].to_vector<double>();
  EXPECT_NEAR(d2[0], std::exp(0.5), 1e-15);
  EXPECT_NEAR(d2[1], std::exp(-1.0), 1e-15);
}

TEST(HigherOrderGrad, CreateGraphKeepsTheWalkedGraph) {
  Tensor x = from_vector<double>({3}, {1}).requires_grad();
  Tensor loss = sum(mul(mul(x, x), x));
  Tensor g = grad(loss, {x}, {}, false, true)[0];
  // The first pass kept the graph (retain_graph was false): a second pass
  // over it works, and so does differentiating the gradient.
  EXPECT_EQ(grad(loss, {x}, {}, true)[0].to_vector<double>(), (std::vector<double>{27}));
  EXPECT_EQ(grad(sum(g), {x}, {}, false, true)[0].to_vector<double>(), (std::vector<double>{18}));
  // A first-order pass frees the forward graph that g's graph reads: g can
  // no longer be differentiated, and saying so beats a partial gradient
  // (the path through the freed x * x gave 12 instead of 18).
  grad(loss, {x});
  EXPECT_THROW(grad(sum(g), {x}), Error);
}

TEST(HigherOrderGrad, BackwardWithCreateGraphAccumulatesDifferentiableGradients) {
  Tensor x = from_vector<double>({1, -2}, {2}).requires_grad();
  sum(pow(x, 3.0)).backward(Tensor(), false, true);
  ASSERT_TRUE(x.grad().requires_grad_enabled());
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 12}));
  // A second backward adds to .grad() with its graph: d/dx of 2 * 3x^2.
  sum(pow(x, 3.0)).backward(Tensor(), false, true);
  EXPECT_EQ(grad(sum(x.grad()), {x})[0].to_vector<double>(), (std::vector<double>{12, -24}));
  // Plain backward() still accumulates constants.
  Tensor y = from_vector<double>({1}, {1}).requires_grad();
  sum(mul(y, y)).backward();
  EXPECT_FALSE(y.grad().requires_grad_enabled());
}

// A WGAN-GP style penalty on a critic D(x) = sum(tanh(x @ W) @ u): the
// weights' gradient of mean over rows of (|dD/dx_row| - 1)^2, checked
// against central differences of the penalty over W.
TEST(HigherOrderGrad, GradientPenaltyOfACritic) {
  Tensor x = from_vector<double>({0.3, -0.2, 0.5, 0.1, -0.4, 0.7}, {2, 3});
  Tensor u = from_vector<double>({0.5, -1.0}, {2, 1});
  std::vector<double> wv = {0.4, -0.3, 0.2, 0.6, -0.5, 0.1};
  auto penalty = [&](const Tensor& W, bool createGraph) {
    Tensor xs = x.detach().requires_grad();
    Tensor critic = sum(matmul(tanh(matmul(xs, W)), u));
    Tensor gx = grad(critic, {xs}, {}, false, createGraph)[0];
    Tensor norms = sqrt(sum(square(gx), {1}));
    return mean(square(sub(norms, 1.0)));
  };
  Tensor W = from_vector<double>(wv, {3, 2}).requires_grad();
  std::vector<double> analytic = grad(penalty(W, true), {W})[0].to_vector<double>();
  const double h = 1e-6;
  for (size_t j = 0; j < wv.size(); ++j) {
    std::vector<double> up = wv, down = wv;
    up[j] += h, down[j] -= h;
    const double numeric = (penalty(from_vector<double>(up, {3, 2}).requires_grad(), false).item<double>() -
                            penalty(from_vector<double>(down, {3, 2}).requires_grad(), false).item<double>()) /
                           (2 * h);
    EXPECT_NEAR(analytic[j], numeric, 1e-7 * (1 + std::abs(numeric))) << "element " << j;
    EXPECT_NE(analytic[j], 0.0) << "element " << j;
  }
}

// ---- every rule, differentiated ---------------------------------------------------

TEST(HigherOrderGrad, UnaryOps) {
  std::mt19937_64 rng(7);
  for (const gradcases::UnaryCase& c : gradcases::unaryCases())
    gradgradcheck(c.name, [&](const std::vector<Tensor>& x) { return c.op(x[0]); },
                  {{gradcases::randomShape(rng, 1, 3, 3), c.low, c.high, c.awayFromZero}});
}

TEST(HigherOrderGrad, BinaryOpsBroadcast) {
  for (const gradcases::BinaryCase& c : gradcases::binaryCases()) {
    gradgradcheck(std::string(c.name) + " [2, 3] [3]", [&](const std::vector<Tensor>& x) { return c.op(x[0], x[1]); },
                  {{Shape{2, 3}, c.low, c.high, c.awayFromZero}, {Shape{3}, c.low, c.high, c.awayFromZero}}, 100);
    gradgradcheck(std::string(c.name) + " [2, 1] [1, 3]",
                  [&](const std::vector<Tensor>& x) { return c.op(x[0], x[1]); },
                  {{Shape{2, 1}, c.low, c.high, c.awayFromZero}, {Shape{1, 3}, c.low, c.high, c.awayFromZero}}, 101);
  }
  gradgradcheck("x ^ 3", [](const std::vector<Tensor>& x) { return pow(x[0], 3.0); }, {{Shape{4}}});
  gradgradcheck("2 ^ x", [](const std::vector<Tensor>& x) { return pow(2.0, x[0]); }, {{Shape{4}}});
  gradgradcheck("2 / x", [](const std::vector<Tensor>& x) { return div(2.0, x[0]); }, {{Shape{4}, -2, 2, true}});
}

TEST(HigherOrderGrad, WhereAndClamp) {
  gradgradcheck("where", [](const std::vector<Tensor>& x) { return where(gt(x[0], 0.0), mul(x[1], x[1]), x[2]); },
                {{Shape{2, 3}, -1, 1, true}, {Shape{3}}, {Shape{2, 1}}});
  gradgradcheck("clamp of a square", [](const std::vector<Tensor>& x) { return clamp(mul(x[0], x[0]), 0.3, 2.0); },
                {{Shape{3, 4}, -2, 2, true}});
}

TEST(HigherOrderGrad, Reductions) {
  const std::vector<int> axes{1};
  for (bool keepdim : {false, true}) {
    const std::string tag = keepdim ? " keepdim" : "";
    gradgradcheck("sum" + tag, [&](const std::vector<Tensor>& x) { return square(sum(x[0], axes, keepdim)); },
                  {{Shape{2, 3}}});
    gradgradcheck("mean" + tag, [&](const std::vector<Tensor>& x) { return square(mean(x[0], axes, keepdim)); },
                  {{Shape{2, 3}}});
    gradgradcheck("prod" + tag, [&](const std::vector<Tensor>& x) { return prod(x[0], axes, keepdim); },
                  {{Shape{2, 3}, 0.5, 1.5}});
    gradgradcheck("max" + tag, [&](const std::vector<Tensor>& x) { return square(max(x[0], axes, keepdim)); },
                  {{Shape{2, 3}}});
    gradgradcheck("min" + tag, [&](const std::vector<Tensor>& x) { return square(min(x[0], axes, keepdim)); },
                  {{Shape{2, 3}}});
  }
}

TEST(HigherOrderGrad, MatmulAndShapeOps) {
  auto mm = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  gradgradcheck("2-D", mm, {{Shape{3, 4}}, {Shape{4, 2}}});
  gradgradcheck("broadcast batch", mm, {{Shape{2, 1, 3, 4}}, {Shape{3, 4, 2}}});
  gradgradcheck("vector @ matrix", mm, {{Shape{4}}, {Shape{4, 3}}});
  gradgradcheck("x^T x", [](const std::vector<Tensor>& x) { return matmul(transpose(x[0]), x[0]); }, {{Shape{3, 2}}});
  gradgradcheck("reshape, permute, broadcast",
                [](const std::vector<Tensor>& x) {
                  Tensor p = permute(reshape(x[0], {2, 3, 2}), {2, 0, 1});
                  return mul(p, broadcast_to(x[1], {2, 2, 3}));
                },
                {{Shape{3, 4}}, {Shape{2, 1, 3}}});
  gradgradcheck("slices, flip and concat",
                [](const std::vector<Tensor>& x) {
                  Tensor a = slice(x[0], 1, 0, 4, 2), b = flip(slice(x[0], 1, 1, 3), {0});
                  return concat({mul(a, a), mul(b, x[1])}, 1);
                },
                {{Shape{3, 5}}, {Shape{3, 2}}});
}

TEST(HigherOrderGrad, Cumsum) {
  gradgradcheck("cumsum", [](const std::vector<Tensor>& x) { return square(cumsum(square(x[0]), 1)); },
                {{Shape{2, 4}}});
}

TEST(HigherOrderGrad, Indexing) {
  Tensor idx = from_vector<int64_t>({2, 0, 2, 1}, {2, 2});
  gradgradcheck("index_select", [&](const std::vector<Tensor>& x) { return square(index_select(x[0], 0, idx)); },
                {{Shape{3, 2}}});
  Tensor gidx = from_vector<int64_t>({3, 0, 1}, {3, 1});
  gradgradcheck("gather", [&](const std::vector<Tensor>& x) { return square(gather(x[0], 1, gidx)); },
                {{Shape{3, 4}}});
  // 9 indices per row: gather's gradient is a scatter_add, whose gradient
  // is a gather again.
  std::vector<int64_t> many;
  for (int i = 0; i < 2 * 9; ++i) many.push_back((i * 5 + i / 4) % 4);
  Tensor midx = from_vector<int64_t>(many, {2, 9});
  gradgradcheck("gather of 9 per row", [&](const std::vector<Tensor>& x) { return square(gather(x[0], 1, midx)); },
                {{Shape{2, 4}}});
  gradgradcheck("scatter_add", [&](const std::vector<Tensor>& x) {
    return square(scatter_add(square(x[0]), 1, midx, mul(x[1], x[1])));
  }, {{Shape{2, 4}}, {Shape{2, 9}}});
}

TEST(HigherOrderGrad, CompositesConvolutionAndPooling) {
  gradgradcheck("softmax", [](const std::vector<Tensor>& x) { return softmax(x[0], 1); }, {{Shape{2, 4}}});
  gradgradcheck("log_softmax", [](const std::vector<Tensor>& x) { return log_softmax(x[0], -1); }, {{Shape{2, 4}}});
  gradgradcheck("layer_norm", [](const std::vector<Tensor>& x) { return layer_norm(x[0], x[1], x[2]); },
                {{Shape{2, 4}}, {Shape{4}}, {Shape{4}}}, 1, 1e-5);
  Tensor targets = from_vector<int64_t>({1, 0, 3}, {3});
  gradgradcheck("cross_entropy", [&](const std::vector<Tensor>& x) { return cross_entropy(x[0], targets); },
                {{Shape{3, 4}}});
  gradgradcheck("mlp", [](const std::vector<Tensor>& x) { return tanh(add(matmul(x[0], x[1]), x[2])); },
                {{Shape{4, 3}}, {Shape{3, 2}}, {Shape{2}}});
  Conv2dOptions o;
  o.stride = {2, 1};
  o.padding = {1};
  gradgradcheck("conv2d of a square",
                [&](const std::vector<Tensor>& x) { return conv2d(square(x[0]), x[1], x[2], o); },
                {{Shape{1, 2, 4, 3}}, {Shape{2, 2, 2, 2}}, {Shape{2}}});
  Pool2dOptions p;
  p.kernel = {2, 2};
  gradgradcheck("max_pool2d of a square", [&](const std::vector<Tensor>& x) { return max_pool2d(square(x[0]), p); },
                {{Shape{1, 2, 4, 4}}});
  gradgradcheck("avg_pool2d of a square", [&](const std::vector<Tensor>& x) { return avg_pool2d(square(x[0]), p); },
                {{Shape{1, 1, 4, 4}}});
  gradgradcheck("batch_norm training",
                [](const std::vector<Tensor>& x) { return batch_norm(x[0], x[1], x[2], {}, {}, true).y; },
                {{Shape{3, 2, 2}}, {Shape{2}}, {Shape{2}}}, 1, 1e-5);
}

}  // namespace
}  // namespace kiln
