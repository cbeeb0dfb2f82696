// Gradient check of every vector-Jacobian rule against central finite
// differences in f64, on seeded random shapes (broadcasting, keepdim,
// batched matmul, strided slices, repeated indices).
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
using gradcases::randomValues;

/// Compares kiln::grad of sum(f(inputs) * w) with central differences.
void gradcheck(const std::string& what, const Fn& f, const std::vector<Input>& inputs, uint64_t seed = 1,
               double tol = 1e-6) {
  SCOPED_TRACE(what);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> values;
  for (const Input& in : inputs) values.push_back(randomValues(in, rng));
  auto makeInputs = [&](bool requiresGrad) {
    std::vector<Tensor> ts;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor t = from_vector<double>(values[i], inputs[i].shape);
      if (requiresGrad) t.requires_grad();
      ts.push_back(t);
    }
    return ts;
  };
  std::vector<Tensor> xs = makeInputs(true);
  Tensor out = f(xs);
  ASSERT_EQ(out.dtype(), DType::f64);
  std::vector<double> w(static_cast<size_t>(out.numel()));
  std::uniform_real_distribution<double> uw(-1, 1);
  for (double& x : w) x = uw(rng);
  Tensor weights = from_vector<double>(w, out.shape());
  Tensor loss = sum(mul(out, weights));
  std::vector<Tensor> analytic = grad(loss, xs);
  auto lossAt = [&]() {
    NoGradGuard noGrad;
    return sum(mul(f(makeInputs(false)), weights)).item<double>();
  };
  gradcases::expectCentralDifferences(inputs, values, analytic, lossAt, 1e-6, tol);
}

using gradcases::randomShape;

/// A shape that broadcasts with `s`: leading axes dropped, some extents 1.
Shape broadcastPartner(const Shape& s, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> drop(0, s.rank() - 1), coin(0, 2);
  Shape p;
  for (int d = drop(rng); d < s.rank(); ++d) p.push_back(coin(rng) == 0 ? 1 : s[d]);
  return p;
}

// ---- unary --------------------------------------------------------------------

TEST(GradCheck, UnaryOps) {
  std::mt19937_64 rng(7);
  for (const gradcases::UnaryCase& c : gradcases::unaryCases()) {
    Shape s = randomShape(rng);
    gradcheck(c.name, [&](const std::vector<Tensor>& x) { return c.op(x[0]); }, {{s, c.low, c.high, c.awayFromZero}});
  }
}

TEST(GradCheck, PiecewiseConstantOpsHaveZeroGradient) {
  for (auto op : {floor, ceil, round, sign}) {
    Tensor x = from_vector<double>({-1.3, 0.4, 2.6}, {3}).requires_grad();
    Tensor loss = sum(mul(op(x), x));  // d/dx = op(x) only
    std::vector<double> g = grad(loss, {x})[0].to_vector<double>();
    std::vector<double> expected = op(x).detach().to_vector<double>();
    EXPECT_EQ(g, expected);
  }
}

// ---- binary with broadcasting ---------------------------------------------------

TEST(GradCheck, BinaryOpsBroadcast) {
  std::mt19937_64 rng(11);
  for (const gradcases::BinaryCase& c : gradcases::binaryCases()) {
    for (int trial = 0; trial < 3; ++trial) {
      Shape a = randomShape(rng), b = broadcastPartner(a, rng);
      if (trial == 1) std::swap(a, b);
      gradcheck(std::string(c.name) + " " + a.str() + " " + b.str(),
                [&](const std::vector<Tensor>& x) { return c.op(x[0], x[1]); },
                {{a, c.low, c.high, c.awayFromZero}, {b, c.low, c.high, c.awayFromZero}}, 100 + trial);
    }
  }
}

// d/db of fmod and remainder is minus the quotient their result holds: 9 for
// (1, 0.1) and (-1, -0.1) (0.1 is above 1/10, so 1 = 9 * 0.1 + 0.0999...),
// where floor(1 / 0.1) rounds to 10; remainder(-1, 0.1) holds -10.
TEST(GradCheck, FmodAndRemainderUseTheQuotientOfTheirResult) {
  Tensor a = from_vector<double>({1, -1, -1}, {3}).requires_grad();
  Tensor b = from_vector<double>({0.1, -0.1, 0.1}, {3}).requires_grad();
  EXPECT_EQ(grad(sum(fmod(a, b)), {b})[0].to_vector<double>(), (std::vector<double>{-9, -9, 9}));
  EXPECT_EQ(grad(sum(remainder(a, b)), {b})[0].to_vector<double>(), (std::vector<double>{-9, -9, 10}));
}

