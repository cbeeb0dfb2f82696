// nn composites: softmax, log_softmax, layer_norm, cross_entropy.
#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

/// softmax (log = false) or log_softmax along `axis`, in double.
Ref softmaxRef(const Ref& x, int axis, bool log) {
  axis = normAxis(axis, x.rank());
  Ref out(x.shape);
  Dims outer = x.shape;
  int64_t n = outer[axis];
  outer[axis] = 1;
  for (int64_t o = 0; o < numelOf(outer); ++o) {
    Dims idx = unravel(o, outer);
    double m = -kInf, s = 0;
    for (int64_t k = 0; k < n; ++k) idx[axis] = k, m = std::max(m, x.at(idx));
    for (int64_t k = 0; k < n; ++k) idx[axis] = k, s += std::exp(x.at(idx) - m);
    for (int64_t k = 0; k < n; ++k) {
      idx[axis] = k;
      double v = x.at(idx) - m;
      out.at(idx) = log ? v - std::log(s) : std::exp(v) / s;
    }
  }
  return out;
}

/// layer_norm over the trailing `k` axes; w/b null: no affine part.
Ref layerNormRef(const Ref& x, int k, const Ref* w, const Ref* b, double eps) {
  int64_t inner = 1;
  for (int d = x.rank() - k; d < x.rank(); ++d) inner *= x.shape[d];
  Ref out(x.shape);
  int64_t groups = inner == 0 ? 0 : x.numel() / inner;
  for (int64_t g = 0; g < groups; ++g) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += x.v[g * inner + i];
    mean /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) var += (x.v[g * inner + i] - mean) * (x.v[g * inner + i] - mean);
    var /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) {
      double v = (x.v[g * inner + i] - mean) / std::sqrt(var + eps);
      if (w) v *= w->v[i];
      if (b) v += b->v[i];
      out.v[g * inner + i] = v;
    }
  }
  return out;
}

double crossEntropyRef(const Ref& logits, const Ref& targets) {
  Ref ls = softmaxRef(logits, 1, true);
  int64_t n = logits.shape[0], c = logits.shape[1];
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s -= ls.v[i * c + static_cast<int64_t>(targets.v[i])];
  return s / static_cast<double>(n);
}

void checkSoftmaxOnce(Rng& rng, DType t, bool log) {
  Dims s = randomShape(rng, 1, 4, 6, 0.05, 300);
  int r = static_cast<int>(s.size());
  int axis = static_cast<int>(rng.randint(-r, r - 1));
  if (s[normAxis(axis, r)] == 0) s[normAxis(axis, r)] = 3;
  Input x = makeInput(rng, s, t, {-3, 3});
  bool dflt = normAxis(axis, r) == r - 1 && rng.coin();
  SCOPED_TRACE(std::string(log ? "log_softmax(" : "softmax(") + x.how + ", " +
               (dflt ? "default axis" : std::to_string(axis)) + ")");
  Tensor y = log ? (dflt ? kiln::log_softmax(x.t) : kiln::log_softmax(x.t, axis))
                 : (dflt ? kiln::softmax(x.t) : kiln::softmax(x.t, axis));
  EXPECT_DTYPE(y, t);
  EXPECT_TRUE(near(y, softmaxRef(x.r, axis, log), compositeTolFor(t)));
}

TEST(OpsNN, SoftmaxAndLogSoftmaxEveryFloatDType) {
  Rng rng(kSeed + 70);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 20; ++it) {
      checkSoftmaxOnce(rng, t, false);
      checkSoftmaxOnce(rng, t, true);
    }
}

TEST(OpsNN, SoftmaxIsStableForLargeInputs) {
  for (DType t : kFloatTypes) {
    Ref x({2, 3}, {1000, 1001, 1002, -1000, -1000, -998});
    Input in = makeExact(x, t);
    Tol tol = compositeTolFor(t);
    EXPECT_TRUE(near(kiln::softmax(in.t), softmaxRef(in.r, 1, false), tol)) << tname(t);
    EXPECT_TRUE(near(kiln::log_softmax(in.t), softmaxRef(in.r, 1, true), tol)) << tname(t);
    Tensor tg = kiln::from_vector(std::vector<int64_t>{0, 2}, {2});
    Ref tr({2}, {0, 2});
    Tensor ce = kiln::cross_entropy(in.t, tg);
    EXPECT_TRUE(std::isfinite(ce.item<double>())) << tname(t);
    EXPECT_TRUE(near(ce, Ref({}, {crossEntropyRef(in.r, tr)}), {tol.rtol, tol.atol * 4})) << tname(t);
  }
}

