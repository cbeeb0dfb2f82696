// Creation ops: zeros, ones, full, zeros_like, ones_like, scalar_tensor,
// arange, from_vector, rand, randn.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

TEST(OpsCreation, ZerosOnesFullEveryDType) {
  Rng rng(kSeed + 1);
  for (int it = 0; it < 40; ++it) {
    Dims s = randomShape(rng, 0, 4, 5, 0.1);
    for (DType t : kAllTypes) {
      SCOPED_TRACE(tname(t) + str(s));
      Tensor z = kiln::zeros(toShape(s), t);
      Tensor o = kiln::ones(toShape(s), t);
      EXPECT_DTYPE(z, t);
      EXPECT_DTYPE(o, t);
      EXPECT_TRUE(near(z, Ref(s, 0.0), tolFor(t)));
      EXPECT_TRUE(near(o, Ref(s, 1.0), tolFor(t)));
      double val = isBool(t) ? 1 : t == DType::u8 ? 200 : isInt(t) ? -7 : -2.5;
      Tensor f = kiln::full(toShape(s), isInt(t) || isBool(t) ? kiln::Scalar(static_cast<int64_t>(val))
                                                              : kiln::Scalar(val),
                            t);
      EXPECT_DTYPE(f, t);
      EXPECT_TRUE(near(f, Ref(s, val), tolFor(t)));
      Tensor zl = kiln::zeros_like(f), ol = kiln::ones_like(z);
      EXPECT_DTYPE(zl, t);
      EXPECT_DTYPE(ol, t);
      EXPECT_TRUE(near(zl, Ref(s, 0.0), tolFor(t)));
      EXPECT_TRUE(near(ol, Ref(s, 1.0), tolFor(t)));
    }
  }
}

TEST(OpsCreation, DefaultsAreF32) {
  EXPECT_DTYPE(kiln::zeros({2, 3}), DType::f32);
  EXPECT_DTYPE(kiln::ones({}), DType::f32);
  EXPECT_DTYPE(kiln::full({4}, 3), DType::f32);
  Tensor f = kiln::full({4}, 3);
  EXPECT_TRUE(near(f, Ref({4}, 3.0), tolFor(DType::f32)));
  Tensor s = kiln::scalar_tensor(3.5);
  EXPECT_DTYPE(s, DType::f32);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.item<double>(), 3.5);
}

TEST(OpsCreation, FullRoundsToDType) {
  // 0.1 is not representable: the stored value is the dtype's nearest value.
  for (DType t : kFloatTypes) {
    Tensor f = kiln::full({3}, 0.1, t);
    EXPECT_TRUE(near(f, Ref({3}, castTo(0.1, t)), {0, 0})) << tname(t);
  }
  Tensor big = kiln::full({2}, 1e30, DType::f32);
  EXPECT_TRUE(near(big, Ref({2}, castTo(1e30, DType::f32)), {0, 0}));
}

TEST(OpsCreation, FullOfAValueAnIntegerDTypeCannotHoldIsAnError) {
  // As PyTorch: a clear error, not a wrapped value (300.0 as u8 was 44, 3e9
  // as i32 -1294967296) nor a conversion with undefined behaviour (NaN,
  // infinities, 1e19 into int64).
  expectKilnError([] { return kiln::full({1}, 300.0, DType::u8); }, "full");
  expectKilnError([] { return kiln::full({1}, -1, DType::u8); }, "full");
  expectKilnError([] { return kiln::full({1}, 3e9, DType::i32); }, "full");
  expectKilnError([] { return kiln::full({1}, 1e19, DType::i64); }, "full");
  expectKilnError([] { return kiln::full({1}, std::nan(""), DType::i8); }, "full");
  expectKilnError([] { return kiln::full({1}, -INFINITY, DType::i64); }, "full");
  // The edges and truncation toward zero fit.
  EXPECT_EQ(kiln::full({1}, 255.9, DType::u8).to_vector<int64_t>(), (std::vector<int64_t>{255}));
  EXPECT_EQ(kiln::full({1}, -128, DType::i8).to_vector<int64_t>(), (std::vector<int64_t>{-128}));
  EXPECT_EQ(kiln::full({1}, -2.9, DType::i32).to_vector<int64_t>(), (std::vector<int64_t>{-2}));
  EXPECT_EQ(kiln::full({1}, INT64_MIN, DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN}));
  // A bool holds any value (nonzero is true); float dtypes round.
  EXPECT_EQ(kiln::full({1}, 300.0, DType::boolean).to_vector<int64_t>(), (std::vector<int64_t>{1}));
  // A float scalar's integer view saturates (NaN as 0) instead of a cast
  // with undefined behaviour.
  EXPECT_EQ(kiln::Scalar(std::nan("")).to_int(), 0);
  EXPECT_EQ(kiln::Scalar(1e300).to_int(), INT64_MAX);
  EXPECT_EQ(kiln::Scalar(-INFINITY).to_int(), INT64_MIN);
}