TEST(GradCheck, ScalarOperands) {
  gradcheck("x*3 + 1 - x/2", [](const std::vector<Tensor>& x) { return sub(add(mul(x[0], 3.0), 1.0), div(x[0], 2.0)); },
            {{Shape{3, 2}}});
  gradcheck("2 / x", [](const std::vector<Tensor>& x) { return div(2.0, x[0]); }, {{Shape{4}, -2, 2, true}});
  gradcheck("x ^ 3", [](const std::vector<Tensor>& x) { return pow(x[0], 3.0); }, {{Shape{4}}});
  gradcheck("2 ^ x", [](const std::vector<Tensor>& x) { return pow(2.0, x[0]); }, {{Shape{4}}});
}

TEST(GradCheck, MaximumSplitsTiesEvenly) {
  Tensor a = from_vector<double>({1, 2, 3}, {3}).requires_grad();
  Tensor b = from_vector<double>({1, 5, 0}, {3}).requires_grad();
  std::vector<Tensor> g = grad(sum(maximum(a, b)), {a, b});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0.5, 0, 1}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{0.5, 1, 0}));
  // Where either operand is NaN (so is the result) both get the whole
  // gradient, as in PyTorch; so for minimum.
  const double nan = std::nan("");
  Tensor c = from_vector<double>({nan, 1, nan}, {3}).requires_grad();
  Tensor d = from_vector<double>({2, nan, nan}, {3}).requires_grad();
  for (auto op : {maximum, minimum}) {
    std::vector<Tensor> h = grad(sum(op(c, d)), {c, d});
    EXPECT_EQ(h[0].to_vector<double>(), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(h[1].to_vector<double>(), (std::vector<double>{1, 1, 1}));
  }
}

TEST(GradCheck, WhereAndClamp) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 3; ++trial) {
    Shape s = randomShape(rng), p = broadcastPartner(s, rng), q = broadcastPartner(s, rng);
    gradcheck("where " + s.str() + " " + p.str() + " " + q.str(),
              [](const std::vector<Tensor>& x) { return where(gt(x[0], 0.0), x[1], x[2]); },
              {{s, -1, 1, true}, {p}, {q}}, 40 + trial);
  }
  gradcheck("clamp", [](const std::vector<Tensor>& x) { return clamp(x[0], -0.5, 0.7); }, {{Shape{3, 4}, -2, 2, true}});
}

TEST(GradCheck, ClampPassesTheWholeGradientAtItsBounds) {
  // As PyTorch's clamp: 1 wherever low <= x <= high (maximum's tie rule, which
  // clamp was built on, gave 0.5 at a bound, 0.25 with low == high).
  Tensor x = from_vector<double>({-1, 0, 0.5, 1, 2}, {5}).requires_grad();
  EXPECT_EQ(grad(sum(clamp(x, 0.0, 1.0)), {x})[0].to_vector<double>(), (std::vector<double>{0, 1, 1, 1, 0}));
  EXPECT_EQ(grad(sum(clamp(x, 1.0, 1.0)), {x})[0].to_vector<double>(), (std::vector<double>{0, 0, 0, 1, 0}));
  // Tensor bounds take the gradient where they win.
  Tensor lo = from_vector<double>({0, 0, 0, 0, 0}, {5}).requires_grad();
  Tensor hi = from_vector<double>({1, 1, 1, 1, 1}, {5}).requires_grad();
  std::vector<Tensor> g = grad(sum(clamp(x, lo, hi)), {x, lo, hi});
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 0}));
  EXPECT_EQ(g[2].to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 1}));
  // The values: NaN stays NaN, -0 at a bound of 0 stays -0, and a low bound
  // above the high one gives the high one (PyTorch's min(max(x, lo), hi)).
  const std::vector<double> v =
      clamp(from_vector<double>({std::nan(""), -0.0, 5}, {3}), 0.0, 1.0).to_vector<double>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(v[1] == 0 && std::signbit(v[1]));
  EXPECT_EQ(v[2], 1);
  EXPECT_EQ(clamp(from_vector<double>({0.5}, {1}), 2.0, 1.0).to_vector<double>(), (std::vector<double>{1}));
}

