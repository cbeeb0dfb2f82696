// Elementwise binary ops, comparisons, logical ops, where, clamp and cast:
// broadcasting, type promotion (tensors, rank-0 tensors, C++ scalars),
// integer wrapping, NaN propagation, non-contiguous inputs.
#include <bit>
#include <variant>

#include "test/unit/ops/op_test_util.h"

namespace kt {
namespace {

enum class Kind { Arith, Div, Pow, MinMax, Compare, Logical };

struct BinaryOp {
  const char* name;
  Tensor (*fn)(const kiln::Operand&, const kiln::Operand&);
  double (*ref)(double, double);
  Kind kind;
};

double nanMax(double x, double y) { return std::isnan(x) || std::isnan(y) ? kNaN : std::max(x, y); }
double nanMin(double x, double y) { return std::isnan(x) || std::isnan(y) ? kNaN : std::min(x, y); }

const std::vector<BinaryOp>& ops() {
  static const std::vector<BinaryOp> v = {
      {"add", kiln::add, [](double x, double y) { return x + y; }, Kind::Arith},
      {"sub", kiln::sub, [](double x, double y) { return x - y; }, Kind::Arith},
      {"mul", kiln::mul, [](double x, double y) { return x * y; }, Kind::Arith},
      {"div", kiln::div, [](double x, double y) { return x / y; }, Kind::Div},
      {"pow", kiln::pow, [](double x, double y) { return std::pow(x, y); }, Kind::Pow},
      {"maximum", kiln::maximum, nanMax, Kind::MinMax},
      {"minimum", kiln::minimum, nanMin, Kind::MinMax},
      {"eq", kiln::eq, [](double x, double y) { return double(x == y); }, Kind::Compare},
      {"ne", kiln::ne, [](double x, double y) { return double(x != y); }, Kind::Compare},
      {"lt", kiln::lt, [](double x, double y) { return double(x < y); }, Kind::Compare},
      {"le", kiln::le, [](double x, double y) { return double(x <= y); }, Kind::Compare},
      {"gt", kiln::gt, [](double x, double y) { return double(x > y); }, Kind::Compare},
      {"ge", kiln::ge, [](double x, double y) { return double(x >= y); }, Kind::Compare},
      {"logical_and", kiln::logical_and, [](double x, double y) { return double(x != 0 && y != 0); }, Kind::Logical},
      {"logical_or", kiln::logical_or, [](double x, double y) { return double(x != 0 || y != 0); }, Kind::Logical},
  };
  return v;
}

/// One operand: a tensor (rank >= 1 or rank 0) or a C++ scalar.
struct Side {
  enum { Tensor1, Rank0, Scalar } kind = Tensor1;
  DType dt = DType::f32;  ///< tensor dtype, or the scalar's category default
  std::variant<bool, int64_t, double> scalar;
  Dims shape;
  Input in;  ///< tensors
  Ref ref() const {
    if (kind != Scalar) return in.r;
    return Ref(Dims{}, std::vector<double>{std::visit([](auto v) { return static_cast<double>(v); }, scalar)});
  }
  kiln::Operand operand() const {
    if (kind != Scalar) return kiln::Operand(in.t);
    return std::visit([](auto v) { return kiln::Operand(v); }, scalar);
  }
  Opd opd() const { return kind == Scalar ? Opd{dt, 0} : Opd{dt, kind == Rank0 ? 1 : 2}; }
  std::string describe() const {
    if (kind != Scalar) return (kind == Rank0 ? "rank-0 " : "") + in.how;
    std::ostringstream o;
    std::visit([&](auto v) { o << "scalar " << +v << (std::is_same_v<decltype(v), double> ? " (floating)" : ""); },
               scalar);
    return o.str();
  }
};

DType outType(Kind k, DType ct) {
  switch (k) {
    case Kind::Div: return isFloat(ct) ? ct : DType::f32;
    case Kind::Compare:
    case Kind::Logical: return DType::boolean;
    default: return ct;
  }
}

/// The type the op computes in (operands are converted to it first).
DType computeType(Kind k, DType ct) { return k == Kind::Div ? outType(k, ct) : ct; }

/// Picks a value range for a tensor side of op kind `k` with promoted type ct.
Range tensorRange(const Side& s, const Side& other, Kind k, DType ct, bool coarse, bool base) {
  DType t = s.dt;
  if (isBool(t)) return defaultRange(t);
  if (k == Kind::Pow) {
    if (isFloat(t)) return base ? Range{0.25, 3} : Range{-2, 2};
    if (base) return t == DType::u8 ? Range{0, 4} : Range{-4, 4};
    return {0, 3};
  }
  if (coarse) return isFloat(t) ? Range{-2, 2, 0.5} : t == DType::u8 ? Range{0, 3} : Range{-3, 3};
  bool lower = s.opd().prio < other.opd().prio;
  if (isFloat(t)) return lower ? Range{-4, 4, 1.0 / 64} : defaultRange(t);
  if (category(t) != category(ct)) return smallRange(t);  // converted to a float type
  if (lower && k != Kind::Arith) {
    // Stay inside ct's range: only wrapping arithmetic is unambiguous.
    Range r = smallRange(ct);
    return {std::max(r.lo, smallRange(t).lo), std::min(r.hi, smallRange(t).hi)};
  }
  return defaultRange(t, k == Kind::Arith || k == Kind::Div);
}

/// A random case of `op`; false if this combination is not tested (bool
/// arithmetic).
bool checkBinaryOnce(Rng& rng, const BinaryOp& op) {
  Side a, b;
  auto pickKind = [&](Side& s) {
    double u = rng.uniform(0, 1);
    s.kind = u < 0.6 ? Side::Tensor1 : u < 0.8 ? Side::Rank0 : Side::Scalar;
  };
  pickKind(a);
  pickKind(b);
  if (a.kind == Side::Scalar && b.kind == Side::Scalar) b.kind = Side::Tensor1;
  auto [sa, sb] = randomBroadcastPair(rng);
  a.shape = a.kind == Side::Tensor1 ? (sa.empty() ? Dims{1} : sa) : Dims{};
  b.shape = b.kind == Side::Tensor1 ? (sb.empty() ? Dims{1} : sb) : Dims{};
  int scalarCat[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    Side& s = i == 0 ? a : b;
    if (s.kind == Side::Scalar) {
      scalarCat[i] = static_cast<int>(rng.randint(0, 5));  // 0 bool, 1-2 int, 3-5 floating
      s.dt = scalarCat[i] == 0 ? DType::boolean : scalarCat[i] <= 2 ? DType::i64 : DType::f32;
    } else {
      s.dt = rng.pick(kAllTypes);
    }
  }
  DType ct = resultType(a.opd(), b.opd());
  if ((op.kind == Kind::Arith || op.kind == Kind::Pow || op.kind == Kind::MinMax) && isBool(ct)) return false;
  if (op.kind == Kind::Pow && (isBool(a.dt) || isBool(b.dt))) return false;
  bool coarse = (op.kind == Kind::Compare || op.kind == Kind::MinMax || op.kind == Kind::Logical) && rng.coin();
  for (int i = 0; i < 2; ++i) {
    Side& s = i == 0 ? a : b;
    const Side& o = i == 0 ? b : a;
    bool base = i == 0;
    if (s.kind == Side::Scalar) {
      if (isBool(s.dt)) {
        s.scalar = rng.coin();
      } else if (isInt(s.dt)) {
        std::vector<int64_t> vals = {3, -7, 100, 2};
        if (op.kind == Kind::Arith) vals = {3, -7, 300, 100, -1000};
        if (op.kind == Kind::Pow) vals = base ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{0, 1, 2, 3};
        if (op.kind == Kind::Div) vals = {3, -7, 2, 100};
        if (op.kind != Kind::Arith && op.kind != Kind::Pow && ct == DType::u8) vals = {0, 3, 100};
        s.scalar = rng.pick(vals);
      } else {
        std::vector<double> vals = {2.5, -0.75, 1.5, 0.5, -3.0, 0.25};
        if (op.kind == Kind::Pow) vals = base ? std::vector<double>{1.5, 0.5, 2.25} : std::vector<double>{0.5, -1.5, 2.0};
        s.scalar = rng.pick(vals);
      }
    } else {
      Range r = tensorRange(s, o, op.kind, ct, coarse, base);
      s.in = makeInput(rng, s.shape, s.dt, r);
      if (isFloat(s.dt) && (op.kind == Kind::MinMax || op.kind == Kind::Compare) && s.in.r.numel() > 0 &&
          rng.coin(0.25)) {
        Ref withNaN = s.in.r;
        sprinkle(rng, withNaN, 0.2, {kNaN, kInf, -kInf});
        s.in = makeExact(withNaN, s.dt);
      }
    }
  }
  DType out = outType(op.kind, ct), cty = computeType(op.kind, ct);
  SCOPED_TRACE(std::string(op.name) + "(" + a.describe() + ", " + b.describe() + ") ct " + tname(ct));
  Tensor y = op.fn(a.operand(), b.operand());
  EXPECT_DTYPE(y, out);
  Ref ref = zipRef(a.ref(), b.ref(), [&](double x, double z) {
    if (op.kind == Kind::Logical) return op.ref(x, z);
    double v = op.ref(castTo(x, cty), castTo(z, cty));
    return isFloat(out) ? v : castTo(v, out);
  });
  EXPECT_TRUE(near(y, ref, tolFor(out)));
  return true;
}

TEST(OpsBinary, RandomOperandsPromotionAndBroadcasting) {
  Rng rng(kSeed + 20);
  for (const BinaryOp& op : ops()) {
    int done = 0;
    for (int it = 0; it < 400 && done < 60; ++it) done += checkBinaryOnce(rng, op);
    EXPECT_GE(done, 60) << op.name;
  }
}

TEST(OpsBinary, EveryDTypePairTensorTensor) {
  Rng rng(kSeed + 21);
  for (const BinaryOp& op : ops()) {
    for (DType ta : kAllTypes) {
      for (DType tb : kAllTypes) {
        DType ct = refPromote(ta, tb);
        if ((op.kind == Kind::Arith || op.kind == Kind::Pow || op.kind == Kind::MinMax) && isBool(ct)) continue;
        if (op.kind == Kind::Pow && (isBool(ta) || isBool(tb))) continue;
        Side a, b;
        a.dt = ta;
        b.dt = tb;
        auto [sa, sb] = randomBroadcastPair(rng, 3, 0.0);
        a.shape = sa.empty() ? Dims{1} : sa;
        b.shape = sb;
        if (b.shape.empty()) b.kind = Side::Rank0;
        ct = resultType(a.opd(), b.opd());
        if ((op.kind == Kind::Arith || op.kind == Kind::Pow || op.kind == Kind::MinMax) && isBool(ct)) continue;
        a.in = makeInput(rng, a.shape, ta, tensorRange(a, b, op.kind, ct, false, true));
        b.in = makeInput(rng, b.shape, tb, tensorRange(b, a, op.kind, ct, false, false));
        DType out = outType(op.kind, ct), cty = computeType(op.kind, ct);
        SCOPED_TRACE(std::string(op.name) + "(" + a.describe() + ", " + b.describe() + ")");
        Tensor y = op.fn(a.in.t, b.in.t);
        EXPECT_DTYPE(y, out);
        Ref ref = zipRef(a.in.r, b.in.r, [&](double x, double z) {
          if (op.kind == Kind::Logical) return op.ref(x, z);
          double v = op.ref(castTo(x, cty), castTo(z, cty));
          return isFloat(out) ? v : castTo(v, out);
        });
        EXPECT_TRUE(near(y, ref, tolFor(out)));
      }
    }
  }
}

Tensor i32t(std::vector<int32_t> v) { return kiln::from_vector(v, {static_cast<int64_t>(v.size())}); }

TEST(OpsBinary, DocumentedPromotionExamples) {
  Tensor i32 = i32t({1, -2, 7});
  Tensor f16 = kiln::cast(kiln::from_vector(std::vector<float>{1, -2, 0.5}, {3}), DType::f16);
  Tensor i8 = kiln::from_vector(std::vector<int8_t>{1, -2, 100}, {3});
  Tensor u8 = kiln::from_vector(std::vector<uint8_t>{1, 200, 255}, {3});
  Tensor i64 = kiln::from_vector(std::vector<int64_t>{5, 6, 7}, {3});
  Tensor b = kiln::from_vector(std::vector<bool>{true, false, true}, {3});

  Tensor r = i32 * 2.5;  // i32 tensor * floating scalar -> f32
  EXPECT_DTYPE(r, DType::f32);
  EXPECT_TRUE(near(r, Ref({3}, {2.5, -5, 17.5}), tolFor(DType::f32)));
  r = f16 * 2.5;  // stays f16
  EXPECT_DTYPE(r, DType::f16);
  EXPECT_TRUE(near(r, Ref({3}, {2.5, -5, 1.25}), tolFor(DType::f16)));
  r = i8 + 300;  // i8, wrapping
  EXPECT_DTYPE(r, DType::i8);
  EXPECT_TRUE(near(r, Ref({3}, {castTo(301, DType::i8), castTo(298, DType::i8), castTo(400, DType::i8)}), {}));
  r = u8 + i8;  // -> i32
  EXPECT_DTYPE(r, DType::i32);
  EXPECT_TRUE(near(r, Ref({3}, {2, 198, 355}), {}));
  r = u8 + i64;  // -> i64
  EXPECT_DTYPE(r, DType::i64);
  EXPECT_TRUE(near(r, Ref({3}, {6, 206, 262}), {}));
  r = i32 / i32t({2, 4, 7});  // int / int -> f32 true division
  EXPECT_DTYPE(r, DType::f32);
  EXPECT_TRUE(near(r, Ref({3}, {0.5, -0.5, 1}), tolFor(DType::f32)));
  r = i32 / 2;
  EXPECT_DTYPE(r, DType::f32);
  EXPECT_TRUE(near(r, Ref({3}, {0.5, -1, 3.5}), tolFor(DType::f32)));
  r = i32 < 2;
  EXPECT_DTYPE(r, DType::boolean);
  EXPECT_TRUE(near(r, Ref({3}, {1, 1, 0}), {}));
  r = b + 3;  // bool tensor with an integer scalar -> i64
  EXPECT_DTYPE(r, DType::i64);
  EXPECT_TRUE(near(r, Ref({3}, {4, 3, 4}), {}));
  r = b * 1.5;  // -> f32
  EXPECT_DTYPE(r, DType::f32);
  EXPECT_TRUE(near(r, Ref({3}, {1.5, 0, 1.5}), {}));
  r = i8 * true;  // bool scalar does not widen an integer tensor
  EXPECT_DTYPE(r, DType::i8);
  EXPECT_TRUE(near(r, Ref({3}, {1, -2, 100}), {}));

  // Rank-0 tensors: lower priority than rank >= 1, but their dtype counts
  // when their category is higher.
  Tensor f64s = kiln::scalar_tensor(2.5, DType::f64);
  Tensor i64s = kiln::scalar_tensor(int64_t{1000}, DType::i64);
  Tensor f32s = kiln::scalar_tensor(0.5, DType::f32);
  r = i32 * f64s;
  EXPECT_DTYPE(r, DType::f64);
  EXPECT_TRUE(near(r, Ref({3}, {2.5, -5, 17.5}), tolFor(DType::f64)));
  r = i8 + i64s;  // same category: the tensor's dtype, wrapping
  EXPECT_DTYPE(r, DType::i8);
  EXPECT_TRUE(near(r, Ref({3}, {castTo(1001, DType::i8), castTo(998, DType::i8), castTo(1100, DType::i8)}), {}));
  r = f16 + f32s;
  EXPECT_DTYPE(r, DType::f16);
  EXPECT_TRUE(near(r, Ref({3}, {1.5, -1.5, 1}), tolFor(DType::f16)));
  r = f32s * i64s;  // two rank-0 tensors: ordinary promotion
  EXPECT_DTYPE(r, DType::f32);
  EXPECT_EQ(r.rank(), 0);
  EXPECT_EQ(r.item<double>(), 500);
  r = kiln::scalar_tensor(int64_t{3}, DType::i32) * 2.5;  // rank-0 i32 with a floating scalar
  EXPECT_DTYPE(r, DType::f32);
  EXPECT_EQ(r.item<double>(), 7.5);
  r = kiln::scalar_tensor(int64_t{3}, DType::i32) * int64_t{5};
  EXPECT_DTYPE(r, DType::i32);
  EXPECT_EQ(r.item<double>(), 15);
  r = b + kiln::scalar_tensor(int64_t{7}, DType::i8);
  EXPECT_DTYPE(r, DType::i8);
  EXPECT_TRUE(near(r, Ref({3}, {8, 7, 8}), {}));
  r = f16 + kiln::cast(kiln::from_vector(std::vector<float>{1, 2, 3}, {3}), DType::bf16);
  EXPECT_DTYPE(r, DType::f32);
  EXPECT_TRUE(near(r, Ref({3}, {2, 0, 3.5}), tolFor(DType::f32)));
}

TEST(OpsBinary, IntegerWrapping) {
  Tensor a = kiln::from_vector(std::vector<int32_t>{2147483647, -2147483647 - 1, 65536, 46341}, {4});
  Tensor r = a + 1;
  EXPECT_DTYPE(r, DType::i32);
  EXPECT_TRUE(near(r, Ref({4}, {-2147483648.0, -2147483647.0, 65537, 46342}), {}));
  r = a * a;
  EXPECT_TRUE(near(r, Ref({4}, {1, 0, 0, castTo(46341.0 * 46341.0, DType::i32)}), {}));
  Tensor u = kiln::from_vector(std::vector<uint8_t>{0, 10, 255}, {3});
  EXPECT_TRUE(near(u - 11, Ref({3}, {245, 255, 244}), {}));
  EXPECT_TRUE(near(u * u, Ref({3}, {0, 100, 1}), {}));
  Tensor i8 = kiln::from_vector(std::vector<int8_t>{-128, 127, 64}, {3});
  EXPECT_TRUE(near(i8 * int64_t{2}, Ref({3}, {0, -2, -128}), {}));
  EXPECT_TRUE(near(0 - i8, Ref({3}, {-128, -127, -64}), {}));
  Tensor l = kiln::from_vector(std::vector<int64_t>{INT64_MAX, INT64_MIN}, {2});
  EXPECT_EQ((l + 1).to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN, INT64_MIN + 1}));
}

