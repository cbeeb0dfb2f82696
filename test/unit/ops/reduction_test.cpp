// Reductions: sum, mean, max, min, prod (axes, keepdim), argmax, argmin.
#include <bit>

#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

enum class Red { Sum, Mean, Max, Min, Prod };

const char* redName(Red r) {
  switch (r) {
    case Red::Sum: return "sum";
    case Red::Mean: return "mean";
    case Red::Max: return "max";
    case Red::Min: return "min";
    case Red::Prod: return "prod";
  }
  return "?";
}

Tensor callRed(Red r, const Tensor& x, const std::vector<int>& axes, bool keepdim, bool method) {
  switch (r) {
    case Red::Sum: return method ? x.sum(axes, keepdim) : kiln::sum(x, axes, keepdim);
    case Red::Mean: return method ? x.mean(axes, keepdim) : kiln::mean(x, axes, keepdim);
    case Red::Max: return kiln::max(x, axes, keepdim);
    case Red::Min: return kiln::min(x, axes, keepdim);
    case Red::Prod: return kiln::prod(x, axes, keepdim);
  }
  return {};
}

struct RedRef {
  Ref val;
  std::vector<double> absSum;  ///< per output: sum of |x| (error scale)
  int64_t count = 0;           ///< elements per output
};

/// Reference reduction over `axes` (normalized, empty = all).
RedRef reduceRef(const Ref& x, std::vector<int> axes, bool keepdim, Red r) {
  int rank = x.rank();
  std::vector<bool> red(rank, axes.empty());
  for (int a : axes) red[normAxis(a, rank)] = true;
  Dims outShape, fullShape;  // fullShape: keepdim form
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    fullShape.push_back(red[d] ? 1 : x.shape[d]);
    if (red[d]) count *= x.shape[d];
    if (!red[d] || keepdim) outShape.push_back(red[d] ? 1 : x.shape[d]);
  }
  double init = r == Red::Prod ? 1 : r == Red::Max ? -kInf : r == Red::Min ? kInf : 0;
  RedRef out{Ref(fullShape, init), std::vector<double>(static_cast<size_t>(numelOf(fullShape)), 0.0), count};
  for (int64_t i = 0; i < x.numel(); ++i) {
    Dims idx = unravel(i, x.shape);
    for (int d = 0; d < rank; ++d)
      if (red[d]) idx[d] = 0;
    int64_t o = ravel(idx, fullShape);
    double v = x.v[i];
    double& acc = out.val.v[o];
    switch (r) {
      case Red::Sum:
      case Red::Mean: acc += v; break;
      case Red::Prod: acc *= v; break;
      case Red::Max: acc = std::isnan(acc) || std::isnan(v) ? kNaN : std::max(acc, v); break;
      case Red::Min: acc = std::isnan(acc) || std::isnan(v) ? kNaN : std::min(acc, v); break;
    }
    out.absSum[o] += std::fabs(v);
  }
  if (r == Red::Mean)
    for (auto& v : out.val.v) v /= static_cast<double>(count);
  out.val.shape = outShape;
  return out;
}

DType redType(Red r, DType t) {
  if ((r == Red::Sum || r == Red::Prod) && !isFloat(t)) return DType::i64;
  return t;
}

/// Random axes of a rank-`rank` tensor: empty (all) or a subset, some
/// written as negative numbers.
std::vector<int> randomAxes(Rng& rng, int rank) {
  std::vector<int> axes;
  if (rank == 0 || rng.coin(0.2)) return axes;
  for (int d = 0; d < rank; ++d)
    if (rng.coin(0.5)) axes.push_back(rng.coin() ? d - rank : d);
  if (axes.empty()) axes.push_back(static_cast<int>(rng.randint(0, rank - 1)));
  std::shuffle(axes.begin(), axes.end(), rng.g);
  return axes;
}

std::string axesStr(const std::vector<int>& axes) {
  std::string s = "{";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + std::to_string(axes[i]);
  return s + "}";
}