void checkLayerNormOnce(Rng& rng, DType t) {
  int mode = static_cast<int>(rng.randint(0, 2));  // 0: no weight, 1: weight, 2: weight and bias
  Dims s;
  int r = 0, k = 1;
  for (;;) {
    s = randomShape(rng, 1, 4, 6, 0.03, 300);
    r = static_cast<int>(s.size());
    k = mode == 0 ? 1 : static_cast<int>(rng.randint(1, r));
    int64_t inner = numelOf(Dims(s.end() - k, s.end()));
    // f16/bf16 are normalised with primitives rounded to 8-11 bits: keep
    // groups large enough that the rounding of the mean stays small
    // against the spread.
    if (inner <= 1 || inner >= ((t == DType::f32 || t == DType::f64) ? 4 : 6)) break;
  }
  Input x = makeInput(rng, s, t, {-3, 3});
  Dims ws(s.end() - k, s.end());
  double eps = rng.pick(std::vector<double>{1e-5, 1e-3, 0.1});
  Input w, b;
  if (mode >= 1) w = makeInput(rng, ws, t, {0.5, 1.5});
  if (mode == 2) b = makeInput(rng, ws, t, {-1, 1});
  SCOPED_TRACE("layer_norm(" + x.how + (mode >= 1 ? ", weight " + w.how : "") + (mode == 2 ? ", bias " + b.how : "") +
               ", eps " + std::to_string(eps) + ")");
  Tensor y = mode == 0 ? kiln::layer_norm(x.t, {}, {}, eps)
             : mode == 1 ? kiln::layer_norm(x.t, w.t, {}, eps)
                         : kiln::layer_norm(x.t, w.t, b.t, eps);
  EXPECT_DTYPE(y, t);
  Tol tol = compositeTolFor(t);
  if (isFloat(t) && t != DType::f64 && t != DType::f32) tol.atol *= 2;
  EXPECT_TRUE(near(y, layerNormRef(x.r, k, mode >= 1 ? &w.r : nullptr, mode == 2 ? &b.r : nullptr, eps), tol));
}

TEST(OpsNN, SoftmaxOverAnEmptyAxisIsEmpty) {
  // As PyTorch: a [2, 0] softmax is [2, 0] (the row maximum of nothing threw).
  for (int axis : {1, 0}) {
    EXPECT_EQ(kiln::softmax(kiln::zeros({2, 0}), axis).shape(), (kiln::Shape{2, 0}));
    EXPECT_EQ(kiln::log_softmax(kiln::zeros({0, 3}), axis).shape(), (kiln::Shape{0, 3}));
  }
}

TEST(OpsNN, LayerNormEveryFloatDType) {
  Rng rng(kSeed + 71);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 25; ++it) checkLayerNormOnce(rng, t);
}

TEST(OpsNN, LayerNormExplicit) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 10, 10, 10, 10}, {2, 4});
  // Row 0: mean 2.5, var 1.25; row 1: constant, var 0 -> 0.
  double r = 1 / std::sqrt(1.25 + 1e-5);
  EXPECT_TRUE(near(kiln::layer_norm(x), Ref({2, 4}, {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r, 0, 0, 0, 0}),
                   compositeTolFor(DType::f32)));
  Tensor w = kiln::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  Tensor b = kiln::from_vector(std::vector<float>{0, 0, 1, 1}, {4});
  EXPECT_TRUE(near(kiln::layer_norm(x, w, b),
                   Ref({2, 4}, {-1.5 * r, -1.0 * r, 1.5 * r + 1, 6 * r + 1, 0, 0, 1, 1}),
                   compositeTolFor(DType::f32)));
  // Weight covering both axes normalizes over all 8 elements.
  Tensor w2 = kiln::ones({2, 4});
  Ref xr({2, 4}, {1, 2, 3, 4, 10, 10, 10, 10});
  EXPECT_TRUE(near(kiln::layer_norm(x, w2), layerNormRef(xr, 2, nullptr, nullptr, 1e-5), compositeTolFor(DType::f32)));
}