TEST(OpsBinary, NaNPropagationAndDivisionByZero) {
  Tensor x = kiln::from_vector(std::vector<float>{kNaNf, 1, kNaNf, -kInff, 0}, {5});
  Tensor y = kiln::from_vector(std::vector<float>{2, kNaNf, kNaNf, 5, -0.0f}, {5});
  EXPECT_TRUE(near(kiln::maximum(x, y), Ref({5}, {kNaN, kNaN, kNaN, 5, 0}), {}));
  EXPECT_TRUE(near(kiln::minimum(x, y), Ref({5}, {kNaN, kNaN, kNaN, -kInf, 0}), {}));
  EXPECT_TRUE(near(kiln::maximum(y, x), Ref({5}, {kNaN, kNaN, kNaN, 5, 0}), {}));
  EXPECT_TRUE(near(kiln::maximum(x, 0.5), Ref({5}, {kNaN, 1, kNaN, 0.5, 0.5}), {}));
  EXPECT_TRUE(near(kiln::eq(x, x), Ref({5}, {0, 1, 0, 1, 1}), {}));
  EXPECT_TRUE(near(kiln::ne(x, y), Ref({5}, {1, 1, 1, 1, 0}), {}));
  EXPECT_TRUE(near(kiln::lt(x, y), Ref({5}, {0, 0, 0, 1, 0}), {}));
  Tensor one = kiln::from_vector(std::vector<float>{1, -1, 0}, {3});
  EXPECT_TRUE(near(one / 0.0, Ref({3}, {kInf, -kInf, kNaN}), {}));
  Tensor ione = i32t({1, -1, 0});
  EXPECT_TRUE(near(ione / 0, Ref({3}, {kInf, -kInf, kNaN}), {}));
}