void checkReductionOnce(Rng& rng, Red r, DType t) {
  bool emptyOk = r == Red::Sum || r == Red::Prod;
  Dims s;
  std::vector<int> axes;
  for (;;) {
    s = r == Red::Prod ? randomShape(rng, 0, 4, 5, 0.05, 40) : randomShape(rng, 0, 4, 6, 0.05, 300);
    axes = randomAxes(rng, static_cast<int>(s.size()));
    bool emptyReduce = false;
    for (int d = 0; d < static_cast<int>(s.size()); ++d) {
      bool red = axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end() ||
                 std::find(axes.begin(), axes.end(), d - static_cast<int>(s.size())) != axes.end();
      emptyReduce |= red && s[d] == 0;
    }
    if (emptyOk || !emptyReduce) break;
  }
  Range range = defaultRange(t);
  Input x;
  if (r == Red::Prod) {
    // Magnitudes near 1 (floats) or mostly +-1 with some 2 and 0 (integers),
    // so products stay finite and exact in double.
    Ref v(s);
    for (auto& e : v.v) {
      if (isBool(t)) e = rng.coin(0.9) ? 1 : 0;
      else if (isFloat(t)) e = castTo((rng.coin() ? 1 : -1) * rng.uniform(0.8, 1.25), t);
      else if (t == DType::u8) e = rng.pick(std::vector<double>{1, 1, 1, 2, 0});
      else e = rng.pick(std::vector<double>{1, -1, 1, -1, 2, -2, 0});
    }
    x = makeExact(v, t);
  } else {
    x = makeInput(rng, s, t, range);
    if (isFloat(t) && (r == Red::Max || r == Red::Min) && x.r.numel() > 0 && rng.coin(0.2)) {
      Ref v = x.r;
      sprinkle(rng, v, 0.05, {kNaN, kInf, -kInf});
      x = makeExact(v, t);
    }
  }
  bool keepdim = rng.coin();
  bool method = rng.coin();
  SCOPED_TRACE(std::string(redName(r)) + "(" + x.how + ", axes " + axesStr(axes) + (keepdim ? ", keepdim)" : ")"));
  Tensor y = callRed(r, x.t, axes, keepdim, method);
  DType want = redType(r, t);
  if (r == Red::Mean && !isFloat(t)) {
    EXPECT_TRUE(isFloat(y.dtype())) << "mean of " << tname(t) << " gave " << tname(y.dtype());
    want = y.dtype();
  } else {
    EXPECT_DTYPE(y, want);
  }
  RedRef ref = reduceRef(x.r, axes, keepdim, r);
  Tol tol = tolFor(want);
  std::vector<double> extra(ref.absSum.size());
  double n = static_cast<double>(std::max<int64_t>(ref.count, 1));
  for (size_t i = 0; i < extra.size(); ++i) {
    extra[i] = accumEps(want) * std::sqrt(n) * ref.absSum[i];
    if (r == Red::Mean) extra[i] /= n;
  }
  if (r == Red::Mean) tol.rtol *= 2;  // sum, then divide
  if (r == Red::Prod) tol.rtol *= 1 + n / 8;
  if (!isFloat(want)) ref.val = castRef(ref.val, want);
  EXPECT_TRUE(near(y, ref.val, tol, isFloat(want) ? &extra : nullptr));
}

TEST(OpsReduce, WholeTensorSumsGiveTheSameBitsEveryRun) {
  // A whole-tensor sum splits its elements over threads; the splits and the
  // order partial sums join in must not depend on which thread stole what.
  // Each tier on its own (their orders differ): interpreted, and compiled
  // from the first run.
  const kiln::Settings saved = kiln::settings();
  for (kiln::JitMode mode : {kiln::JitMode::Off, kiln::JitMode::Sync}) {
    kiln::Settings s = saved;
    s.jit = mode;
    s.jit_threshold = 1;
    kiln::set_settings(s);
    for (DType t : {DType::f64, DType::f32}) {
      Tensor x = kiln::randn({int64_t{1} << 22}, 11, t, 0, 1e6);
      kiln::sync();
      const double first = kiln::sum(x).cast(DType::f64).item<double>();
      for (int run = 0; run < 30; ++run)
        ASSERT_EQ(std::bit_cast<uint64_t>(kiln::sum(x).cast(DType::f64).item<double>()),
                  std::bit_cast<uint64_t>(first))
            << kiln::to_string(mode) << " " << tname(t) << " run " << run;
    }
  }
  kiln::set_settings(saved);
}

TEST(OpsReduce, RandomAxesKeepdimEveryDType) {
  Rng rng(kSeed + 30);
  for (Red r : {Red::Sum, Red::Mean, Red::Max, Red::Min, Red::Prod})
    for (DType t : kAllTypes)
      for (int it = 0; it < 10; ++it) checkReductionOnce(rng, r, t);
}