TEST(GradCheck, ClampPassesNoGradientToNaN) {
  // PyTorch's clamp_backward: grad * (low <= x <= high), 0 where x is NaN
  // (whose value stays NaN); the bounds get none there either.
  for (DType t : {DType::f32, DType::f64}) {
    Tensor x = cast(from_vector<double>({std::nan(""), 0.5, 2}, {3}), t).detach().requires_grad();
    Tensor lo = cast(from_vector<double>({0, 0, 0}, {3}), t).detach().requires_grad();
    Tensor y = clamp(x, lo, 1.0);
    EXPECT_TRUE(std::isnan(y.to_vector<double>()[0]));
    std::vector<Tensor> g = grad(sum(y), {x, lo});
    EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0, 1, 0})) << dtype_name(t);
    EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{0, 0, 0})) << dtype_name(t);
  }
}

TEST(GradCheck, EmptyOperandsHaveZeroGradients) {
  // Size-0 extents in the backward pass: zeros of the operands' shapes, as
  // in PyTorch (the shared-weight matmul rule inferred a -1 next to a 0;
  // index_select and gather asked one_hot for 0 classes).
  Tensor x = rand({2, 3, 4}, 1, DType::f64).requires_grad(), w = rand({4, 0}, 2, DType::f64).requires_grad();
  std::vector<Tensor> g = grad(sum(matmul(x, w)), {x, w});
  EXPECT_EQ(g[0].shape(), (Shape{2, 3, 4}));
  for (double v : g[0].to_vector<double>()) EXPECT_EQ(v, 0);
  EXPECT_EQ(g[1].shape(), (Shape{4, 0}));
  Tensor xk = rand({2, 3, 0}, 3, DType::f64).requires_grad(), wk = rand({0, 5}, 4, DType::f64).requires_grad();
  g = grad(sum(matmul(xk, wk)), {xk, wk});
  EXPECT_EQ(g[0].shape(), (Shape{2, 3, 0}));
  EXPECT_EQ(g[1].shape(), (Shape{0, 5}));
  Tensor e = zeros({0, 3}, DType::f64).requires_grad();
  Tensor none = from_vector<int64_t>({}, {0});
  EXPECT_EQ(grad(sum(index_select(e, 0, none)), {e})[0].shape(), (Shape{0, 3}));
  EXPECT_EQ(grad(sum(gather(e, 0, zeros({0, 3}, DType::i64))), {e})[0].shape(), (Shape{0, 3}));
}

TEST(GradCheck, CastBetweenFloats) {
  Tensor x = from_vector<float>({1, 2, 3}, {3}).requires_grad();
  Tensor w = from_vector<double>({0.5, -1, 2}, {3});
  Tensor g = grad(sum(mul(cast(x, DType::f64), w)), {x})[0];
  EXPECT_EQ(g.dtype(), DType::f32);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{0.5f, -1, 2}));
  // f64 -> f32: the f32 gradient comes back as f64.
  Tensor y = from_vector<double>({1, 2}, {2}).requires_grad();
  Tensor gy = grad(sum(mul(cast(y, DType::f32), 3.0f)), {y})[0];
  EXPECT_EQ(gy.dtype(), DType::f64);
  EXPECT_EQ(gy.to_vector<double>(), (std::vector<double>{3, 3}));
}

// ---- reductions ------------------------------------------------------------------

TEST(GradCheck, Cumsum) {
  gradcheck("cumsum axis 1", [](const std::vector<Tensor>& x) { return cumsum(x[0], 1); }, {{Shape{3, 4}}});
  gradcheck("cumsum axis -3", [](const std::vector<Tensor>& x) { return cumsum(mul(x[0], x[0]), -3); },
            {{Shape{3, 2, 2}}});
  gradcheck("cumsum rank 0", [](const std::vector<Tensor>& x) { return cumsum(x[0], 0); }, {{Shape{}}});
}

TEST(GradCheck, ReductionsWithAxesAndKeepdim) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    Shape s = randomShape(rng, 1, 3);
    std::vector<int> axes;
    for (int d = 0; d < s.rank(); ++d)
      if (rng() % 2) axes.push_back(d - (rng() % 2 ? s.rank() : 0));  // some negative
    const bool keepdim = trial % 2;
    const std::string tag = s.str() + " axes " + std::to_string(axes.size()) + (keepdim ? " keepdim" : "");
    gradcheck("sum " + tag, [&](const std::vector<Tensor>& x) { return sum(x[0], axes, keepdim); }, {{s}}, trial);
    gradcheck("mean " + tag, [&](const std::vector<Tensor>& x) { return mean(x[0], axes, keepdim); }, {{s}}, trial);
    gradcheck("prod " + tag, [&](const std::vector<Tensor>& x) { return prod(x[0], axes, keepdim); },
              {{s, 0.5, 1.5}}, trial);
    // Distinct values: no ties at the extreme.
    gradcheck("max " + tag, [&](const std::vector<Tensor>& x) { return max(x[0], axes, keepdim); }, {{s}}, trial);
    gradcheck("min " + tag, [&](const std::vector<Tensor>& x) { return min(x[0], axes, keepdim); }, {{s}}, trial);
  }
}