/// Add, sub, mul and div of two bf16 or f16 operands compute in one pass
/// (OpLibrary::binaryHalf) with the bits of the f32 op on the widened
/// operands, rounded to the type: infinities, -0, overflow, division by
/// zero and NaN (as any NaN) included, on contiguous, broadcast (a row, a
/// rank-0 tensor), transposed and empty operands.
TEST(OpsBinary, HalfArithmeticIsTheF32OpRounded) {
  const auto sameBits = expectSameTensorBits;
  for (DType t : {DType::bf16, DType::f16}) {
    std::vector<float> xs = kiln::randn({37, 41}, 5).to_vector<float>();
    const float big = t == DType::f16 ? 60000.0f : 3e38f;
    const float specials[] = {kInff, -kInff, kNaNf, -0.0f, 0.0f, big, -big, 1e-3f};
    for (size_t i = 0; i < std::size(specials); ++i) xs[i * 53] = specials[i];
    const Tensor x = kiln::cast(kiln::from_vector(xs, {37, 41}), t);
    std::vector<float> ys = kiln::randn({37, 41}, 6).to_vector<float>();
    for (size_t i = 0; i < std::size(specials); ++i) ys[i * 53 + 1] = specials[i];
    ys[0] = 0.0f, ys[53] = -0.0f, ys[5 * 53] = 4.0f;  // inf / 0, -inf / -0, big * 4
    const Tensor y = kiln::cast(kiln::from_vector(ys, {37, 41}), t);
    const Tensor row = kiln::cast(kiln::randn({41}, 7), t), scalar = kiln::cast(kiln::full({}, 0.3), t);
    const Tensor xt = kiln::permute(kiln::cast(kiln::randn({41, 37}, 8), t), {1, 0});  // strided
    const Tensor empty = kiln::cast(kiln::randn({0, 41}, 9), t);
    // Large enough to split over threads.
    const Tensor wide = kiln::cast(kiln::randn({1024, 41}, 10), t), wideRow = kiln::cast(kiln::randn({41}, 11), t);
    auto f32 = [](const Tensor& v) { return kiln::cast(v, DType::f32); };
    const std::vector<std::pair<Tensor, Tensor>> pairs = {{x, y}, {x, row}, {row, x}, {x, scalar}, {scalar, scalar},
                                                          {xt, y}, {empty, row}, {wide, wideRow}};
    for (size_t p = 0; p < pairs.size(); ++p) {
      const auto& [a, b] = pairs[p];
      const std::string what = std::string(t == DType::bf16 ? "bf16" : "f16") + " pair " + std::to_string(p);
      sameBits(a + b, kiln::cast(f32(a) + f32(b), t), what + " +");
      sameBits(a - b, kiln::cast(f32(a) - f32(b), t), what + " -");
      sameBits(a * b, kiln::cast(f32(a) * f32(b), t), what + " *");
      sameBits(a / b, kiln::cast(f32(a) / f32(b), t), what + " /");
    }
  }
}