/// Reference argmax/argmin: first (or last) index of the extreme along
/// `axis` (inputs hold no NaN).
Ref argRef(const Ref& x, int axis, bool keepdim, bool isMax, bool last = false) {
  axis = normAxis(axis, x.rank());
  Dims full = x.shape;
  full[axis] = 1;
  Ref best(full, kNaN), out(full, 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    Dims idx = unravel(i, x.shape);
    int64_t k = idx[axis];
    idx[axis] = 0;
    int64_t o = ravel(idx, full);
    double v = x.v[i];
    const bool better = isMax ? v > best.v[o] : v < best.v[o];
    if (std::isnan(best.v[o]) || better || (last && v == best.v[o])) {
      best.v[o] = v;
      out.v[o] = static_cast<double>(k);
    }
  }
  if (!keepdim) out.shape.erase(out.shape.begin() + axis);
  return out;
}

void checkArgOnce(Rng& rng, DType t, bool isMax, bool last = false) {
  Dims s = randomShape(rng, 1, 4, 6, 0.05, 300);
  int rank = static_cast<int>(s.size());
  int axis = static_cast<int>(rng.randint(0, rank - 1));
  if (s[axis] == 0) s[axis] = 3;
  if (rng.coin()) axis -= rank;
  bool coarse = rng.coin();
  Range range = coarse ? (isFloat(t) ? Range{-1, 1, 0.5} : t == DType::u8 ? Range{0, 3} : Range{-2, 2})
                       : defaultRange(t);
  Input x = makeInput(rng, s, t, range);
  bool keepdim = rng.coin();
  SCOPED_TRACE(std::string(isMax ? "argmax(" : "argmin(") + x.how + ", " + std::to_string(axis) +
               (keepdim ? ", keepdim)" : ")"));
  Tensor y = isMax ? kiln::argmax(x.t, axis, keepdim, last) : kiln::argmin(x.t, axis, keepdim, last);
  EXPECT_DTYPE(y, DType::i64);
  EXPECT_TRUE(near(y, argRef(x.r, axis, keepdim, isMax, last), {}));
}

TEST(OpsReduce, ArgmaxArgminFirstIndexEveryDType) {
  Rng rng(kSeed + 31);
  for (DType t : kNumericTypes)
    for (int it = 0; it < 12; ++it) {
      checkArgOnce(rng, t, true);
      checkArgOnce(rng, t, false);
    }
}

TEST(OpsReduce, ArgmaxArgminLastIndexEveryDType) {
  Rng rng(kSeed + 32);
  for (DType t : kAllTypes)
    for (int it = 0; it < 12; ++it) {
      checkArgOnce(rng, t, true, /*last=*/true);
      checkArgOnce(rng, t, false, /*last=*/true);
    }
}