TEST(GradCheck, MaxReductionSplitsTiesEvenly) {
  Tensor x = from_vector<double>({3, 1, 3, 2, 2, 2}, {2, 3}).requires_grad();
  Tensor g = grad(sum(max(x, {1})), {x})[0];
  std::vector<double> v = g.to_vector<double>();
  std::vector<double> expected{0.5, 0, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], expected[i], 1e-15);
}

// ---- matmul ------------------------------------------------------------------------

TEST(GradCheck, Matmul) {
  auto mm = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  gradcheck("2-D", mm, {{Shape{3, 4}}, {Shape{4, 2}}});
  gradcheck("batched", mm, {{Shape{2, 3, 4}}, {Shape{2, 4, 5}}});
  gradcheck("broadcast batch", mm, {{Shape{2, 1, 3, 4}}, {Shape{3, 4, 2}}});
  gradcheck("broadcast batch 2", mm, {{Shape{4, 3}}, {Shape{2, 3, 2}}});
  // A weight shared by every batch (its gradient one GEMM over the stacked
  // rows), also with the batched operand a non-contiguous view.
  gradcheck("shared weight", mm, {{Shape{2, 3, 3, 4}}, {Shape{4, 2}}});
  gradcheck("shared weight, permuted input",
            [](const std::vector<Tensor>& x) { return matmul(permute(x[0], {1, 0, 2}), x[1]); },
            {{Shape{3, 2, 4}}, {Shape{4, 5}}});
  gradcheck("vector @ matrix", mm, {{Shape{4}}, {Shape{4, 3}}});
  gradcheck("matrix @ vector", mm, {{Shape{2, 4}}, {Shape{4}}});
  gradcheck("vector @ vector", mm, {{Shape{4}}, {Shape{4}}});
}

// ---- shape ops ----------------------------------------------------------------------

TEST(GradCheck, ShapeOps) {
  gradcheck("reshape", [](const std::vector<Tensor>& x) { return reshape(x[0], {4, -1}); }, {{Shape{2, 3, 2}}});
  gradcheck("permute", [](const std::vector<Tensor>& x) { return permute(x[0], {2, 0, 1}); }, {{Shape{2, 3, 4}}});
  gradcheck("transpose then matmul", [](const std::vector<Tensor>& x) { return matmul(transpose(x[0]), x[0]); },
            {{Shape{3, 2}}});
  gradcheck("broadcast_to", [](const std::vector<Tensor>& x) { return broadcast_to(x[0], {2, 3, 4}); },
            {{Shape{3, 1}}});
  gradcheck("squeeze/unsqueeze", [](const std::vector<Tensor>& x) { return unsqueeze(squeeze(x[0]), 0); },
            {{Shape{3, 1, 2}}});
  gradcheck("contiguous of a transpose", [](const std::vector<Tensor>& x) { return transpose(x[0]).contiguous(); },
            {{Shape{3, 2}}});
}

TEST(GradCheck, Slice) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 8; ++trial) {
    Shape s = randomShape(rng, 1, 3);
    for (int d = 0; d < s.rank(); ++d) s[d] += 2;
    const int axis = static_cast<int>(rng() % s.rank());
    const int64_t start = static_cast<int64_t>(rng() % 3), stop = s[axis] - static_cast<int64_t>(rng() % 2);
    const int64_t step = 1 + static_cast<int64_t>(rng() % 3);
    gradcheck("slice " + s.str() + " axis " + std::to_string(axis) + " " + std::to_string(start) + ":" +
                  std::to_string(stop) + ":" + std::to_string(step),
              [&](const std::vector<Tensor>& x) { return slice(x[0], axis, start, stop, step); }, {{s}}, trial);
  }
  gradcheck("negative step", [](const std::vector<Tensor>& x) { return slice(x[0], 1, 4, 0, -2); }, {{Shape{3, 6}}});
  gradcheck("flip", [](const std::vector<Tensor>& x) { return flip(x[0], {0, 1}); }, {{Shape{3, 4}}});
  gradcheck("two slices", [](const std::vector<Tensor>& x) { return slice(slice(x[0], 0, 1, 4, 2), 1, -2, 5); },
            {{Shape{5, 4}}});
}