TEST(OpsCreation, ScalarTensorEveryDType) {
  for (DType t : kAllTypes) {
    double v = isBool(t) ? 1 : t == DType::u8 ? 250 : isInt(t) ? -100 : 1.25;
    Tensor s = isFloat(t) ? kiln::scalar_tensor(v, t) : kiln::scalar_tensor(static_cast<int64_t>(v), t);
    EXPECT_DTYPE(s, t);
    EXPECT_EQ(s.rank(), 0) << tname(t);
    EXPECT_EQ(s.numel(), 1);
    EXPECT_EQ(s.item<double>(), v) << tname(t);
  }
  EXPECT_EQ(kiln::scalar_tensor(int64_t{1} << 40, DType::i64).item<int64_t>(), int64_t{1} << 40);
}

Ref arangeRef(double start, double end, double step, DType t) {
  int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  if (n < 0) n = 0;
  Ref r({n});
  for (int64_t i = 0; i < n; ++i) r.v[i] = castTo(start + static_cast<double>(i) * step, t);
  return r;
}

TEST(OpsCreation, Arange) {
  Tensor a = kiln::arange(5);
  EXPECT_DTYPE(a, DType::i64);
  EXPECT_TRUE(near(a, Ref({5}, {0, 1, 2, 3, 4}), {}));
  Tensor e = kiln::arange(0);
  EXPECT_TRUE(near(e, Ref({0}), {}));

  struct Case {
    double start, end, step;
  };
  std::vector<Case> cases = {{0, 10, 1},    {0, 10, 3},   {-3, 4, 0.5},  {5, 0, -1.5}, {3, 3, 1},
                             {2, 1, 1},     {0, 1, 0.1},  {-1, -10, -2}, {0.5, 7.25, 0.75}};
  for (const Case& c : cases) {
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      Tensor r = kiln::arange(c.start, c.end, c.step, t);
      EXPECT_DTYPE(r, t);
      Tol tol = tolFor(t);
      tol.atol = std::max(tol.atol, tol.rtol * 10);
      EXPECT_TRUE(near(r, arangeRef(c.start, c.end, c.step, DType::f64), tol))
          << tname(t) << " arange(" << c.start << ", " << c.end << ", " << c.step << ")";
    }
  }
  std::vector<Case> intCases = {{0, 10, 3}, {-5, 5, 2}, {10, -3, -4}, {0, 0, 1}, {0, 100, 7}};
  for (const Case& c : intCases)
    for (DType t : {DType::i64, DType::i32, DType::i8}) {
      Tensor r = kiln::arange(c.start, c.end, c.step, t);
      EXPECT_DTYPE(r, t);
      EXPECT_TRUE(near(r, arangeRef(c.start, c.end, c.step, t), {}))
          << tname(t) << " arange(" << c.start << ", " << c.end << ", " << c.step << ")";
    }
}