TEST(OpsReduce, ArgmaxLastIndexTiesAndNaN) {
  Tensor x = kiln::from_vector(std::vector<float>{3, 1, 3, 0, 1}, {5});
  EXPECT_EQ(kiln::argmax(x, 0).item<int64_t>(), 0);
  EXPECT_EQ(kiln::argmax(x, 0, false, true).item<int64_t>(), 2);
  EXPECT_EQ(kiln::argmin(x, 0, false, true).item<int64_t>(), 3);
  Tensor n = kiln::from_vector(std::vector<float>{1, kNaNf, 3, kNaNf, 2}, {5});
  EXPECT_EQ(kiln::argmax(n, 0).item<int64_t>(), 1);                // the first NaN
  EXPECT_EQ(kiln::argmax(n, 0, false, true).item<int64_t>(), 3);   // the last NaN
  EXPECT_EQ(kiln::argmin(n, 0, false, true).item<int64_t>(), 3);
  Tensor m = kiln::from_vector(std::vector<int32_t>{2, 5, 5, 2, 5, 2}, {2, 3});
  EXPECT_EQ(kiln::argmax(m, 1, true, true).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(kiln::argmin(m, 0, false, true).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
}

TEST(OpsReduce, Explicit) {
  Tensor i8 = kiln::from_vector(std::vector<int8_t>{100, 100, 100, -128, -128, 1}, {2, 3});
  Tensor s = kiln::sum(i8);
  EXPECT_DTYPE(s, DType::i64);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.item<int64_t>(), 45);
  EXPECT_TRUE(near(kiln::sum(i8, {1}), Ref({2}, {300, -255}), {}));
  EXPECT_TRUE(near(kiln::sum(i8, {0}, true), Ref({1, 3}, {-28, -28, 101}), {}));
  Tensor u8 = kiln::from_vector(std::vector<uint8_t>{200, 200, 200}, {3});
  EXPECT_EQ(kiln::sum(u8).item<int64_t>(), 600);
  EXPECT_EQ(kiln::prod(u8).item<int64_t>(), 8000000);
  EXPECT_DTYPE(kiln::prod(u8), DType::i64);
  EXPECT_DTYPE(kiln::max(u8), DType::u8);
  Tensor b = kiln::from_vector(std::vector<bool>{true, false, true, true}, {4});
  EXPECT_DTYPE(kiln::sum(b), DType::i64);
  EXPECT_EQ(kiln::sum(b).item<int64_t>(), 3);
  Tensor m = kiln::mean(kiln::from_vector(std::vector<int32_t>{1, 2, 3, 5}, {4}));
  EXPECT_TRUE(isFloat(m.dtype()));
  EXPECT_EQ(m.item<double>(), 2.75);
  Tensor f = kiln::from_vector(std::vector<float>{1, kNaNf, 3, -1, 2, 0}, {2, 3});
  EXPECT_TRUE(near(kiln::max(f, {1}), Ref({2}, {kNaN, 2}), {}));
  EXPECT_TRUE(near(kiln::min(f, {1}), Ref({2}, {kNaN, -1}), {}));
  EXPECT_TRUE(near(kiln::max(f, {0}), Ref({3}, {1, kNaN, 3}), {}));
  EXPECT_TRUE(std::isnan(kiln::max(f).item<double>()));
  Tensor ties = kiln::from_vector(std::vector<float>{1, 3, 3, 0, 0, 0, 2, -1, 2}, {3, 3});
  EXPECT_TRUE(near(kiln::argmax(ties, 1), Ref({3}, {1, 0, 0}), {}));
  EXPECT_TRUE(near(kiln::argmin(ties, -1), Ref({3}, {0, 0, 1}), {}));
  EXPECT_TRUE(near(kiln::argmax(ties, 0, true), Ref({1, 3}, {2, 0, 0}), {}));
  EXPECT_DTYPE(kiln::argmax(ties, 0), DType::i64);
  // Size-0 reductions.
  Tensor e = kiln::zeros({0, 3});
  EXPECT_TRUE(near(kiln::sum(e, {0}), Ref({3}, 0.0), {}));
  EXPECT_TRUE(near(kiln::prod(e, {0}), Ref({3}, 1.0), {}));
  EXPECT_TRUE(near(kiln::sum(e), Ref({}, 0.0), {}));
  EXPECT_TRUE(near(kiln::sum(e, {1}), Ref({0}), {}));
  EXPECT_TRUE(near(kiln::max(e, {1}, true), Ref({0, 1}), {}));
  // Rank 0.
  Tensor r0 = kiln::scalar_tensor(2.5);
  EXPECT_TRUE(near(kiln::sum(r0), Ref({}, 2.5), {}));
  EXPECT_TRUE(near(kiln::max(r0), Ref({}, 2.5), {}));
  EXPECT_TRUE(near(kiln::mean(r0), Ref({}, 2.5), {}));
}

// Float max/min are IEEE maximum/minimum: NaN wins, +0 > -0, whatever the
// order of the elements (the row loops are vectorised, so the order is not
// the index order).
TEST(OpsReduce, MaxMinSignedZeroAndNaNAnyOrder) {
  for (bool f64 : {false, true}) {
    SCOPED_TRACE(f64 ? "f64" : "f32");
    auto make = [&](std::vector<float> v, Shape s) {
      Tensor t = kiln::from_vector(v, s);
      return f64 ? kiln::cast(t, DType::f64) : t;
    };
    for (const std::vector<float>& zeros : {std::vector<float>{-0.f, 0.f}, std::vector<float>{0.f, -0.f}}) {
      Tensor z = make(zeros, {2});
      EXPECT_FALSE(std::signbit(kiln::max(z).item<double>()));
      EXPECT_TRUE(std::signbit(kiln::min(z).item<double>()));
    }
    // Rows of 70 (four vectors of 16 and a tail): +0 or NaN at every place.
    const int64_t n = 70;
    for (int64_t at : {int64_t{0}, int64_t{15}, int64_t{16}, int64_t{63}, int64_t{64}, int64_t{69}}) {
      SCOPED_TRACE("at " + std::to_string(at));
      std::vector<float> v(static_cast<size_t>(3 * n), -0.f);
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(2 * n + i)] = -1.f - static_cast<float>(i);
      v[static_cast<size_t>(at)] = 0.f;
      v[static_cast<size_t>(n + at)] = std::copysign(kNaNf, -1.f);  // a NaN with its sign bit set
      v[static_cast<size_t>(2 * n + at)] = -kInff;
      Tensor x = make(v, {3, n});
      std::vector<double> mx = kiln::max(x, {1}).to_vector<double>(), mn = kiln::min(x, {1}).to_vector<double>();
      EXPECT_EQ(mx[0], 0.0);
      EXPECT_FALSE(std::signbit(mx[0]));
      EXPECT_TRUE(std::signbit(mn[0]));
      EXPECT_TRUE(std::isnan(mx[1]));
      EXPECT_TRUE(std::isnan(mn[1]));
      EXPECT_EQ(mx[2], at == 0 ? -2.0 : -1.0);
      EXPECT_EQ(mn[2], -kInf);
    }
  }
}