// Several slices of one tensor: their gradients are laid side by side
// (GradientSum), with zeros in the gaps, overlaps added and other axes'
// pieces and direct uses summed on top.
TEST(GradCheck, SlicesOfOneTensor) {
  auto flat = [](std::vector<Tensor> parts) {
    for (Tensor& p : parts) p = reshape(p, {-1});
    return concat(parts, 0);
  };
  gradcheck("three slices tiling an axis (a QKV split)",
            [&](const std::vector<Tensor>& x) {
              Tensor q = slice(x[0], 1, 0, 2), k = slice(x[0], 1, 2, 4), v = slice(x[0], 1, 4, 6);
              return flat({mul(q, k), v});
            },
            {{Shape{3, 6}}});
  gradcheck("gaps and overlaps",
            [&](const std::vector<Tensor>& x) {
              Tensor a = slice(x[0], 1, 1, 3), b = slice(x[0], 1, 2, 5), c = slice(x[0], 1, 5, 6);
              return flat({a, mul(b, b), c, slice(x[0], 1, 1, 3)});
            },
            {{Shape{2, 7}}});
  gradcheck("two axes, a direct use and an empty slice",
            [&](const std::vector<Tensor>& x) {
              Tensor rows = slice(x[0], 0, 1, 3), cols = slice(x[0], 2, 0, 1), none = slice(x[0], 1, 2, 2);
              return flat({mul(rows, rows), cols, mul(x[0], x[0]), none});
            },
            {{Shape{3, 2, 4}}});
}

TEST(GradCheck, Concat) {
  gradcheck("axis 0", [](const std::vector<Tensor>& x) { return concat({x[0], x[1], x[0]}, 0); },
            {{Shape{2, 3}}, {Shape{1, 3}}});
  gradcheck("axis -1", [](const std::vector<Tensor>& x) { return concat({x[0], x[1]}, -1); },
            {{Shape{2, 2, 1}}, {Shape{2, 2, 3}}});
}

TEST(GradCheck, IndexSelectAndGather) {
  Tensor idx = from_vector<int64_t>({2, 0, 2, 1}, {2, 2});  // repeated index 2
  gradcheck("index_select axis 1", [&](const std::vector<Tensor>& x) { return index_select(x[0], 1, idx); },
            {{Shape{2, 3, 2}}});
  gradcheck("index_select axis 0", [&](const std::vector<Tensor>& x) { return index_select(x[0], 0, idx); },
            {{Shape{3, 2}}});
  Tensor gidx = from_vector<int64_t>({1, 1, 0, 2, 0, 0}, {2, 3});
  gradcheck("gather axis 0 (index smaller than x on axis 1)",
            [&](const std::vector<Tensor>& x) { return gather(x[0], 0, gidx); }, {{Shape{3, 4}}});
  Tensor cidx = from_vector<int64_t>({3, 0, 1}, {3, 1});
  gradcheck("gather axis 1", [&](const std::vector<Tensor>& x) { return gather(x[0], 1, cidx); }, {{Shape{3, 4}}});
  // Rank 3, i32 indices, many per row (scatter_add's gradient) with repeats,
  // and index smaller than x on both other axes: each gradient element
  // lands at its own offset in x.
  std::vector<int32_t> many;
  for (int i = 0; i < 2 * 3 * 9; ++i) many.push_back((i * 7 + i / 5) % 4);
  Tensor midx = from_vector<int32_t>(many, {2, 9, 3});
  gradcheck("gather axis 1 of rank 3, 9 indices per row",
            [&](const std::vector<Tensor>& x) { return gather(x[0], 1, midx); }, {{Shape{3, 4, 5}}});
  Tensor widx = permute(midx, {0, 2, 1});  // [2, 3, 9]
  gradcheck("gather axis 2 of rank 3, 9 indices per row",
            [&](const std::vector<Tensor>& x) { return gather(x[0], 2, widx); }, {{Shape{2, 4, 4}}});
  // A few per row (scatter_add too), and one per row along axes 1 and 2 of
  // rank 3 (the one-hot product).
  Tensor ridx = from_vector<int32_t>({4, 0, 4, 4, 1, 2, 0, 0, 3, 1, 1, 2}, {2, 3, 2});
  gradcheck("gather axis 1 of rank 3", [&](const std::vector<Tensor>& x) { return gather(x[0], 1, ridx); },
            {{Shape{3, 5, 4}}});
  gradcheck("gather axis 2 of rank 3", [&](const std::vector<Tensor>& x) { return gather(x[0], 2, ridx); },
            {{Shape{2, 4, 5}}});
  Tensor oneIdx = from_vector<int32_t>({4, 0, 4, 1, 2, 0}, {2, 1, 3});
  gradcheck("gather axis 1 of rank 3, one per row", [&](const std::vector<Tensor>& x) { return gather(x[0], 1, oneIdx); },
            {{Shape{2, 5, 3}}});
  gradcheck("gather axis 2 of rank 3, one per row",
            [&](const std::vector<Tensor>& x) { return gather(x[0], 2, permute(oneIdx, {0, 2, 1})); },
            {{Shape{2, 3, 5}}});
}