/// fmod (truncated) and remainder (floored) of doubles, with the integer
/// rule x % 0 = 0.
double refFmod(double a, double b, bool integer) {
  if (integer && b == 0) return 0;
  return std::fmod(a, b);
}
double refRemainder(double a, double b, bool integer) {
  double r = refFmod(a, b, integer);
  if (r != 0 && (r < 0) != (b < 0)) r += b;  // NaN stays NaN
  return r;
}

TEST(OpsBinary, FmodRemainderEveryDType) {
  Rng rng(kSeed + 40);
  for (DType t : kNumericTypes) {
    for (int it = 0; it < 6; ++it) {
      auto [sa, sb] = randomBroadcastPair(rng);
      Range range = isFloat(t) ? Range{-6, 6, it % 2 ? 0.25 : 0.0} : t == DType::u8 ? Range{0, 20} : Range{-20, 20};
      Ref ra = randomRef(rng, sa, t, range), rb = randomRef(rng, sb, t, range);
      if (isFloat(t)) sprinkle(rng, rb, 0.1, {0.0, kInf, -kInf, kNaN});
      if (!isFloat(t)) sprinkle(rng, rb, 0.15, {0.0});
      Tensor a = makeTensor(ra, t), b = makeTensor(rb, t);
      const bool integer = !isFloat(t);
      SCOPED_TRACE(tname(t) + " " + str(sa) + " % " + str(sb));
      Tensor f = kiln::fmod(a, b), r = kiln::remainder(a, b);
      EXPECT_DTYPE(f, t);
      EXPECT_DTYPE(r, t);
      Ref wantF = zipRef(castRef(ra, t), castRef(rb, t), [&](double x, double y) { return refFmod(x, y, integer); });
      Ref wantR =
          zipRef(castRef(ra, t), castRef(rb, t), [&](double x, double y) { return refRemainder(x, y, integer); });
      EXPECT_TRUE(near(f, castRef(wantF, t), {}));
      EXPECT_TRUE(near(r, castRef(wantR, t), tolFor(t)));
    }
  }
}

TEST(OpsBinary, FmodRemainderSigns) {
  // PyTorch: fmod takes the dividend's sign, remainder the divisor's.
  Tensor a = kiln::from_vector(std::vector<float>{5.5f, -5.5f, 5.5f, -5.5f, 6, -0.0f}, {6});
  Tensor b = kiln::from_vector(std::vector<float>{2, 2, -2, -2, 3, 2}, {6});
  EXPECT_TRUE(near(kiln::fmod(a, b), Ref({6}, {1.5, -1.5, 1.5, -1.5, 0, -0.0}), {}));
  EXPECT_TRUE(near(kiln::remainder(a, b), Ref({6}, {1.5, 0.5, -0.5, -1.5, 0, -0.0}), {}));
  Tensor i = kiln::from_vector(std::vector<int8_t>{7, -7, 7, -7, -128, 5}, {6});
  Tensor j = kiln::from_vector(std::vector<int8_t>{3, 3, -3, -3, -1, 0}, {6});
  EXPECT_TRUE(near(kiln::fmod(i, j), Ref({6}, {1, -1, 1, -1, 0, 0}), {}));
  EXPECT_TRUE(near(kiln::remainder(i, j), Ref({6}, {1, 2, -2, -1, 0, 0}), {}));
  // Scalars promote like the other binary ops: i32 % 2.5 computes in f32.
  Tensor k = kiln::from_vector(std::vector<int32_t>{7, -7}, {2});
  EXPECT_DTYPE(kiln::remainder(k, 2.5), DType::f32);
  EXPECT_TRUE(near(kiln::remainder(k, 2.5), Ref({2}, {2, 0.5}), {}));
  expectKilnError([] { return kiln::fmod(kiln::from_vector(std::vector<bool>{true}, {1}), true); }, "fmod");
}