TEST(OpsCreation, FromVectorRoundTripEveryDType) {
  Rng rng(kSeed + 2);
  for (int it = 0; it < 30; ++it) {
    Dims s = randomShape(rng, 0, 4, 5, 0.1);
    for (DType t : kAllTypes) {
      Ref r = randomRef(rng, s, t, defaultRange(t, true));
      Tensor x = makeTensor(r, t);
      EXPECT_DTYPE(x, t);
      EXPECT_EQ(toDims(x.shape()), s);
      EXPECT_EQ(x.numel(), numelOf(s));
      EXPECT_TRUE(near(x, r, {0, 0})) << tname(t) << str(s);
    }
  }
  // Typed read back.
  std::vector<int64_t> big = {int64_t{1} << 60, -(int64_t{1} << 62) + 3, 7};
  EXPECT_EQ(kiln::from_vector(big, {3}).to_vector<int64_t>(), big);
  std::vector<int8_t> i8 = {-128, 127, 0, -1};
  EXPECT_EQ(kiln::from_vector(i8, {2, 2}).to_vector<int8_t>(), i8);
  std::vector<bool> b = {true, false, true};
  EXPECT_EQ(kiln::from_vector(b, {3}).to_vector<bool>(), b);
  EXPECT_EQ(kiln::from_vector(std::vector<float>{2.5f}, {}).item<float>(), 2.5f);
  EXPECT_EQ(kiln::from_vector(std::vector<double>{0.1}, {1, 1}).item<double>(), 0.1);
}

TEST(OpsCreation, RandRangeMomentsAndDtype) {
  const Dims s = {200, 500};
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(tname(t));
    Tensor u = kiln::rand(toShape(s), 42, t);
    EXPECT_DTYPE(u, t);
    std::vector<double> v = u.to_vector<double>();
    ASSERT_EQ(v.size(), 100000u);
    double sum = 0, sq = 0;
    bool inRange = true;
    for (double x : v) {
      inRange &= x >= 0 && (x < 1 || (t == DType::f16 || t == DType::bf16 ? x <= 1 : false));
      sum += x;
      sq += x * x;
    }
    EXPECT_TRUE(inRange);
    double mean = sum / v.size(), var = sq / v.size() - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.01);
    EXPECT_NEAR(var, 1.0 / 12, 0.005);

    Tensor w = kiln::rand(toShape(s), 7, t, -2, 3);
    std::vector<double> wv = w.to_vector<double>();
    double wmin = 1e9, wmax = -1e9, wsum = 0;
    for (double x : wv) wmin = std::min(wmin, x), wmax = std::max(wmax, x), wsum += x;
    EXPECT_GE(wmin, -2);
    EXPECT_LE(wmax, 3);
    EXPECT_LT(wmin, -1.9);
    EXPECT_GT(wmax, 2.9);
    EXPECT_NEAR(wsum / wv.size(), 0.5, 0.05);
  }
}

TEST(OpsCreation, RandnMoments) {
  const Dims s = {100000};
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(tname(t));
    for (auto [m, sd] : std::vector<std::pair<double, double>>{{0, 1}, {3, 2}, {-1, 0.5}}) {
      Tensor n = kiln::randn(toShape(s), 1234, t, m, sd);
      EXPECT_DTYPE(n, t);
      std::vector<double> v = n.to_vector<double>();
      double sum = 0, sq = 0;
      int finite = 0, beyond2 = 0;
      for (double x : v) {
        finite += std::isfinite(x);
        sum += x;
        beyond2 += std::fabs(x - m) > 2 * sd;
      }
      double mean = sum / v.size();
      for (double x : v) sq += (x - mean) * (x - mean);
      double sdev = std::sqrt(sq / v.size());
      EXPECT_EQ(finite, 100000);
      EXPECT_NEAR(mean, m, 0.02 * sd);
      EXPECT_NEAR(sdev, sd, 0.02 * sd);
      // P(|z| > 2) = 4.55 %: checks the shape of the distribution, not only moments.
      EXPECT_NEAR(beyond2 / 100000.0, 0.0455, 0.005);
    }
  }
}

TEST(OpsCreation, RandDeterminismAndSeeds) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(tname(t));
    for (bool normal : {false, true}) {
      auto gen = [&](const Dims& s, uint64_t seed) {
        return normal ? kiln::randn(toShape(s), seed, t) : kiln::rand(toShape(s), seed, t);
      };
      std::vector<double> a = gen({37, 11}, 99).to_vector<double>();
      std::vector<double> b = gen({37, 11}, 99).to_vector<double>();
      std::vector<double> c = gen({37, 11}, 100).to_vector<double>();
      EXPECT_EQ(a, b);
      int same = 0;
      for (size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
      EXPECT_LT(same, static_cast<int>(a.size()) / 10) << "seeds 99 and 100 give nearly the same values";
      // Element i depends only on (seed, i): a different shape with the same
      // element count, and a prefix, give the same values.
      std::vector<double> flat = gen({407}, 99).to_vector<double>();
      EXPECT_EQ(flat, a);
      std::vector<double> prefix = gen({5, 3}, 99).to_vector<double>();
      EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), a.begin()));
      // Not all equal.
      EXPECT_NE(*std::min_element(a.begin(), a.end()), *std::max_element(a.begin(), a.end()));
    }
  }
}