TEST(GradCheck, IndexAdd) {
  Tensor idx = from_vector<int64_t>({2, 0, 2}, {3});  // row 2 twice
  gradcheck("index_add axis 0", [&](const std::vector<Tensor>& x) { return index_add(x[0], 0, idx, x[1]); },
            {{Shape{3, 2}}, {Shape{3, 2}}});
  gradcheck("index_add axis -1", [&](const std::vector<Tensor>& x) { return index_add(x[0], -1, idx, x[1]); },
            {{Shape{2, 4}}, {Shape{2, 3}}});
  // Twice through it: the second derivative of index_select goes through
  // index_add's gradient, index_select again.
  gradcheck("index_select of index_add", [&](const std::vector<Tensor>& x) {
    Tensor y = index_add(mul(x[0], x[0]), 0, idx, x[1]);
    return index_select(mul(y, y), 0, idx);
  }, {{Shape{3, 2}}, {Shape{3, 2}}});
}

TEST(GradCheck, ScatterAdd) {
  Tensor idx = from_vector<int64_t>({2, 0, 2, 1, 1, 1}, {2, 3});  // positions named twice and three times
  gradcheck("scatter_add axis 1", [&](const std::vector<Tensor>& x) { return scatter_add(x[0], 1, idx, x[1]); },
            {{Shape{2, 4}}, {Shape{2, 3}}});
  Tensor rows = from_vector<int64_t>({1, 0, 1}, {1, 3});  // smaller than x off the axis
  gradcheck("scatter_add axis -2", [&](const std::vector<Tensor>& x) { return scatter_add(x[0], -2, rows, x[1]); },
            {{Shape{2, 4}}, {Shape{1, 3}}});
  // Through both: a scatter_add of a gather of 9 indices per row, whose
  // gradient is a scatter_add (gather's) of a gather (scatter_add's).
  std::vector<int64_t> many;
  for (int i = 0; i < 2 * 9; ++i) many.push_back((i * 5 + i / 4) % 4);
  Tensor midx = from_vector<int64_t>(many, {2, 9});
  gradcheck("scatter_add of gather", [&](const std::vector<Tensor>& x) {
    Tensor y = gather(mul(x[0], x[0]), 1, midx);
    return scatter_add(x[0], 1, midx, mul(y, y));
  }, {{Shape{2, 4}}});
}

// ---- convolution and pooling ------------------------------------------------------