TEST(OpsBinary, OperatorsAndScalarFirst) {
  Rng rng(kSeed + 22);
  for (int it = 0; it < 20; ++it) {
    auto [sa, sb] = randomBroadcastPair(rng);
    DType t = rng.pick(std::vector<DType>{DType::f32, DType::f64, DType::f16, DType::i32, DType::i64});
    Range r = isFloat(t) ? Range{0.5, 4} : Range{1, 50};
    Input a = makeInput(rng, sa, t, r), b = makeInput(rng, sb, t, r);
    SCOPED_TRACE(a.how + " op " + b.how);
    Tol tol = tolFor(t), tf = tolFor(isFloat(t) ? t : DType::f32);
    auto wrap = [&](double v) { return castTo(v, t); };
    EXPECT_TRUE(near(a.t + b.t, zipRef(a.r, b.r, [&](double x, double y) { return wrap(x + y); }), tol));
    EXPECT_TRUE(near(a.t - b.t, zipRef(a.r, b.r, [&](double x, double y) { return wrap(x - y); }), tol));
    EXPECT_TRUE(near(a.t * b.t, zipRef(a.r, b.r, [&](double x, double y) { return wrap(x * y); }), tol));
    EXPECT_TRUE(near(a.t / b.t, zipRef(a.r, b.r, [](double x, double y) { return x / y; }), tf));
    EXPECT_TRUE(near(a.t == kiln::Operand(b.t), zipRef(a.r, b.r, [](double x, double y) { return double(x == y); }), {}));
    EXPECT_TRUE(near(a.t != kiln::Operand(b.t), zipRef(a.r, b.r, [](double x, double y) { return double(x != y); }), {}));
    EXPECT_TRUE(near(a.t < b.t, zipRef(a.r, b.r, [](double x, double y) { return double(x < y); }), {}));
    EXPECT_TRUE(near(a.t <= b.t, zipRef(a.r, b.r, [](double x, double y) { return double(x <= y); }), {}));
    EXPECT_TRUE(near(a.t > b.t, zipRef(a.r, b.r, [](double x, double y) { return double(x > y); }), {}));
    EXPECT_TRUE(near(a.t >= b.t, zipRef(a.r, b.r, [](double x, double y) { return double(x >= y); }), {}));
    EXPECT_TRUE(near(-a.t, mapRef(a.r, [&](double x) { return wrap(-x); }), tol));
    EXPECT_TRUE(near(3 + a.t, mapRef(a.r, [&](double x) { return wrap(3 + x); }), tol));
    EXPECT_TRUE(near(3 - a.t, mapRef(a.r, [&](double x) { return wrap(3 - x); }), tol));
    EXPECT_TRUE(near(3 * a.t, mapRef(a.r, [&](double x) { return wrap(3 * x); }), tol));
    EXPECT_TRUE(near(3 / a.t, mapRef(a.r, [](double x) { return 3 / x; }), tf));
    EXPECT_DTYPE(3 / a.t, isFloat(t) ? t : DType::f32);
    EXPECT_TRUE(near(a.t - 2.5, mapRef(a.r, [](double x) { return x - 2.5; }), tf));
    EXPECT_TRUE(near(1.5 * a.t, mapRef(a.r, [](double x) { return 1.5 * x; }), tf));
  }
}

TEST(OpsBinary, LogicalWithFloatingScalar) {
  // A floating scalar is true when it is != 0 (0.5 must not truncate to 0).
  Tensor x = kiln::from_vector(std::vector<float>{1, 0, -2}, {3});
  EXPECT_TRUE(near(kiln::logical_and(x, 0.5), Ref({3}, {1, 0, 1}), {}));
  EXPECT_TRUE(near(kiln::logical_or(kiln::zeros({2}), 0.25), Ref({2}, {1, 1}), {}));
  EXPECT_TRUE(near(kiln::logical_and(x, 0.0), Ref({3}, {0, 0, 0}), {}));
  EXPECT_TRUE(near(kiln::logical_or(x, false), Ref({3}, {1, 0, 1}), {}));
}

TEST(OpsBinary, IntegerWithHalfPrecisionTensor) {
  Tensor i = kiln::from_vector(std::vector<int32_t>{1, 2, -3}, {3});
  Tensor h = kiln::cast(kiln::from_vector(std::vector<float>{0.5f, 0.5f, 0.5f}, {3}), DType::f16);
  Tensor y = i + h;
  EXPECT_DTYPE(y, DType::f16);
  EXPECT_TRUE(near(y, Ref({3}, {1.5, 2.5, -2.5}), tolFor(DType::f16)));
  Tensor b = kiln::cast(kiln::from_vector(std::vector<float>{0.5f, 0.5f, 0.5f}, {3}), DType::bf16);
  EXPECT_TRUE(near(kiln::from_vector(std::vector<uint8_t>{1, 2, 3}, {3}) * b, Ref({3}, {0.5, 1, 1.5}),
                   tolFor(DType::bf16)));
}

TEST(OpsBinary, CompoundAssignmentRebinds) {
  Tensor a = kiln::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor alias = a;
  Tensor b = kiln::from_vector(std::vector<float>{10, 20, 30}, {3});
  a += b;
  EXPECT_TRUE(near(a, Ref({3}, {11, 22, 33}), tolFor(DType::f32)));
  a *= b;
  EXPECT_TRUE(near(a, Ref({3}, {110, 440, 990}), tolFor(DType::f32)));
  a -= alias;
  a /= b;
  EXPECT_TRUE(near(a, Ref({3}, {10.9, 21.9, 32.9}), tolFor(DType::f32)));
  EXPECT_TRUE(near(alias, Ref({3}, {1, 2, 3}), {}));  // unchanged
  Tensor i = i32t({5, 6});
  Tensor ialias = i;
  i += i32t({1, 1});
  EXPECT_DTYPE(i, DType::i32);
  EXPECT_TRUE(near(i, Ref({2}, {6, 7}), {}));
  EXPECT_TRUE(near(ialias, Ref({2}, {5, 6}), {}));
}

// ---- where / clamp -------------------------------------------------------------

