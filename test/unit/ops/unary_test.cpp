// Elementwise unary ops against double reference loops.
#include <bit>
#include <numbers>

#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

/// What an op gives for integer (and bool) inputs.
enum class IntRule {
  Keep,       ///< same integer dtype, wrapping like a C++ cast
  ToF32,      ///< computed in f32 (transcendental ops, reciprocal)
  KeepOrF32,  ///< exact values; dtype the input's or f32 (floor/ceil/round)
};

struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double (*ref)(double);
  IntRule intRule;
  bool boolInput;  ///< bool inputs are tested (they compute in f32)
  bool composite;  ///< looser float tolerance (several roundings)
  bool specials;   ///< NaN / inf inputs are tested
  Range floatRange;
  Range intRange;
};

double gelu(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double geluExact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double leakyRelu(double x) { return x > 0 ? x : x * 0.1; }  // NaN stays NaN

const std::vector<UnaryOp>& ops() {
  static const std::vector<UnaryOp> v = {
      {"neg", kiln::neg, [](double x) { return -x; }, IntRule::Keep, false, false, true, {-4, 4}, {}},
      {"abs", kiln::abs, [](double x) { return std::fabs(x); }, IntRule::Keep, false, false, true, {-4, 4}, {}},
      {"exp", kiln::exp, [](double x) { return std::exp(x); }, IntRule::ToF32, true, false, true, {-6, 6}, {-10, 10}},
      {"log", kiln::log, [](double x) { return std::log(x); }, IntRule::ToF32, true, false, true, {-0.5, 8}, {-2, 50}},
      {"log2", kiln::log2, [](double x) { return std::log2(x); }, IntRule::ToF32, true, false, true, {-0.5, 8}, {-2, 50}},
      {"sqrt", kiln::sqrt, [](double x) { return std::sqrt(x); }, IntRule::ToF32, true, false, true, {-0.5, 9}, {-2, 100}},
      {"rsqrt", kiln::rsqrt, [](double x) { return 1 / std::sqrt(x); }, IntRule::ToF32, true, false, true, {-0.5, 9}, {-2, 100}},
      {"tanh", kiln::tanh, [](double x) { return std::tanh(x); }, IntRule::ToF32, true, false, true, {-4, 4}, {-5, 5}},
      {"sigmoid", kiln::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, IntRule::ToF32, true, true, false, {-8, 8}, {-10, 10}},
      {"relu", kiln::relu, [](double x) { return x > 0 ? x : 0.0; }, IntRule::Keep, false, false, false, {-4, 4}, {}},
      {"gelu", kiln::gelu, gelu, IntRule::ToF32, true, true, false, {-4, 4}, {-5, 5}},
      {"sin", kiln::sin, [](double x) { return std::sin(x); }, IntRule::ToF32, true, false, true, {-7, 7}, {-10, 10}},
      {"cos", kiln::cos, [](double x) { return std::cos(x); }, IntRule::ToF32, true, false, true, {-7, 7}, {-10, 10}},
      {"atan", kiln::atan, [](double x) { return std::atan(x); }, IntRule::ToF32, true, false, true, {-8, 8}, {-100, 100}},
      {"floor", kiln::floor, [](double x) { return std::floor(x); }, IntRule::KeepOrF32, false, false, true, {-6, 6, 0.25}, {}},
      {"ceil", kiln::ceil, [](double x) { return std::ceil(x); }, IntRule::KeepOrF32, false, false, true, {-6, 6, 0.25}, {}},
      {"round", kiln::round, [](double x) { return std::nearbyint(x); }, IntRule::KeepOrF32, false, false, true, {-6, 6, 0.5}, {}},
      {"sign", kiln::sign, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, IntRule::Keep, false, false, false, {-2, 2, 0.5}, {}},
      {"reciprocal", kiln::reciprocal, [](double x) { return 1 / x; }, IntRule::ToF32, true, false, true, {-4, 4}, {-100, 100}},
      {"square", kiln::square, [](double x) { return x * x; }, IntRule::Keep, false, false, true, {-4, 4}, {}},
      {"erf", kiln::erf, [](double x) { return std::erf(x); }, IntRule::ToF32, true, false, true, {-4, 4}, {-3, 3}},
      {"log1p", kiln::log1p, [](double x) { return std::log1p(x); }, IntRule::ToF32, true, false, true, {-1.5, 6}, {-2, 50}},
      {"expm1", kiln::expm1, [](double x) { return std::expm1(x); }, IntRule::ToF32, true, false, true, {-6, 6}, {-10, 10}},
      {"gelu_exact", kiln::gelu_exact, geluExact, IntRule::ToF32, true, true, false, {-4, 4}, {-5, 5}},
      {"leaky_relu", [](const Tensor& x) { return kiln::leaky_relu(x, 0.1); }, leakyRelu, IntRule::ToF32, true, true,
       true, {-4, 4}, {-5, 5}},
  };
  return v;
}

/// One random case of `op` on dtype `t`; returns a description for failures.
void checkUnaryOnce(Rng& rng, const UnaryOp& op, DType t) {
  Dims s = randomShape(rng, 0, 4, 5, 0.05);
  Range range;
  if (isFloat(t)) range = op.floatRange;
  else if (isBool(t)) range = defaultRange(t);
  else if (op.intRule == IntRule::ToF32) range = op.intRange;
  else range = defaultRange(t, /*big=*/true);
  if (isFloat(t) && range.quantum > 0 && rng.coin()) range.quantum = 0;  // also fractional values
  Input in = makeInput(rng, s, t, range);
  if (isFloat(t) && op.specials && in.r.numel() > 0 && rng.coin(0.3)) {
    // Specials need their own dense tensor (a view's reference is fixed).
    Ref r = in.r;
    sprinkle(rng, r, 0.1, {kNaN, kInf, -kInf, 0.0});
    in = makeExact(r, t);
  }
  SCOPED_TRACE(std::string(op.name) + " on " + in.how);
  Tensor y = op.fn(in.t);
  DType want = t;
  if (!isFloat(t)) {
    if (op.intRule == IntRule::ToF32) want = DType::f32;
    if (op.intRule == IntRule::KeepOrF32 && y.dtype() == DType::f32) want = DType::f32;
  }
  EXPECT_DTYPE(y, want);
  Ref ref = mapRef(in.r, op.ref);
  if (!isFloat(want)) ref = castRef(ref, want);
  Tol tol = op.composite ? compositeTolFor(want) : tolFor(want);
  EXPECT_TRUE(near(y, ref, tol));
}

TEST(OpsUnary, RandomShapesEveryDType) {
  Rng rng(kSeed + 10);
  for (const UnaryOp& op : ops()) {
    for (DType t : kAllTypes) {
      if (isBool(t) && !op.boolInput) continue;
      for (int it = 0; it < 6; ++it) checkUnaryOnce(rng, op, t);
    }
  }
}

TEST(OpsUnary, NonContiguousEveryLayout) {
  Rng rng(kSeed + 11);
  for (const UnaryOp& op : ops()) {
    for (Layout l : {Layout::Transposed, Layout::Permuted, Layout::Strided, Layout::Broadcast}) {
      DType t = rng.pick(std::vector<DType>{DType::f32, DType::f16, DType::i32, DType::f64});
      if (!isFloat(t) && op.intRule == IntRule::ToF32 && rng.coin()) t = DType::f32;
      Dims s = randomShape(rng, 2, 4, 5);
      Range range = isFloat(t) ? op.floatRange : op.intRule == IntRule::ToF32 ? op.intRange : defaultRange(t);
      Input in = makeInput(rng, s, t, range, l);
      SCOPED_TRACE(std::string(op.name) + " on " + in.how);
      Tensor y = op.fn(in.t);
      DType want = isFloat(t) || op.intRule == IntRule::Keep ? t
                   : op.intRule == IntRule::ToF32 || y.dtype() == DType::f32 ? DType::f32
                                                                             : t;
      EXPECT_DTYPE(y, want);
      Ref ref = mapRef(in.r, op.ref);
      if (!isFloat(want)) ref = castRef(ref, want);
      EXPECT_TRUE(near(y, ref, op.composite ? compositeTolFor(want) : tolFor(want)));
    }
  }
}

/// Every single-op float unary op on a bf16 or f16 operand computes in one
/// pass (OpLibrary::unaryHalf) with the bits of the f32 op on the widened
/// operand, rounded to the type (a NaN as any NaN): specials where the op
/// takes them, contiguous, transposed, broadcast, rank-0, empty and
/// thread-split operands.
TEST(OpsUnary, HalfOperandIsTheF32OpRounded) {
  const auto sameBits = expectSameTensorBits;
  for (DType t : {DType::bf16, DType::f16}) {
    for (const UnaryOp& op : ops()) {
      if (op.composite) continue;  // several ops, each rounding to the type
      const Range r = op.floatRange;
      std::vector<float> xs = kiln::rand({37, 41}, 21, DType::f32, r.lo, r.hi).to_vector<float>();
      if (op.specials) {
        const float specials[] = {kInff, -kInff, kNaNf, -0.0f, 0.0f};
        for (size_t i = 0; i < std::size(specials); ++i) xs[i * 53] = specials[i];
      }
      const Tensor x = kiln::cast(kiln::from_vector(xs, {37, 41}), t);
      const Tensor xt = kiln::permute(kiln::cast(kiln::rand({41, 37}, 22, DType::f32, r.lo, r.hi), t), {1, 0});
      const Tensor row = kiln::broadcast_to(kiln::cast(kiln::rand({41}, 23, DType::f32, r.lo, r.hi), t), {37, 41});
      const Tensor scalar = kiln::cast(kiln::full({}, (r.lo + r.hi) / 2), t);
      const Tensor empty = kiln::cast(kiln::rand({0, 7}, 24, DType::f32, r.lo, r.hi), t);
      const Tensor wide = kiln::cast(kiln::rand({1024, 41}, 25, DType::f32, r.lo, r.hi), t);
      int k = 0;
      for (const Tensor& in : {x, xt, row, scalar, empty, wide}) {
        const Tensor got = op.fn(in);
        if (got.dtype() != t) break;  // not a float op on this type
        const std::string what = std::string(op.name) + (t == DType::bf16 ? " bf16 " : " f16 ") + std::to_string(k++);
        sameBits(got, kiln::cast(op.fn(kiln::cast(in, DType::f32)), t), what);
      }
    }
  }
}

TEST(OpsUnary, SpecialValuesExact) {
  Tensor h = kiln::from_vector(std::vector<double>{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, -3.49, 0.51}, {10});
  EXPECT_TRUE(near(kiln::round(h), Ref({10}, {-2, -2, -0.0, 0, 2, 2, 4, 4, -3, 1}), {}));
  EXPECT_TRUE(near(kiln::round(kiln::cast(h, DType::f32)), Ref({10}, {-2, -2, 0, 0, 2, 2, 4, 4, -3, 1}), {}));
  EXPECT_TRUE(near(kiln::round(kiln::cast(h, DType::f16)), Ref({10}, {-2, -2, 0, 0, 2, 2, 4, 4, -3, 1}), {}));
  EXPECT_TRUE(near(kiln::floor(h), Ref({10}, {-3, -2, -1, 0, 1, 2, 3, 4, -4, 0}), {}));
  EXPECT_TRUE(near(kiln::ceil(h), Ref({10}, {-2, -1, -0.0, 1, 2, 3, 4, 5, -3, 1}), {}));

  Tensor s = kiln::from_vector(std::vector<float>{-kInff, -1, 0, 1, kInff}, {5});
  EXPECT_TRUE(near(kiln::exp(s), Ref({5}, {0, std::exp(-1.0), 1, std::exp(1.0), kInf}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::log(s), Ref({5}, {kNaN, kNaN, -kInf, 0, kInf}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::sqrt(s), Ref({5}, {kNaN, kNaN, 0, 1, kInf}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::reciprocal(s), Ref({5}, {-0.0, -1, kInf, 1, 0}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::tanh(s), Ref({5}, {-1, std::tanh(-1.0), 0, std::tanh(1.0), 1}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::sigmoid(s), Ref({5}, {0, 1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-1.0)), 1}),
                   compositeTolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::relu(s), Ref({5}, {0, 0, 0, 1, kInf}), {}));
  EXPECT_TRUE(near(kiln::sign(s), Ref({5}, {-1, -1, 0, 1, 1}), {}));
  EXPECT_TRUE(near(kiln::abs(s), Ref({5}, {kInf, 1, 0, 1, kInf}), {}));
  // Large and tiny arguments stay finite where the math is.
  Tensor big = kiln::from_vector(std::vector<float>{-100, -30, 30, 100}, {4});
  EXPECT_TRUE(near(kiln::sigmoid(big), Ref({4}, {1 / (1 + std::exp(100.0)), 1 / (1 + std::exp(30.0)), 1, 1}),
                   {1e-5, 1e-30}));
  EXPECT_TRUE(near(kiln::tanh(big), Ref({4}, {-1, -1, 1, 1}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::gelu(big), Ref({4}, {0, 0, 30, 100}), {1e-5, 1e-6}));
}

TEST(OpsUnary, NearZeroAccuracyOfLog1pAndExpm1) {
  // Where log(1 + x) and exp(x) - 1 lose every digit, the dedicated ops keep them.
  for (DType t : {DType::f32, DType::f64}) {
    Tensor x = kiln::cast(kiln::from_vector(std::vector<double>{1e-10, -1e-12, 3e-8}, {3}), t);
    Ref xs({3}, {castTo(1e-10, t), castTo(-1e-12, t), castTo(3e-8, t)});
    EXPECT_TRUE(near(kiln::log1p(x), mapRef(xs, [](double v) { return std::log1p(v); }), tolFor(t)));
    EXPECT_TRUE(near(kiln::expm1(x), mapRef(xs, [](double v) { return std::expm1(v); }), tolFor(t)));
  }
  Tensor s = kiln::from_vector(std::vector<float>{-kInff, -1, 0, kInff}, {4});
  EXPECT_TRUE(near(kiln::log1p(s), Ref({4}, {kNaN, -kInf, 0, kInf}), {}));
  EXPECT_TRUE(near(kiln::expm1(s), Ref({4}, {-1, std::expm1(-1.0), 0, kInf}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::erf(s), Ref({4}, {-1, std::erf(-1.0), 0, 1}), tolFor(DType::f32)));
}

TEST(OpsUnary, IsNanIsInfEveryDType) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(tname(t));
    Ref r({6}, {0, 1, -2, 3, 1, 0});
    if (isFloat(t)) r = Ref({6}, {kNaN, 1, -kInf, kInf, -0.0, kNaN});
    Tensor x = makeTensor(r, t);
    Tensor n = kiln::isnan(x), i = kiln::isinf(x);
    EXPECT_DTYPE(n, DType::boolean);
    EXPECT_DTYPE(i, DType::boolean);
    EXPECT_TRUE(near(n, mapRef(r, [](double v) { return double(std::isnan(v)); }), {}));
    EXPECT_TRUE(near(i, mapRef(r, [](double v) { return double(std::isinf(v)); }), {}));
  }
}

TEST(OpsUnary, LeakyReluSlopeAndErrors) {
  Tensor x = kiln::from_vector(std::vector<float>{-2, -0.5, 0, 3, kNaNf}, {5});
  EXPECT_TRUE(near(kiln::leaky_relu(x), Ref({5}, {-0.02, -0.005, 0, 3, kNaN}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::leaky_relu(x, 0.5), Ref({5}, {-1, -0.25, 0, 3, kNaN}), {}));
  expectKilnError([&] { kiln::leaky_relu(x, kNaN); }, "leaky_relu");
}

TEST(OpsUnary, IntegerWrapAndDTypes) {
  Tensor a = kiln::from_vector(std::vector<int8_t>{-128, -100, -1, 0, 1, 100, 127}, {7});
  EXPECT_DTYPE(kiln::neg(a), DType::i8);
  EXPECT_TRUE(near(kiln::neg(a), Ref({7}, {-128, 100, 1, 0, -1, -100, -127}), {}));
  EXPECT_TRUE(near(kiln::abs(a), Ref({7}, {-128, 100, 1, 0, 1, 100, 127}), {}));
  EXPECT_TRUE(near(kiln::square(a), Ref({7}, {0, 16, 1, 0, 1, 16, 1}), {}));
  EXPECT_TRUE(near(kiln::sign(a), Ref({7}, {-1, -1, -1, 0, 1, 1, 1}), {}));
  EXPECT_TRUE(near(kiln::relu(a), Ref({7}, {0, 0, 0, 0, 1, 100, 127}), {}));
  EXPECT_TRUE(near(-a, Ref({7}, {-128, 100, 1, 0, -1, -100, -127}), {}));
  Tensor u = kiln::from_vector(std::vector<uint8_t>{0, 1, 200, 255}, {4});
  EXPECT_DTYPE(kiln::neg(u), DType::u8);
  EXPECT_TRUE(near(kiln::neg(u), Ref({4}, {0, 255, 56, 1}), {}));
  EXPECT_TRUE(near(kiln::square(u), Ref({4}, {0, 1, 64, 1}), {}));
  Tensor i = kiln::from_vector(std::vector<int32_t>{65536, -70000, 3}, {3});
  EXPECT_DTYPE(kiln::square(i), DType::i32);
  EXPECT_TRUE(near(kiln::square(i), Ref({3}, {0, castTo(4.9e9, DType::i32), 9}), {}));
  Tensor l = kiln::from_vector(std::vector<int64_t>{int64_t{1} << 40, -3}, {2});
  EXPECT_EQ(kiln::neg(l).to_vector<int64_t>(), (std::vector<int64_t>{-(int64_t{1} << 40), 3}));
  // Transcendental ops on integers and bool compute in f32.
  Tensor b = kiln::from_vector(std::vector<bool>{true, false}, {2});
  EXPECT_DTYPE(kiln::exp(b), DType::f32);
  EXPECT_TRUE(near(kiln::exp(b), Ref({2}, {std::exp(1.0), 1}), tolFor(DType::f32)));
  EXPECT_DTYPE(kiln::sqrt(u), DType::f32);
  EXPECT_TRUE(near(kiln::sqrt(u), Ref({4}, {0, 1, std::sqrt(200.0), std::sqrt(255.0)}), tolFor(DType::f32)));
  EXPECT_DTYPE(kiln::reciprocal(i), DType::f32);
  EXPECT_TRUE(near(kiln::reciprocal(i), Ref({3}, {1 / 65536.0, -1 / 70000.0, 1 / 3.0}), tolFor(DType::f32)));
}

TEST(OpsUnary, LogicalNotEveryDType) {
  Rng rng(kSeed + 12);
  for (DType t : kAllTypes) {
    for (int it = 0; it < 5; ++it) {
      Dims s = randomShape(rng, 0, 4, 5, 0.05);
      Range r = isFloat(t) ? Range{-2, 2, 1} : defaultRange(t);  // many zeros
      if (isInt(t)) r = {-2, 2};
      if (t == DType::u8) r = {0, 3};
      Input in = makeInput(rng, s, t, r);
      SCOPED_TRACE(in.how);
      Tensor y = kiln::logical_not(in.t);
      EXPECT_DTYPE(y, DType::boolean);
      EXPECT_TRUE(near(y, mapRef(in.r, [](double x) { return x == 0 ? 1.0 : 0.0; }), {}));
    }
  }
  Tensor n = kiln::from_vector(std::vector<float>{kNaNf, 0.0f, -0.0f}, {3});
  EXPECT_TRUE(near(kiln::logical_not(n), Ref({3}, {0, 1, 1}), {}));
}

TEST(OpsUnary, ChainsOnViewsOfPendingValues) {
  Rng rng(kSeed + 13);
  for (int it = 0; it < 20; ++it) {
    Dims s = randomShape(rng, 2, 4, 5);
    DType t = rng.pick(kFloatTypes);
    Input in = makeInput(rng, s, t, {-2, 2});
    SCOPED_TRACE(in.how);
    Tensor p = kiln::tanh(in.t);                  // pending
    Tensor v = kiln::transpose(p, 0, -1);         // view of a pending value
    Tensor w = kiln::slice(v, 0, 1, 100, 2);      // and a strided view of that
    Tensor y = kiln::square(kiln::sin(w));
    Ref r = sliceRef(transposeRef(mapRef(in.r, [](double x) { return std::tanh(x); }), 0, -1), 0, 1, 100, 2);
    Ref ref = mapRef(r, [](double x) { return std::sin(x) * std::sin(x); });
    EXPECT_TRUE(near(y, ref, compositeTolFor(t)));
    EXPECT_TRUE(near(p, mapRef(in.r, [](double x) { return std::tanh(x); }), tolFor(t)));
  }
}

TEST(OpsUnary, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 200 + tid);
    for (int it = 0; it < 25; ++it) {
      const UnaryOp& op = rng.pick(ops());
      DType t = rng.pick(kNumericTypes);
      checkUnaryOnce(rng, op, t);
    }
  });
}

TEST(OpsUnary, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor x = kiln::from_vector(std::vector<float>{1, 4, 9}, {3});
  Tensor pending = kiln::sqrt(x);
  for (const UnaryOp& op : ops()) {
    expectKilnError([&] { return op.fn(Tensor()); }, op.name);
  }
  expectKilnError([] { return kiln::logical_not(Tensor()); }, "logical_not");
  EXPECT_TRUE(near(pending, Ref({3}, {1, 2, 3}), tolFor(DType::f32)));
  EXPECT_TRUE(near(kiln::exp(x), Ref({3}, {std::exp(1.0), std::exp(4.0), std::exp(9.0)}), tolFor(DType::f32)));
}

}  // namespace
}  // namespace kt