TEST(GradCheck, Conv2dStridePaddingDilationGroups) {
  std::mt19937_64 rng(17);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  for (int trial = 0; trial < 14; ++trial) {
    const int64_t groups = pick(1, 2), cg = pick(1, 2), cog = pick(1, 2), n = pick(1, 2);
    const int64_t kh = pick(1, 3), kw = pick(1, 3), h = pick(3, 6), w = pick(3, 6);
    Conv2dOptions o;
    o.stride = {pick(1, 3), pick(1, 2)};
    o.dilation = {pick(1, 2), pick(1, 2)};
    // Paddings up to beyond the kernel's reach (the input gradient crops).
    o.padding = {pick(0, 3), pick(0, 2), pick(0, 2), pick(0, 3)};
    o.groups = groups;
    if ((kh - 1) * o.dilation[0] + 1 > h + o.padding[0] + o.padding[2] ||
        (kw - 1) * o.dilation[1] + 1 > w + o.padding[1] + o.padding[3])
      continue;
    const bool bias = trial % 2 == 0;
    const std::string what = "conv2d x [" + std::to_string(n) + ", " + std::to_string(groups * cg) + ", " +
                             std::to_string(h) + ", " + std::to_string(w) + "] w [" + std::to_string(groups * cog) +
                             ", " + std::to_string(cg) + ", " + std::to_string(kh) + ", " + std::to_string(kw) +
                             "] stride " + std::to_string(o.stride[0]) + "," + std::to_string(o.stride[1]) +
                             " dilation " + std::to_string(o.dilation[0]) + "," + std::to_string(o.dilation[1]) +
                             " pads " + std::to_string(o.padding[0]) + "," + std::to_string(o.padding[1]) + "," +
                             std::to_string(o.padding[2]) + "," + std::to_string(o.padding[3]) + " groups " +
                             std::to_string(groups);
    std::vector<Input> ins{{Shape{n, groups * cg, h, w}}, {Shape{groups * cog, cg, kh, kw}}};
    if (bias) ins.push_back({Shape{groups * cog}});
    gradcheck(what,
              [&](const std::vector<Tensor>& x) { return conv2d(x[0], x[1], bias ? x[2] : Tensor(), o); }, ins,
              trial);
  }
  Conv2dOptions nhwc;
  nhwc.layout = Layout::NHWC;
  nhwc.padding = {1};
  gradcheck("conv2d NHWC", [&](const std::vector<Tensor>& x) { return conv2d(x[0], x[1], {}, nhwc); },
            {{Shape{2, 4, 3, 2}}, {Shape{3, 2, 2, 2}}});
}

TEST(GradCheck, Pooling) {
  Pool2dOptions o;
  o.kernel = {3, 2};
  o.stride = {2, 1};
  o.padding = {1, 0, 1, 1};
  o.ceil_mode = true;
  gradcheck("max_pool2d", [&](const std::vector<Tensor>& x) { return max_pool2d(x[0], o); }, {{Shape{2, 2, 5, 4}}});
  o.count_include_pad = true;
  gradcheck("avg_pool2d count_include_pad", [&](const std::vector<Tensor>& x) { return avg_pool2d(x[0], o); },
            {{Shape{2, 2, 5, 4}}});
  o.count_include_pad = false;
  o.layout = Layout::NHWC;
  gradcheck("avg_pool2d NHWC", [&](const std::vector<Tensor>& x) { return avg_pool2d(x[0], o); },
            {{Shape{1, 5, 4, 3}}});
  gradcheck("adaptive_avg_pool2d uneven", [](const std::vector<Tensor>& x) { return adaptive_avg_pool2d(x[0], 3, 2); },
            {{Shape{2, 2, 5, 5}}});
  gradcheck("adaptive_avg_pool2d global", [](const std::vector<Tensor>& x) { return adaptive_avg_pool2d(x[0], 1, 1); },
            {{Shape{2, 3, 4, 4}}});
}

TEST(GradCheck, MaxPoolTiesGoToTheWindowsFirstMaximum) {
  // As PyTorch's max_pool2d: the first maximum in the window (row-major)
  // takes the whole gradient (chained maximums split it 1/8, 1/8, 1/4, 1/2);
  // a NaN wins its window.
  Pool2dOptions o;
  o.kernel = {2, 2};
  Tensor x = ones({1, 1, 2, 2}, DType::f64).requires_grad();
  EXPECT_EQ(grad(sum(max_pool2d(x, o)), {x})[0].to_vector<double>(), (std::vector<double>{1, 0, 0, 0}));
  Tensor y = from_vector<double>({1, std::nan(""), 3, 3}, {1, 1, 2, 2}).requires_grad();
  Tensor pooled = max_pool2d(y, o);
  EXPECT_TRUE(std::isnan(pooled.to_vector<double>()[0]));
  EXPECT_EQ(grad(sum(pooled), {y})[0].to_vector<double>(), (std::vector<double>{0, 1, 0, 0}));
  Tensor z = from_vector<double>({1, 2, 3, 3}, {1, 1, 2, 2}).requires_grad();
  EXPECT_EQ(grad(sum(max_pool2d(z, o)), {z})[0].to_vector<double>(), (std::vector<double>{0, 0, 1, 0}));
}

TEST(GradCheck, BatchNorm) {
  gradcheck("batch_norm training",
            [](const std::vector<Tensor>& x) { return batch_norm(x[0], x[1], x[2], {}, {}, true).y; },
            {{Shape{3, 2, 3, 2}}, {Shape{2}}, {Shape{2}}}, 1, 1e-5);
  gradcheck("batch_norm inference",
            [](const std::vector<Tensor>& x) { return batch_norm(x[0], x[1], x[2], x[3], x[4], false).y; },
            {{Shape{2, 3, 2}}, {Shape{3}}, {Shape{3}}, {Shape{3}}, {Shape{3}, 0.5, 2}}, 1, 1e-5);
}