void checkCrossEntropyOnce(Rng& rng, DType t) {
  int64_t n = rng.randint(1, 12), c = rng.randint(1, 9);
  Input logits = makeInput(rng, {n, c}, t, {-3, 3});
  DType tt = rng.pick(std::vector<DType>{DType::i64, DType::i32});
  Input tg = makeInput(rng, {n}, tt, {0, static_cast<double>(c - 1)});
  SCOPED_TRACE("cross_entropy(" + logits.how + ", " + tg.how + ")");
  Tensor y = kiln::cross_entropy(logits.t, tg.t);
  EXPECT_DTYPE(y, t);
  EXPECT_EQ(y.rank(), 0);
  Tol tol = compositeTolFor(t);
  EXPECT_TRUE(near(y, Ref({}, {crossEntropyRef(logits.r, tg.r)}), {tol.rtol, tol.atol * 4}));
}

TEST(OpsNN, CrossEntropyEveryFloatDType) {
  Rng rng(kSeed + 72);
  for (DType t : kFloatTypes)
    for (int it = 0; it < 20; ++it) checkCrossEntropyOnce(rng, t);
  Tensor l = kiln::from_vector(std::vector<double>{0, 0, 0, 0, std::log(3.0), 0}, {2, 3});
  Tensor tg = kiln::from_vector(std::vector<int64_t>{2, 1}, {2});
  // Row 0: -log(1/3); row 1: -log(3/5).
  EXPECT_TRUE(near(kiln::cross_entropy(l, tg), Ref({}, {(std::log(3.0) - std::log(0.6)) / 2}), tolFor(DType::f64)));
}

TEST(OpsNN, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 800 + tid);
    for (int it = 0; it < 20; ++it) {
      DType t = rng.pick(kFloatTypes);
      switch (rng.randint(0, 3)) {
        case 0: checkSoftmaxOnce(rng, t, false); break;
        case 1: checkSoftmaxOnce(rng, t, true); break;
        case 2: checkLayerNormOnce(rng, t); break;
        default: checkCrossEntropyOnce(rng, t); break;
      }
    }
  });
}

TEST(OpsNN, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor pending = kiln::softmax(x);
  expectKilnError([&] { return kiln::softmax(x, 2); }, "softmax");
  expectKilnError([&] { return kiln::log_softmax(x, -3); }, "log_softmax");
  expectKilnError([&] { return kiln::layer_norm(x, kiln::ones({2})); }, "layer_norm");
  expectKilnError([&] { return kiln::layer_norm(x, kiln::ones({3}), kiln::ones({4})); }, "layer_norm");
  Tensor tg = kiln::from_vector(std::vector<int64_t>{0, 1, 2}, {3});
  expectKilnError([&] { return kiln::cross_entropy(x, tg); }, "cross_entropy");
  expectKilnError([&] { return kiln::cross_entropy(x, kiln::zeros({2}, DType::f32)); }, "cross_entropy");
  expectKilnError([&] { return kiln::cross_entropy(kiln::ones({6}), tg); }, "cross_entropy");
  // A class id past the logits' classes: named at this call (not gather).
  Tensor logits = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  expectKilnError([&] { return kiln::cross_entropy(logits, tg); }, "cross_entropy");
  expectKilnError([&] { return kiln::cross_entropy(logits, kiln::from_vector(std::vector<int64_t>{0, -1, 1}, {3})); },
                  "cross_entropy");
  Ref xr({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(near(pending, softmaxRef(xr, 1, false), compositeTolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::log_softmax(x, 0), softmaxRef(xr, 0, true), compositeTolFor(DType::f32)));
}

}  // namespace
}  // namespace kt