TEST(OpsWhere, RandomBroadcastAndPromotion) {
  Rng rng(kSeed + 23);
  for (int it = 0; it < 150; ++it) {
    Dims out = randomShape(rng, 0, 4, 4, 0.05);
    auto derive = [&]() {
      size_t r = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(out.size())));
      Dims s(out.end() - r, out.end());
      for (auto& d : s)
        if (rng.coin(0.3)) d = 1;
      return s;
    };
    DType tc = rng.pick(kAllTypes);
    Input cond = makeInput(rng, derive(), tc, isFloat(tc) ? Range{-1, 1, 1} : isBool(tc) ? Range{0, 1} : Range{0, 2});
    Side a, b;
    for (Side* s : {&a, &b}) {
      double u = rng.uniform(0, 1);
      s->kind = u < 0.6 ? Side::Tensor1 : u < 0.8 ? Side::Rank0 : Side::Scalar;
      if (s->kind == Side::Scalar) {
        int c = static_cast<int>(rng.randint(0, 2));
        s->dt = c == 0 ? DType::boolean : c == 1 ? DType::i64 : DType::f32;
        if (c == 0) s->scalar = rng.coin();
        else if (c == 1) s->scalar = int64_t{rng.randint(0, 100)};
        else s->scalar = rng.pick(std::vector<double>{-1.5, 2.25, 0.5});
      } else {
        s->dt = rng.pick(kAllTypes);
        s->shape = s->kind == Side::Rank0 ? Dims{} : derive();
        if (s->kind == Side::Tensor1 && s->shape.empty()) s->shape = {1};
      }
    }
    if (a.kind == Side::Scalar && b.kind == Side::Scalar) {
      b.kind = Side::Tensor1;  // both scalars: see TwoScalarBranches
      b.dt = rng.pick(kAllTypes);
      b.shape = derive();
      if (b.shape.empty()) b.shape = {1};
    }
    DType ct = resultType(a.opd(), b.opd());
    for (Side* s : {&a, &b}) {
      if (s->kind == Side::Scalar) continue;
      Range r = isFloat(s->dt) ? Range{-4, 4, 1.0 / 64} : smallRange(s->dt);
      if (isFloat(s->dt) && s->opd().prio == 2) r = defaultRange(s->dt);
      s->in = makeInput(rng, s->shape, s->dt, r);
    }
    SCOPED_TRACE("where(" + cond.how + ", " + a.describe() + ", " + b.describe() + ")");
    Tensor y = kiln::where(cond.t, a.operand(), b.operand());
    EXPECT_DTYPE(y, ct);
    Ref ref = zip3Ref(cond.r, a.ref(), b.ref(), [&](double c, double x, double z) {
      return castTo(c != 0 ? x : z, ct);
    });
    EXPECT_TRUE(near(y, ref, tolFor(ct)));
  }
}

TEST(OpsWhere, HalfBranchesAreSelectedAsTheyAre) {
  // where() on f16 and bf16 branches moves their values (no rounding):
  // the bits of the branch chosen, infinities, -0 and NaN included, for
  // broadcast, rank-0, strided and empty branches and a float condition.
  const auto sameBits = expectSameTensorBits;
  for (DType t : {DType::bf16, DType::f16}) {
    std::vector<float> xs = kiln::randn({37, 41}, 21).to_vector<float>();
    const float specials[] = {kInff, -kInff, kNaNf, -0.0f, 0.0f, 1e-3f};
    for (size_t i = 0; i < std::size(specials); ++i) xs[i * 53] = specials[i];
    const Tensor x = kiln::cast(kiln::from_vector(xs, {37, 41}), t);
    const Tensor y = kiln::cast(kiln::randn({37, 41}, 22), t), row = kiln::cast(kiln::randn({41}, 23), t);
    const Tensor scalar = kiln::cast(kiln::full({}, -0.0), t);
    const Tensor xt = kiln::permute(kiln::cast(kiln::randn({41, 37}, 24), t), {1, 0});
    const Tensor empty = kiln::cast(kiln::randn({0, 41}, 25), t);
    const Tensor c = kiln::randn({37, 41}, 26) > 0.0, cRow = kiln::randn({41}, 27) > 0.0;
    const Tensor cFloat = kiln::randn({37, 41}, 28);
    auto f32 = [](const Tensor& v) { return kiln::cast(v, DType::f32); };
    const std::string name = t == DType::bf16 ? "bf16" : "f16";
    // The f32 select of the widened values, rounded back (exact but for a
    // NaN's payload, which expectSameTensorBits lets be).
    auto want = [&](const Tensor& cond, const Tensor& a, const Tensor& b) {
      return kiln::cast(kiln::where(cond, f32(a), f32(b)), t);
    };
    sameBits(kiln::where(c, x, y), want(c, x, y), name + " x, y");
    sameBits(kiln::where(c, row, x), want(c, row, x), name + " broadcast row");
    sameBits(kiln::where(cRow, x, scalar), want(cRow, x, scalar), name + " rank-0 -0");
    sameBits(kiln::where(c, xt, y), want(c, xt, y), name + " strided");
    sameBits(kiln::where(cFloat, x, y), want(cFloat, x, y), name + " float condition");
    const Tensor emptyPick = kiln::where(kiln::randn({0, 41}, 29) > 0.0, empty, row);
    EXPECT_EQ(emptyPick.dtype(), t);
    EXPECT_EQ(emptyPick.shape(), (kiln::Shape{0, 41}));
    const Tensor picked = kiln::where(c, x, y);
    EXPECT_EQ(picked.dtype(), t);
  }
}

TEST(OpsWhere, TwoScalarBranches) {
  // torch.where(cond, 1.0, 0.0): both branches C++ scalars, promoted together.
  Tensor c = kiln::from_vector(std::vector<float>{0, 2, -1, 0}, {2, 2});
  Tensor y = kiln::where(c, 1.5, -2.0);
  EXPECT_DTYPE(y, DType::f32);
  EXPECT_TRUE(near(y, Ref({2, 2}, {-2, 1.5, 1.5, -2}), {}));
  Tensor z = kiln::where(c, int64_t{7}, int64_t{-1});
  EXPECT_DTYPE(z, DType::i64);
  EXPECT_TRUE(near(z, Ref({2, 2}, {-1, 7, 7, -1}), {}));
}

TEST(OpsWhere, Explicit) {
  Tensor c = kiln::from_vector(std::vector<bool>{true, false, true}, {3});
  Tensor a = kiln::from_vector(std::vector<int32_t>{1, 2, 3}, {3});
  Tensor b = kiln::from_vector(std::vector<float>{-1, -2, -3}, {3});
  Tensor y = kiln::where(c, a, b);
  EXPECT_DTYPE(y, DType::f32);
  EXPECT_TRUE(near(y, Ref({3}, {1, -2, 3}), {}));
  y = kiln::where(c, a, 0.5);  // i32 tensor with a floating scalar -> f32
  EXPECT_DTYPE(y, DType::f32);
  EXPECT_TRUE(near(y, Ref({3}, {1, 0.5, 3}), {}));
  y = kiln::where(kiln::reshape(c, {3, 1}), a, int64_t{9});  // broadcast to [3, 3]
  EXPECT_DTYPE(y, DType::i32);
  EXPECT_TRUE(near(y, Ref({3, 3}, {1, 2, 3, 9, 9, 9, 1, 2, 3}), {}));
}