// The running statistics are buffers: no graph hangs on them, so a model
// trained for many steps keeps no old graphs, and a backward pass through
// inference with them reaches no freed step.
TEST(GradCheck, BatchNormRunningStatisticsCarryNoGraph) {
  Tensor x = rand({4, 2}, 1, DType::f64);
  x.requires_grad();
  BatchNormResult t = batch_norm(x, {}, {}, zeros({2}, DType::f64), ones({2}, DType::f64), true);
  EXPECT_FALSE(t.running_mean.requires_grad_enabled());
  EXPECT_FALSE(t.running_var.requires_grad_enabled());
  grad(sum(t.y), {x});  // frees the training step's graph
  Tensor x2 = rand({4, 2}, 2, DType::f64);
  x2.requires_grad();
  BatchNormResult e = batch_norm(x2, {}, {}, t.running_mean, t.running_var, false);
  std::vector<Tensor> g;
  ASSERT_NO_THROW(g = grad(sum(e.y), {x2}));
  // d/dx2 of sum((x2 - m) / sqrt(v + eps)) = 1 / sqrt(v + eps) per channel.
  const std::vector<double> var = t.running_var.to_vector<double>(), got = g[0].to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int ch = 0; ch < 2; ++ch) EXPECT_NEAR(got[i * 2 + ch], 1 / std::sqrt(var[ch] + 1e-5), 1e-12);
}

// f16 and bf16 normalizations compute their statistics in f32: in f16 the
// backward's 1/sigma^3 overflowed to inf for a row whose deviation is below
// 0.025 (GPT-2's initialisation, 0.02), and the gradient was NaN.
TEST(GradCheck, HalfNormalizationsOfSmallDeviationsHaveFiniteGradients) {
  const Tensor values = from_vector<float>({0.02f, -0.02f, 0.02f, -0.02f}, {4});
  const Tensor w = from_vector<float>({1, 2, 3, 4}, {4});
  for (DType t : {DType::f16, DType::bf16}) {
    auto check = [&](const char* what, const std::function<Tensor(const Tensor&)>& norm, const Shape& shape) {
      Tensor x = reshape(cast(values, t), shape);
      x.requires_grad();
      Tensor g = grad(sum(mul(cast(norm(x), DType::f32), reshape(w, shape))), {x})[0];
      Tensor x64 = cast(reshape(cast(values, t), shape), DType::f64);
      x64.requires_grad();
      Tensor want = grad(sum(mul(norm(x64), cast(reshape(w, shape), DType::f64))), {x64})[0];
      const std::vector<double> got = cast(g, DType::f64).to_vector<double>(), ref = want.to_vector<double>();
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_NEAR(got[i], ref[i], 0.01 * std::abs(ref[i])) << what << " " << dtype_name(t) << " element " << i;
    };
    check("layer_norm", [](const Tensor& x) { return layer_norm(x); }, Shape{1, 4});
    check("batch_norm", [](const Tensor& x) { return batch_norm(x, {}, {}, {}, {}, true).y; }, Shape{4, 1});
  }
}

// ---- composites (through their primitives) --------------------------------------------

TEST(GradCheck, Composites) {
  gradcheck("softmax", [](const std::vector<Tensor>& x) { return softmax(x[0], 1); }, {{Shape{3, 4}}});
  gradcheck("log_softmax", [](const std::vector<Tensor>& x) { return log_softmax(x[0], -1); }, {{Shape{2, 5}}});
  gradcheck("layer_norm", [](const std::vector<Tensor>& x) { return layer_norm(x[0], x[1], x[2]); },
            {{Shape{3, 4}}, {Shape{4}}, {Shape{4}}}, 1, 1e-5);
  Tensor targets = from_vector<int64_t>({1, 0, 3}, {3});
  gradcheck("cross_entropy", [&](const std::vector<Tensor>& x) { return cross_entropy(x[0], targets); },
            {{Shape{3, 4}}});
  gradcheck("mlp", [](const std::vector<Tensor>& x) { return tanh(add(matmul(relu(x[0]), x[1]), x[2])); },
            {{Shape{4, 3}, -2, 2, true}, {Shape{3, 2}}, {Shape{2}}});
}

}  // namespace
}  // namespace kiln