std::vector<uint32_t> bitsOf(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

TEST(OpsCreation, RandIndependentOfTraceSplitAndThreads) {
  const Shape s{64, 33};
  // Alone in its own trace.
  std::vector<uint32_t> alone = bitsOf(kiln::rand(s, 2024));
  std::vector<uint32_t> aloneN = bitsOf(kiln::randn(s, 2024));
  // Inside a bigger trace, used by other ops, read after them.
  kiln::sync();
  Tensor x = kiln::ones({64, 33}) * 3.0;
  Tensor r = kiln::rand(s, 2024);
  Tensor n = kiln::randn(s, 2024);
  Tensor y = kiln::add(kiln::mul(r, x), n);
  Tensor z = kiln::sum(y);
  (void)z.item<float>();
  EXPECT_EQ(bitsOf(r), alone);
  EXPECT_EQ(bitsOf(n), aloneN);
  // In several traces over several steps.
  for (int i = 0; i < 3; ++i) {
    Tensor rr = kiln::rand(s, 2024) + 0.0;
    kiln::step();
    Tensor nn = kiln::randn(s, 2024);
    EXPECT_EQ(bitsOf(nn), aloneN) << "step " << i;
    EXPECT_EQ(bitsOf(kiln::rand(s, 2024)), alone) << "step " << i;
    (void)rr;
  }
  // On several threads at once.
  std::vector<std::vector<uint32_t>> got(4), gotN(4);
  runOnThreads(4, [&](int i) {
    Tensor a = kiln::rand(s, 2024);
    Tensor b = kiln::randn(s, 2024);
    Tensor c = kiln::exp(a) + b;  // other work in the same trace
    (void)c.to_vector<float>();
    got[i] = bitsOf(a);
    gotN[i] = bitsOf(b);
  });
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i], alone) << "thread " << i;
    EXPECT_EQ(gotN[i], aloneN) << "thread " << i;
  }
}

TEST(OpsCreation, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 100 + tid);
    for (int it = 0; it < 30; ++it) {
      Dims s = randomShape(rng, 0, 3, 6, 0.1);
      DType t = rng.pick(kAllTypes);
      Ref r = randomRef(rng, s, t);
      Tensor x = makeTensor(r, t);
      Tensor z = kiln::zeros(toShape(s), t);
      Tensor o = kiln::ones_like(x);
      Tensor a = kiln::arange(static_cast<int64_t>(it + tid));
      EXPECT_TRUE(near(x, r, {}));
      EXPECT_TRUE(near(z, Ref(s, 0.0), {}));
      EXPECT_TRUE(near(o, Ref(s, 1.0), {}));
      EXPECT_TRUE(near(a, arangeRef(0, it + tid, 1, DType::i64), {}));
    }
  });
}

TEST(OpsCreation, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor keep = kiln::arange(0, 6, 1, DType::f32);
  Tensor pending = keep * 2.0;  // recorded, not yet run
  expectKilnError([] { return kiln::arange(0, 10, 0); }, "arange");
  expectKilnError([] { return kiln::from_vector(std::vector<float>{1, 2, 3}, {2, 2}); }, "from_vector");
  expectKilnError([] { return kiln::arange(1.0, 2.0, 0.0, DType::i32); }, "arange");
  EXPECT_TRUE(near(pending, Ref({6}, {0, 2, 4, 6, 8, 10}), tolFor(DType::f32)));
  EXPECT_TRUE(near(keep, Ref({6}, {0, 1, 2, 3, 4, 5}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::ones({2}) + keep.sum(), Ref({2}, 16.0), tolFor(DType::f32)));
}

}  // namespace
}  // namespace kt