TEST(OpsReduce, LargeSumAccuracy) {
  const int64_t n = 1 << 18;
  Tensor x = kiln::rand({n}, 5);
  std::vector<double> v = x.to_vector<double>();
  double ref = 0, abs = 0;
  for (double e : v) ref += e, abs += std::fabs(e);
  Tensor s = kiln::sum(x);
  double tol = 1e-5 * ref + 1e-6 * std::sqrt(double(n)) * abs;
  EXPECT_NEAR(s.item<double>(), ref, tol);
  EXPECT_NEAR(kiln::mean(x).item<double>(), ref / n, tol / n);
  // Rows of a 2-D view: strided reduction along the non-contiguous axis.
  Tensor m = kiln::reshape(x, {512, 512});
  Tensor cols = kiln::sum(kiln::transpose(m), {1});
  std::vector<double> got = cols.to_vector<double>();
  for (int j = 0; j < 512; j += 37) {
    double c = 0;
    for (int i = 0; i < 512; ++i) c += v[i * 512 + j];
    EXPECT_NEAR(got[j], c, 1e-4 * c) << "column " << j;
  }
}

TEST(OpsReduce, HalfMeanSumsInF32AndRoundsOnce) {
  // As PyTorch: the sum of 2049 ones is 2048 in f16 and 1/2049 rounds too,
  // so the half mean came out 0.99951; four 60000s overflowed to inf.
  for (DType t : {DType::f16, DType::bf16}) {
    EXPECT_EQ(kiln::mean(kiln::ones({2049}, t)).to_vector<double>(), (std::vector<double>{1.0})) << tname(t);
    Tensor m = kiln::mean(kiln::full({2, 4}, 60000.0, t), {1});
    EXPECT_DTYPE(m, t);
    EXPECT_EQ(m.to_vector<double>(), kiln::full({2}, 60000.0, t).to_vector<double>()) << tname(t);
  }
}

TEST(OpsReduce, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 400 + tid);
    for (int it = 0; it < 40; ++it) {
      DType t = rng.pick(kNumericTypes);
      if (rng.coin(0.25)) checkArgOnce(rng, t, rng.coin());
      else checkReductionOnce(rng, rng.pick(std::vector<Red>{Red::Sum, Red::Mean, Red::Max, Red::Min, Red::Prod}), t);
    }
  });
}

/// Running sums along `axis`, in double (small integers: exact in every
/// dtype and sum).
Ref cumsumRef(const Ref& x, int axis) {
  axis = normAxis(axis, x.rank());
  Ref out = x;
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims at = unravel(i, x.shape);
    if (at[axis] == 0) continue;
    at[axis] -= 1;
    int64_t previous = 0;
    for (int d = 0; d < x.rank(); ++d) previous = previous * x.shape[d] + at[d];
    out.v[i] += out.v[previous];  // row-major: the previous position is done
  }
  return out;
}