TEST(OpsClamp, RandomScalarsAndTensorBounds) {
  Rng rng(kSeed + 24);
  for (int it = 0; it < 120; ++it) {
    DType t = rng.pick(kNumericTypes);
    Dims s = randomShape(rng, 0, 4, 5, 0.05);
    Input x = makeInput(rng, s, t, defaultRange(t));
    SCOPED_TRACE("clamp of " + x.how);
    Ref ref;
    Tensor y;
    if (rng.coin()) {
      // Scalar bounds of the tensor's category.
      if (isFloat(t)) {
        double lo = rng.pick(std::vector<double>{-3.5, -1.25, 0.0}), hi = rng.pick(std::vector<double>{0.5, 2.75});
        y = kiln::clamp(x.t, lo, hi);
        ref = mapRef(x.r, [&](double v) { return std::min(std::max(v, lo), hi); });
      } else {
        int64_t lo = t == DType::u8 ? 10 : -50, hi = t == DType::u8 ? 200 : 60;
        y = kiln::clamp(x.t, lo, hi);
        ref = mapRef(x.r, [&](double v) { return std::min(std::max(v, double(lo)), double(hi)); });
      }
    } else {
      // Tensor bounds of the same dtype that broadcast against x.
      auto sub = [&]() {
        size_t r = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(s.size())));
        Dims d(s.end() - r, s.end());
        for (auto& e : d)
          if (rng.coin(0.4)) e = 1;
        return d;
      };
      Range rl = isFloat(t) ? Range{-4, 0} : t == DType::u8 ? Range{0, 100} : Range{-100, 0};
      Range rh = isFloat(t) ? Range{0, 4} : t == DType::u8 ? Range{100, 255} : Range{0, 100};
      Input lo = makeInput(rng, sub(), t, rl), hi = makeInput(rng, sub(), t, rh);
      y = kiln::clamp(x.t, lo.t, hi.t);
      ref = zip3Ref(x.r, lo.r, hi.r, [](double v, double l, double h) { return std::min(std::max(v, l), h); });
    }
    EXPECT_DTYPE(y, t);
    EXPECT_TRUE(near(y, ref, {}));
  }
}

// ---- cast ------------------------------------------------------------------------

Range castRange(DType from, DType to) {
  if (isBool(from)) return {0, 1};
  if (isBool(to)) return isFloat(from) ? Range{-2, 2, 0.5} : from == DType::u8 ? Range{0, 2} : Range{-2, 2};
  if (isFloat(from)) {
    switch (to) {
      case DType::i8: return {-128.4, 127.4};  // stays in range after rounding to bf16
      case DType::u8: return {-0.9, 255.4};
      case DType::i32:
      case DType::i64: return {-1000.9, 1000.9};
      default: return {-100, 100};
    }
  }
  // Integer sources.
  if (isFloat(to)) return from == DType::i64 || from == DType::i32 ? Range{-16777216, 16777216} : defaultRange(from);
  if (from == DType::i64) return {-1099511627776.0, 1099511627776.0};  // 2^40: wraps into i32
  if (from == DType::i32) return {-2147483648.0, 2147483647.0};
  return defaultRange(from);
}

TEST(OpsCast, EveryDTypePair) {
  Rng rng(kSeed + 25);
  for (DType from : kAllTypes) {
    for (DType to : kAllTypes) {
      for (int it = 0; it < 4; ++it) {
        Dims s = randomShape(rng, 0, 4, 5, 0.05);
        Input x = makeInput(rng, s, from, castRange(from, to));
        if (isFloat(from) && (isFloat(to) || isBool(to)) && x.r.numel() > 0 && rng.coin()) {
          Ref r = x.r;
          std::vector<double> specials = {kNaN, kInf, -kInf, 0.0, -0.0};
          if (to == DType::f16 && from != DType::f16) specials.push_back(70000.0);
          sprinkle(rng, r, 0.2, specials);
          x = makeExact(r, from);
        }
        SCOPED_TRACE(x.how + " -> " + tname(to));
        Tensor y = it % 2 ? kiln::cast(x.t, to) : x.t.cast(to);
        EXPECT_DTYPE(y, to);
        EXPECT_EQ(toDims(y.shape()), s);
        EXPECT_TRUE(near(y, castRef(x.r, to), {0, 0}));
      }
    }
  }
}

TEST(OpsCast, IntegerAndBoolToHalfPrecision) {
  Tensor i = kiln::from_vector(std::vector<int32_t>{1, 2, -3, 1000}, {4});
  EXPECT_TRUE(near(kiln::cast(i, DType::f16), Ref({4}, {1, 2, -3, 1000}), {}));
  EXPECT_TRUE(near(kiln::cast(i, DType::bf16), Ref({4}, {1, 2, -3, 1000}), {}));
  Tensor b = kiln::from_vector(std::vector<bool>{true, false}, {2});
  EXPECT_TRUE(near(kiln::cast(b, DType::f16), Ref({2}, {1, 0}), {}));
  EXPECT_TRUE(near(kiln::cast(b, DType::bf16), Ref({2}, {1, 0}), {}));
  Tensor u = kiln::from_vector(std::vector<uint8_t>{7, 255}, {2});
  EXPECT_TRUE(near(kiln::cast(u, DType::f16), Ref({2}, {7, 255}), {}));
}

TEST(OpsCast, IntegerToFloatRoundsOnce) {
  // Through f64 first, 2^60 + 2^36 + 1 rounded to 2^60 + 2^36 (53 bits), a
  // tie in f32 that went down to 2^60; rounded once it is 2^60 + 2^37. The
  // reference rounds once from long double, which holds every i64.
  const int64_t big = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  const std::vector<int64_t> values = {big, -big, (int64_t{1} << 53) + 1, (int64_t{1} << 24) + 1,
                                       std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  Tensor i = kiln::from_vector(values, {static_cast<int64_t>(values.size())});
  const std::vector<float> f = kiln::cast(i, DType::f32).to_vector<float>();
  const std::vector<double> d = kiln::cast(i, DType::f64).to_vector<double>();
  ASSERT_EQ(f.size(), values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    SCOPED_TRACE(values[k]);
    EXPECT_EQ(f[k], static_cast<float>(static_cast<long double>(values[k])));
    EXPECT_EQ(d[k], static_cast<double>(static_cast<long double>(values[k])));
  }
  EXPECT_EQ(f[0], 0x1p60f + 0x1p37f);
  // f16 and bf16 round from the f32 (as PyTorch): 2^60 + 2^37 is 2^60 in both.
  EXPECT_EQ(kiln::cast(kiln::cast(i, DType::bf16), DType::f32).to_vector<float>()[0], 0x1p60f);
}

TEST(OpsCast, Explicit) {
  Tensor f = kiln::from_vector(std::vector<float>{-2.7f, -0.5f, 0.5f, 2.7f, 127.9f}, {5});
  EXPECT_TRUE(near(kiln::cast(f, DType::i32), Ref({5}, {-2, 0, 0, 2, 127}), {}));
  EXPECT_TRUE(near(kiln::cast(f, DType::i8), Ref({5}, {-2, 0, 0, 2, 127}), {}));
  EXPECT_TRUE(near(kiln::cast(f, DType::boolean), Ref({5}, {1, 1, 1, 1, 1}), {}));
  Tensor i = kiln::from_vector(std::vector<int64_t>{300, -129, 256, (int64_t{1} << 32) + 5}, {4});
  EXPECT_TRUE(near(kiln::cast(i, DType::u8), Ref({4}, {44, 127, 0, 5}), {}));
  EXPECT_TRUE(near(kiln::cast(i, DType::i8), Ref({4}, {44, 127, 0, 5}), {}));
  EXPECT_TRUE(near(kiln::cast(i, DType::i32), Ref({4}, {300, -129, 256, 5}), {}));
  Tensor h = kiln::from_vector(std::vector<float>{1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65519, 65520, 1e-8f}, {5});
  EXPECT_TRUE(near(kiln::cast(h, DType::f16), Ref({5}, {1.0, 1.0 + 4.0 / 2048, 65504, kInf, 0}), {0, 0}));
  Tensor bf = kiln::from_vector(std::vector<float>{1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 3.0f}, {3});
  EXPECT_TRUE(near(kiln::cast(bf, DType::bf16), Ref({3}, {1.0, 1.0 + 4.0 / 256, 3.0}), {0, 0}));
}

// ---- threads and errors ---------------------------------------------------------

TEST(OpsBinary, ConcurrentThreads) {
  runOnThreads(4, [](int tid) {
    Rng rng(kSeed + 300 + tid);
    int done = 0;
    for (int it = 0; it < 200 && done < 60; ++it) done += checkBinaryOnce(rng, rng.pick(ops()));
    EXPECT_EQ(done, 60);
  });
}

TEST(OpsBinary, BadInputThrowsAndKeepsEarlierTensors) {
  Tensor a = kiln::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor b = kiln::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor pending = a * 2.0 + 1.0;
  for (const BinaryOp& op : ops()) {
    expectKilnError([&] { return op.fn(a, b); }, op.name);
    expectKilnError([&] { return op.fn(1.0, Tensor()); }, op.name);
  }
  expectKilnError([&] { return kiln::where(a > 1.0, a, b); }, "where");
  expectKilnError([&] { return kiln::where(kiln::ones({2}, DType::boolean), a, 0.0); }, "where");
  expectKilnError([&] { return kiln::clamp(a, b, 5.0); }, "clamp");
  expectKilnError([&] { return kiln::cast(Tensor(), DType::f32); }, "cast");
  EXPECT_TRUE(near(pending, Ref({3}, {3, 5, 7}), tolFor(DType::f32)));
  EXPECT_TRUE(near(a + 1, Ref({3}, {2, 3, 4}), tolFor(DType::f32)));
  EXPECT_TRUE(near(b * b, Ref({2, 2}, {1, 4, 9, 16}), tolFor(DType::f32)));
}

}  // namespace
}  // namespace kt

namespace kt {
namespace {

/// x * y then op z, each rounded on its own (volatile: no fused multiply-add
/// in the reference either).
template <class T>
T productThen(char op, bool productFirst, T x, T y, T z) {
  volatile T p = x * y;
  const T product = p;
  if (op == '+') return productFirst ? product + z : z + product;
  return productFirst ? product - z : z - product;
}

template <class T>
void expectSameBits(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << what << " at " << i;
    EXPECT_EQ(got[i], want[i]) << what << " at " << i;
  }
}

/// The interpreter runs a product that only an add or subtract reads in one
/// pass (OpLibrary::productThenAdd): its results must be the two ops'
/// exactly, with the product rounded first (values where a fused
/// multiply-add would differ), NaN, infinities and signed zeros, a
/// broadcast and a transposed operand, and the product held by a tensor
/// (then not fused) giving the same bits.
template <class T>
void checkProductThenAdd(DType dtype) {
  const double big = std::numeric_limits<T>::max(), eps = std::numeric_limits<T>::epsilon();
  auto values = [](std::initializer_list<double> l) {
    std::vector<T> v;
    for (double d : l) v.push_back(static_cast<T>(d));
    return v;
  };
  // (1 + eps)(1 - eps) - 1 is 0 with the product rounded, -eps^2 fused.
  const std::vector<T> xs = values({1 + eps, 3, -0.0, 0, big, 2, kNaN, 1.5, -7, 1e-3});
  const std::vector<T> ys = values({1 - eps, 1.0 / 3, 5, -0.0, 2, kInf, 1, -2, 0.1, 3});
  const std::vector<T> zs = values({-1, -1, 0, -0.0, -big, 4, 1, 3, 0.7, -0.003});
  const int64_t n = static_cast<int64_t>(xs.size());
  Tensor x = kiln::from_vector(xs, {n}), y = kiln::from_vector(ys, {n}), z = kiln::from_vector(zs, {n});
  ASSERT_EQ(x.dtype(), dtype);
  for (char op : {'+', '-'}) {
    for (bool productFirst : {true, false}) {
      auto apply = [&](const Tensor& p, const Tensor& c) {
        if (op == '+') return productFirst ? p + c : c + p;
        return productFirst ? p - c : c - p;
      };
      const std::string what = std::string("x*y ") + op + " z, product " + (productFirst ? "first" : "second");
      std::vector<T> want(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) want[i] = productThen(op, productFirst, xs[i], ys[i], zs[i]);
      // Recorded in one statement, run in the next: the product's temporary
      // is gone by then, so nothing but the sum reads it.
      Tensor fused = apply(x * y, z);
      expectSameBits(fused.template to_vector<T>(), want, what);
      Tensor held = x * y;  // a tensor holds the product: two ops
      Tensor twoOps = apply(held, z);
      expectSameBits(twoOps.template to_vector<T>(), want, what + " (held)");
      // z broadcast from a rank-0 tensor, x transposed.
      Tensor s = kiln::from_vector(std::vector<T>{zs[9]}, {});
      for (size_t i = 0; i < xs.size(); ++i) want[i] = productThen(op, productFirst, xs[i], ys[i], zs[9]);
      Tensor broadcast = apply(x * y, s);
      expectSameBits(broadcast.template to_vector<T>(), want, what + " (broadcast)");
      Tensor xt = kiln::transpose(kiln::reshape(x, {2, 5}), 0, 1), yt = kiln::transpose(kiln::reshape(y, {2, 5}), 0, 1);
      Tensor zt = kiln::transpose(kiln::reshape(z, {2, 5}), 0, 1);
      std::vector<T> wantT(xs.size());
      for (int64_t r = 0; r < 5; ++r)
        for (int64_t c = 0; c < 2; ++c) {
          const size_t k = static_cast<size_t>(c * 5 + r);
          wantT[static_cast<size_t>(r * 2 + c)] = productThen(op, productFirst, xs[k], ys[k], zs[k]);
        }
      Tensor transposed = apply(xt * yt, zt);
      expectSameBits(transposed.template to_vector<T>(), wantT, what + " (transposed)");
    }
  }
}

TEST(OpsBinary, ProductThenAddRoundsLikeTwoOps) {
  checkProductThenAdd<float>(DType::f32);
  checkProductThenAdd<double>(DType::f64);
  // Integers are not fused: they wrap as two ops.
  Tensor a = i32t({46341, -3, 7}), b = i32t({46341, 5, 0}), c = i32t({1, 15, -2});
  Tensor r = a * b + c;
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{-2147479014, 0, -2}));
}

}  // namespace
}  // namespace kt