TEST(OpsReduce, CumsumEveryDType) {
  Rng rng(kSeed + 90);
  for (DType t : kAllTypes) {
    for (int it = 0; it < 20; ++it) {
      Dims s = randomShape(rng, 1, 4, 6, 0.05);
      const int r = static_cast<int>(s.size());
      int axis = static_cast<int>(rng.randint(0, r - 1));
      if (rng.coin(0.3)) axis -= r;
      Input x = makeInput(rng, s, t, t == DType::u8 || t == DType::boolean ? Range{0, 3, 1} : Range{-4, 4, 1});
      SCOPED_TRACE("cumsum(" + x.how + ", " + std::to_string(axis) + ")");
      Tensor y = kiln::cumsum(x.t, axis);
      EXPECT_DTYPE(y, kiln::sum(x.t).dtype());  // sums' dtype rule
      EXPECT_EQ(y.shape(), x.t.shape());
      EXPECT_TRUE(near(y, cumsumRef(x.r, axis), {}));
    }
  }
}

TEST(OpsReduce, CumsumExplicit) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(near(kiln::cumsum(x, 1), Ref({2, 3}, {1, 3, 6, 4, 9, 15}), {}));
  EXPECT_TRUE(near(kiln::cumsum(x, -2), Ref({2, 3}, {1, 2, 3, 5, 7, 9}), {}));
  // Along a transposed view.
  EXPECT_TRUE(near(kiln::cumsum(kiln::transpose(x, 0, 1), 1), Ref({3, 2}, {1, 5, 2, 7, 3, 9}), {}));
  // -0 keeps its sign (no + 0 before the first element); NaN and inf carry on.
  std::vector<float> z = kiln::cumsum(kiln::from_vector(std::vector<float>{-0.0f, -0.0f, NAN, 1}, {4}), 0)
                             .to_vector<float>();
  EXPECT_TRUE(std::signbit(z[0]) && std::signbit(z[1]) && z[1] == 0);
  EXPECT_TRUE(std::isnan(z[2]) && std::isnan(z[3]));
  std::vector<float> inf = kiln::cumsum(kiln::from_vector(std::vector<float>{1, INFINITY, -INFINITY}, {3}), 0)
                               .to_vector<float>();
  EXPECT_EQ(inf[1], INFINITY);
  EXPECT_TRUE(std::isnan(inf[2]));
  // Integers and bool add up in i64: no u8 wrap.
  Tensor u = kiln::cumsum(kiln::from_vector(std::vector<uint8_t>{200, 100}, {2}), 0);
  EXPECT_DTYPE(u, DType::i64);
  EXPECT_EQ(u.to_vector<int64_t>(), (std::vector<int64_t>{200, 300}));
  EXPECT_EQ(kiln::cumsum(kiln::from_vector(std::vector<bool>{true, false, true}, {3}), 0).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 2}));
  // Halves: an f32 running sum, each result rounded (as PyTorch): 2049
  // rounds to 2048 but the sum goes on to 2050; rounding each addition
  // would stay at 2048.
  std::vector<float> h = kiln::cast(kiln::cumsum(kiln::cast(kiln::from_vector(std::vector<float>{2048, 1, 1}, {3}),
                                                            DType::f16), 0), DType::f32)
                             .to_vector<float>();
  EXPECT_EQ(h, (std::vector<float>{2048, 2048, 2050}));
  // Rank 0 and size 0.
  EXPECT_EQ(kiln::cumsum(kiln::full({}, 2.5), -1).item<float>(), 2.5f);
  EXPECT_EQ(kiln::cumsum(kiln::zeros({3, 0}), 1).shape(), (Shape{3, 0}));
}

TEST(OpsReduce, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor pending = kiln::sum(x, {1});
  for (Red r : {Red::Sum, Red::Mean, Red::Max, Red::Min, Red::Prod}) {
    expectKilnError([&] { return callRed(r, x, {2}, false, false); }, redName(r));
    expectKilnError([&] { return callRed(r, x, {-3}, true, false); }, redName(r));
  }
  expectKilnError([&] { return kiln::argmax(x, 2); }, "argmax");
  expectKilnError([&] { return kiln::argmin(x, -3); }, "argmin");
  expectKilnError([&] { return kiln::cumsum(x, 2); }, "out of range for rank");
  expectKilnError([&] { return kiln::cumsum(kiln::full({}, 1.0), 1); }, "rank-0");
  EXPECT_TRUE(near(pending, Ref({2}, {6, 15}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::max(x, {0}), Ref({3}, {4, 5, 6}), {}));
}

}  // namespace
}  // namespace kt
