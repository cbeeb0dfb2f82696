// Per-op differential test: every public op, on every dtype it accepts, on a
// few shapes (broadcasting, rank 0, non-contiguous parameters and in-trace
// views), runs interpreted (KILN_JIT=off) and compiled (KILN_JIT=sync,
// threshold 1), and the results must agree. Run with KILN_DEFAULT_DEVICE
// (ctest does, with the test device), the compiled runs happen on that device
// and are compared with the CPU interpreter. Each compiled run must really run
// compiled (stats().compiled_runs grows), except for traces that stay
// interpreted by design (zero-size tensors).
//
// Bounds, by result dtype:
// - integers and bools: bit-exact, always.
// - Exact ops (arithmetic that IEEE rounds correctly: + - * / sqrt, and
//   comparisons, selection, min/max, rounding, casts, shape and index ops):
//   equal values for every float dtype. NaN matches NaN; the sign of zero is
//   not compared.
// - Transcendental ops (exp, log, tanh, sigmoid, sin, cos, pow): compiled code
//   uses polynomial approximations (errors ~1e-7 relative in f32), so f32/f64
//   agree within 1e-5 * max(1, |interpreted|) and f16/bf16 within 1 ulp of the
//   type (the f32 results round to neighbouring half values).
// - Sums, means and matmuls add in another order: 1e-5 (f32/f64), 1 ulp
//   (f16/bf16); matmul, whose f32 accumulator is not widened, 1e-4.
// - Composites (gelu, softmax, log_softmax, layer_norm, cross_entropy) round
//   each primitive's half result, so one-ulp differences compound: 1e-4 and
//   4 ulp.
// - rand: bit-exact (the lowering computes the interpreter's counter-based
//   hash). randn: bit-exact for f32/f16/bf16; f64 keeps every bit of the
//   Box-Muller log/cos, so it gets the transcendental bound, leaving the
//   compiler free to approximate them.
// Programs the API rejects (an op not defined for a dtype) are skipped; set
// KILN_OP_DIFF_VERBOSE=1 to list them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "kiln/kiln.h"
#include "runtime/core/Half.h"
#include "runtime/core/OpKind.h"
#include "runtime/trace/Recorder.h"
#include "test/unit/exec/DeviceUnderTest.h"
#include "test/unit/exec/JitScope.h"

namespace kiln {
namespace {

constexpr DType kAllTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64,
                               DType::i32, DType::i8,  DType::u8,  DType::boolean};
constexpr DType kNumericTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                   DType::i64, DType::i32, DType::i8,  DType::u8};
constexpr DType kFloatTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kIntTypes[] = {DType::i64, DType::i32, DType::i8, DType::u8};

bool isHalf(DType t) { return t == DType::f16 || t == DType::bf16; }

using Layout2d = ::kiln::Layout;

/// What values an input holds.
enum class Values {
  Mixed,     ///< floats in [-4, 4] plus specials (NaN, inf, -0, huge); ints incl. extremes
  Plain,     ///< floats in [-4, 4]; small ints
  Positive,  ///< floats in (0.05, 4]; ints in [1, 9]
  Near1,     ///< floats in [0.5, 1.5]; ints in [-3, 3]
  Ties,      ///< few distinct values, so comparisons and arg-reductions tie
  Exponent,  ///< integer-valued in [-3, 6] (pow exponents)
};

/// How a parameter is laid out in memory.
enum class Layout { Dense, Transposed, Strided };

/// Makes materialized inputs from a seeded generator, so the interpreted and
/// compiled runs of a program see the same data.
class InputMaker {
 public:
  explicit InputMaker(uint64_t seed) : rng_(seed) {}

  Tensor make(DType t, const Shape& shape, Values values = Values::Mixed, Layout layout = Layout::Dense) {
    // The buffer holds `storage` elements; the tensor views them with strides.
    Shape storage = shape;
    std::vector<int64_t> strides;
    const int r = shape.rank();
    if (layout == Layout::Transposed && r >= 2) {
      std::swap(storage[r - 1], storage[r - 2]);
      strides = denseStrides(storage);
      std::swap(strides[r - 1], strides[r - 2]);
    } else if (layout == Layout::Strided && r >= 1) {
      storage[r - 1] *= 2;
      strides = denseStrides(storage);
      strides[r - 1] *= 2;
    }
    const size_t n = static_cast<size_t>(storage.numel());
    const size_t size = dtype_size(t);
    char* data = new char[std::max<size_t>(1, n * size)];
    for (size_t i = 0; i < n; ++i) store(t, values, data + i * size);
    // Made on the host, then moved to the device under test (to() keeps
    // the strides: a strided input stays strided there).
    return from_blob(data, shape, t, Device::cpu(), [](void* p) { delete[] static_cast<char*>(p); }, strides)
        .to(default_device());
  }
  /// Integer class ids / positions in [0, extent).
  Tensor index(DType t, const Shape& shape, int64_t extent) {
    std::vector<int64_t> v(static_cast<size_t>(shape.numel()));
    for (int64_t& x : v) x = pick(0, extent - 1);
    switch (t) {
      case DType::i32: return from_vector(std::vector<int32_t>(v.begin(), v.end()), shape);
      case DType::i8: return from_vector(std::vector<int8_t>(v.begin(), v.end()), shape);
      case DType::u8: return from_vector(std::vector<uint8_t>(v.begin(), v.end()), shape);
      default: return from_vector(v, shape);
    }
  }
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

 private:
  static std::vector<int64_t> denseStrides(const Shape& s) {
    std::vector<int64_t> st(static_cast<size_t>(s.rank()), 1);
    for (int d = s.rank() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
    return st;
  }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }

  double floatValue(Values v) {
    static constexpr double kSpecials[] = {0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e30, -1e30, 1e-30,
                                           65504, 70000, 3e38, 1e-6, 300.7, -129.5, 255.5, 2147483648.0,
                                           -9.3e18, 9.3e18};
    static constexpr double kTies[] = {-1, -0.5, 0, 0.5, 1, 2};
    switch (v) {
      case Values::Mixed: {
        const int64_t p = pick(0, 19);
        if (p == 0) return std::numeric_limits<double>::quiet_NaN();
        if (p == 1) return pick(0, 1) ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
        if (p < 5) return kSpecials[pick(0, std::size(kSpecials) - 1)];
        return uniform(-4, 4);
      }
      case Values::Plain: return uniform(-4, 4);
      case Values::Positive: return uniform(0.05, 4);
      case Values::Near1: return uniform(0.5, 1.5);
      case Values::Ties: return kTies[pick(0, std::size(kTies) - 1)];
      case Values::Exponent: return static_cast<double>(pick(-3, 6));
    }
    return 0;
  }
  int64_t intValue(DType t, Values v) {
    const bool isUnsigned = t == DType::u8;
    switch (v) {
      case Values::Mixed: {
        const int64_t p = pick(0, 9);
        if (p < 5) return isUnsigned ? pick(0, 10) : pick(-5, 5);
        if (p < 8) return static_cast<int64_t>(rng_());  // full range, truncated on store
        static constexpr int64_t kExtremes[] = {0, -1, 1, std::numeric_limits<int64_t>::min(),
                                                std::numeric_limits<int64_t>::max(), 127, -128, 255,
                                                2147483647, -2147483648LL};
        return kExtremes[pick(0, std::size(kExtremes) - 1)];
      }
      case Values::Plain: return isUnsigned ? pick(0, 40) : pick(-20, 20);
      case Values::Positive: return pick(1, 9);
      case Values::Near1: return isUnsigned ? pick(0, 3) : pick(-3, 3);
      case Values::Ties: return isUnsigned ? pick(0, 2) : pick(-2, 2);
      case Values::Exponent: return isUnsigned ? pick(0, 9) : pick(-3, 12);
    }
    return 0;
  }
  void store(DType t, Values v, char* p) {
    switch (t) {
      case DType::f32: { float f = static_cast<float>(floatValue(v)); std::memcpy(p, &f, 4); return; }
      case DType::f64: { double d = floatValue(v); std::memcpy(p, &d, 8); return; }
      case DType::f16: { uint16_t h = core::floatToHalf(static_cast<float>(floatValue(v))); std::memcpy(p, &h, 2); return; }
      case DType::bf16: { uint16_t h = core::floatToBf16(static_cast<float>(floatValue(v))); std::memcpy(p, &h, 2); return; }
      case DType::i64: { int64_t x = intValue(t, v); std::memcpy(p, &x, 8); return; }
      case DType::i32: { int32_t x = static_cast<int32_t>(intValue(t, v)); std::memcpy(p, &x, 4); return; }
      case DType::i8: { int8_t x = static_cast<int8_t>(intValue(t, v)); std::memcpy(p, &x, 1); return; }
      case DType::u8: { uint8_t x = static_cast<uint8_t>(intValue(t, v)); std::memcpy(p, &x, 1); return; }
      case DType::boolean: { uint8_t x = static_cast<uint8_t>(pick(0, 1)); std::memcpy(p, &x, 1); return; }
    }
  }

  std::mt19937_64 rng_;
};

/// Allowed difference for floating results (integers are always exact).
struct Bound {
  double relative = 0;  ///< f32/f64: |c - r| <= relative * max(1, |r|)
  int ulps = 0;         ///< f16/bf16: |c - r| <= ulps * ulp(r)
  bool zeroSign = false;  ///< equal zeros must also agree in sign
};
constexpr Bound kExact{0, 0};
/// Max/min reductions: IEEE maximum/minimum in both tiers, whatever the order.
constexpr Bound kExactSigned{0, 0, true};
constexpr Bound kTranscendental{1e-5, 1};
constexpr Bound kSummed{1e-5, 1};
constexpr Bound kMatmul{1e-4, 1};
constexpr Bound kComposite{1e-4, 4};

using Program = std::function<std::vector<Tensor>(InputMaker&)>;

struct Case {
  std::string name;
  Bound bound;
  Program program;
  /// Zero-size tensors run interpreted by design; a program that records no
  /// op has no trace to compile.
  bool mayStayInterpreted = false;
  /// Records ops the compiler does not lower (collectives): the compiled
  /// run must launch region kernels around them instead of a whole trace.
  bool betweenRegions = false;
};

struct Output {
  DType dtype;
  Shape shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;
};


/// Mnemonics of the primitives the compared programs recorded: every op
/// kind of the table must be among them (EveryOpKindIsCompared).
std::set<std::string>& recordedOps() {
  static std::set<std::string> ops;
  return ops;
}

void noteRecordedOps() {
  // The listing has one "%i = <mnemonic>(...)" line per node.
  std::istringstream lines(trace::Recorder::current().traceListing());
  std::string line;
  while (std::getline(lines, line)) {
    const size_t eq = line.find("= "), paren = line.find('(');
    if (eq != std::string::npos && paren != std::string::npos && paren > eq)
      recordedOps().insert(line.substr(eq + 2, paren - eq - 2));
  }
}

/// Records and runs one program. nullopt when the API rejects it at record
/// time (the op does not accept these dtypes); *error holds a run-time error.
std::optional<std::vector<Output>> runProgram(const Case& c, JitMode mode, std::string* error) {
  // The reference is the CPU interpreter; the compiled run is on the device
  // under test.
  DefaultDevice scope(mode == JitMode::Off ? Device::cpu() : deviceUnderTest());
  JitScope m(mode, 1);
  InputMaker inputs(std::hash<std::string>{}(c.name));
  std::vector<Tensor> outs;
  try {
    outs = c.program(inputs);
  } catch (const Error& e) {
    if (mode == JitMode::Off && std::getenv("KILN_OP_DIFF_VERBOSE")) std::printf("rejected: %s: %s\n", c.name.c_str(), e.what());
    step();
    return std::nullopt;
  }
  if (mode == JitMode::Off) noteRecordedOps();
  std::vector<Output> values;
  try {
    for (const Tensor& t : outs) {
      Output o{t.dtype(), t.shape(), {}, {}};
      if (is_floating(t.dtype())) o.floats = t.to_vector<double>();
      else o.ints = t.to_vector<int64_t>();
      values.push_back(std::move(o));
    }
  } catch (const Error& e) {
    *error = e.what();
  }
  step();
  return values;
}

double ulpOf(DType t, double x) {
  const int mantissa = t == DType::f16 ? 10 : 7;
  const int minExp = t == DType::f16 ? -14 : -126;
  const int e = x == 0 ? minExp : std::max(minExp, std::ilogb(x));
  return std::ldexp(1.0, e - mantissa);
}

bool floatsAgree(DType t, Bound b, double r, double c) {
  if (std::isnan(r) || std::isnan(c)) return std::isnan(r) && std::isnan(c);
  if (r == c) return !b.zeroSign || std::signbit(r) == std::signbit(c);
  if (std::isinf(r) || std::isinf(c)) return false;
  if (isHalf(t)) return std::fabs(r - c) <= b.ulps * ulpOf(t, std::max(std::fabs(r), std::fabs(c)));
  return std::fabs(r - c) <= b.relative * std::max(1.0, std::fabs(r));
}

struct Tally {
  int run = 0, rejected = 0, interpretedByDesign = 0;
};

void checkCase(const Case& c, Tally& tally) {
  SCOPED_TRACE(c.name);
  std::string refError, jitError;
  auto reference = runProgram(c, JitMode::Off, &refError);
  if (!reference) {
    ++tally.rejected;
    return;
  }
  ++tally.run;
  const Stats before = stats();
  auto compiled = runProgram(c, JitMode::Sync, &jitError);
  const Stats after = stats();
  ASSERT_TRUE(compiled) << "recorded interpreted but not compiled";
  ASSERT_EQ(refError, jitError) << "run-time errors differ";
  EXPECT_EQ(after.compile_failures, before.compile_failures) << "failed to compile";
  if (c.betweenRegions) {
    EXPECT_GT(after.region_launches, before.region_launches) << "no region around the collective ran compiled";
  } else if (after.compiled_runs == before.compiled_runs) {
    if (c.mayStayInterpreted) ++tally.interpretedByDesign;
    else ADD_FAILURE() << "did not run compiled";
  }
  ASSERT_EQ(reference->size(), compiled->size());
  for (size_t o = 0; o < reference->size(); ++o) {
    const Output& r = (*reference)[o];
    const Output& k = (*compiled)[o];
    ASSERT_EQ(r.dtype, k.dtype) << "output " << o;
    ASSERT_EQ(r.shape, k.shape) << "output " << o;
    int reported = 0;
    for (size_t i = 0; i < r.floats.size() && reported < 4; ++i) {
      if (floatsAgree(r.dtype, c.bound, r.floats[i], k.floats[i])) continue;
      ++reported;
      ADD_FAILURE() << "output " << o << " " << dtype_name(r.dtype) << r.shape.str() << " element " << i
                    << ": interpreted " << std::setprecision(17) << r.floats[i] << ", compiled " << k.floats[i];
    }
    for (size_t i = 0; i < r.ints.size() && reported < 4; ++i) {
      if (r.ints[i] == k.ints[i]) continue;
      ++reported;
      ADD_FAILURE() << "output " << o << " " << dtype_name(r.dtype) << r.shape.str() << " element " << i
                    << ": interpreted " << r.ints[i] << ", compiled " << k.ints[i];
    }
  }
}

void runCases(const std::vector<Case>& cases) {
  Tally tally;
  for (const Case& c : cases) checkCase(c, tally);
  std::printf("%d programs compared, %d rejected by the API, %d interpreted by design\n", tally.run,
              tally.rejected, tally.interpretedByDesign);
  EXPECT_GT(tally.run, 0);
}

std::string nameOf(const char* op, std::initializer_list<DType> types, const char* extra = "") {
  std::string s = op;
  for (DType t : types) s += std::string(" ") + std::string(dtype_name(t));
  return s + extra;
}

// ---- elementwise -------------------------------------------------------------

struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
  Bound bound;
  Values values = Values::Mixed;
};

const UnaryOp kUnaryOps[] = {
    {"neg", neg, kExact},
    {"abs", abs, kExact},
    {"exp", exp, kTranscendental},
    {"log", log, kTranscendental},
    {"log+", log, kTranscendental, Values::Positive},
    {"log2", log2, kTranscendental},
    {"log2+", log2, kTranscendental, Values::Positive},
    {"sqrt", sqrt, kExact},
    {"rsqrt", rsqrt, kExact},
    {"tanh", tanh, kTranscendental},
    {"sigmoid", sigmoid, kTranscendental},
    {"relu", relu, kExact},
    {"gelu", gelu, kComposite, Values::Plain},
    {"sin", sin, kTranscendental},
    {"sin plain", sin, kTranscendental, Values::Plain},
    {"cos", cos, kTranscendental},
    {"atan", atan, kTranscendental},
    {"floor", floor, kExact},
    {"ceil", ceil, kExact},
    {"round", round, kExact},
    {"sign", sign, kExact},
    {"reciprocal", reciprocal, kExact},
    {"square", square, kExact},
    {"logical_not", logical_not, kExact},
    {"erf", erf, kTranscendental},
    {"erf plain", erf, kTranscendental, Values::Plain},
    {"log1p", log1p, kTranscendental},
    {"log1p+", log1p, kTranscendental, Values::Positive},
    {"expm1", expm1, kTranscendental},
    {"expm1 plain", expm1, kTranscendental, Values::Plain},
    {"gelu_exact", gelu_exact, kComposite, Values::Plain},
    {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, kExact},
    {"isnan", isnan, kExact},
    {"isinf", isinf, kExact},
};

TEST(OpDifferential, Unary) {
  std::vector<Case> cases;
  for (const UnaryOp& op : kUnaryOps) {
    for (DType t : kAllTypes) {
      auto fn = op.fn;
      Values v = op.values;
      cases.push_back({nameOf(op.name, {t}), op.bound, [=](InputMaker& in) {
                         return std::vector<Tensor>{
                             fn(in.make(t, {}, v)),
                             fn(in.make(t, {37}, v)),
                             fn(in.make(t, {3, 5}, v)),
                             fn(in.make(t, {4, 6}, v, Layout::Transposed)),
                             fn(in.make(t, {3, 8}, v, Layout::Strided)),
                             fn(transpose(in.make(t, {2, 3, 4}, v), 0, 2)),
                             fn(slice(in.make(t, {9, 2}, v), 0, 1, 9, 3)),
                         };
                       }});
      cases.push_back({nameOf(op.name, {t}, " zero-size"), op.bound,
                       [=](InputMaker& in) { return std::vector<Tensor>{fn(in.make(t, {0, 3}, v))}; },
                       /*mayStayInterpreted=*/true});
    }
  }
  runCases(cases);
}

// exp and sigmoid where exp leaves the normal floats: denormals and zero
// below -87.3, infinity above 88.72, the infinities and NaN, in vectors long
// enough for the vector loop (on AVX-512 the compiled exp scales by 2^k with
// vscalefps, elsewhere by 2^(k/2) and 2^(k - k/2) built from their bits; the
// bf16 case fails where denormal results are flushed to 0).
TEST(OpDifferential, ExpAtTheEndsOfItsRange) {
  std::vector<double> xs = {-INFINITY, -1e30, -200, -104, -103.9, -100, -95, -90, -88.72, -88, -87.9, -87.3,
                            -80, -1, -0.0, 0, 1e-30, 1, 80, 87, 88, 88.3, 88.7, 88.72, 88.73, 89, 100, 1e30,
                            INFINITY, NAN};
  for (int i = 0; i < 34; ++i) xs.push_back(-110 + 6.0 * i);  // a vector's worth more, -110 to 88
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    cases.push_back({nameOf("exp/sigmoid range ends", {t}), kTranscendental, [=](InputMaker&) {
                       Tensor x = cast(from_vector(xs, {static_cast<int64_t>(xs.size())}), t);
                       return std::vector<Tensor>{exp(x), sigmoid(x), sigmoid(-x), exp(-x)};
                     }});
  }
  // Softmax rows whose smallest results are denormal or zero (spread 110,
  // then the same row 1000 higher): both tiers keep the denormals, which
  // MLAS's softmax (ONNX Runtime) flushes to 0; the bf16 case fails where
  // they are flushed.
  std::vector<double> rows;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 64; ++i)
      rows.push_back(1000.0 * r - 110 + 1.75 * i);
  for (DType t : kFloatTypes) {
    cases.push_back({nameOf("softmax with denormal results", {t}), kComposite, [=](InputMaker&) {
                       Tensor x = cast(from_vector(rows, {2, 64}), t);
                       return std::vector<Tensor>{softmax(x, -1), log_softmax(x, -1)};
                     }});
  }
  runCases(cases);
}

struct BinaryOp {
  const char* name;
  Tensor (*fn)(const Operand&, const Operand&);
  Bound bound;
  Values values = Values::Mixed;
};

const BinaryOp kBinaryOps[] = {
    {"add", add, kExact},
    {"sub", sub, kExact},
    {"mul", mul, kExact},
    {"div", div, kExact},
    {"maximum", maximum, kExact},
    {"minimum", minimum, kExact},
    {"eq", eq, kExact, Values::Ties},
    {"ne", ne, kExact, Values::Ties},
    {"lt", lt, kExact, Values::Ties},
    {"le", le, kExact, Values::Ties},
    {"gt", gt, kExact, Values::Ties},
    {"ge", ge, kExact, Values::Ties},
    {"eq mixed", eq, kExact},
    {"lt mixed", lt, kExact},
    {"logical_and", logical_and, kExact},
    {"logical_or", logical_or, kExact},
    {"pow", pow, kTranscendental},
    {"fmod", fmod, kExact},
    {"remainder", remainder, kExact},
    {"fmod plain", fmod, kExact, Values::Plain},
    {"remainder plain", remainder, kExact, Values::Plain},
};

/// dtype pairs of mixed-type binary cases (promotion).
const std::pair<DType, DType> kMixedPairs[] = {
    {DType::i8, DType::u8},    {DType::f16, DType::bf16}, {DType::u8, DType::i64}, {DType::i32, DType::f32},
    {DType::boolean, DType::i32}, {DType::f16, DType::f32}, {DType::boolean, DType::f64}, {DType::i64, DType::bf16},
};

TEST(OpDifferential, Binary) {
  std::vector<Case> cases;
  for (const BinaryOp& op : kBinaryOps) {
    auto fn = op.fn;
    Values v = op.values;
    for (DType t : kAllTypes) {
      cases.push_back({nameOf(op.name, {t}), op.bound, [=](InputMaker& in) {
                         Tensor x = in.make(t, {2, 5}, v);
                         return std::vector<Tensor>{
                             // C++ scalars on either side (promotion by category).
                             fn(x, 2), fn(3, x), fn(x, 2.5), fn(-1.5, x), fn(x, true), fn(x, 300), fn(x, -7),
                             fn(in.make(t, {23}, v), in.make(t, {23}, v)),
                             fn(in.make(t, {3, 4}, v), in.make(t, {4}, v)),
                             fn(in.make(t, {2, 1, 3}, v), in.make(t, {4, 1}, v)),
                             fn(in.make(t, {}, v), in.make(t, {3, 2}, v)),
                             fn(in.make(t, {3, 1}, v), in.make(t, {}, v)),
                             fn(in.make(t, {}, v), in.make(t, {}, v)),
                             fn(in.make(t, {4, 5}, v, Layout::Transposed), in.make(t, {4, 5}, v, Layout::Strided)),
                             fn(transpose(in.make(t, {3, 4}, v)), slice(in.make(t, {8, 3}, v), 0, 0, 8, 2)),
                         };
                       }});
    }
    for (auto [a, b] : kMixedPairs) {
      cases.push_back({nameOf(op.name, {a, b}), op.bound, [=](InputMaker& in) {
                         return std::vector<Tensor>{fn(in.make(a, {3, 4}, v), in.make(b, {4}, v)),
                                                    fn(in.make(b, {2, 3}, v), in.make(a, {}, v)),
                                                    fn(in.make(a, {}, v), in.make(b, {3}, v))};
                       }});
    }
  }
  runCases(cases);
}

TEST(OpDifferential, Pow) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    cases.push_back({nameOf("pow positive base", {t}), kTranscendental, [=](InputMaker& in) {
                       return std::vector<Tensor>{pow(in.make(t, {4, 6}, Values::Positive), in.make(t, {6}, Values::Plain)),
                                                  pow(in.make(t, {7}, Values::Positive), 0.5),
                                                  pow(2.0, in.make(t, {7}, Values::Plain))};
                     }});
    cases.push_back({nameOf("pow integer exponent", {t}), kTranscendental, [=](InputMaker& in) {
                       return std::vector<Tensor>{pow(in.make(t, {5, 6}, Values::Plain), in.make(t, {6}, Values::Exponent)),
                                                  pow(in.make(t, {9}, Values::Plain), 2),
                                                  pow(in.make(t, {9}, Values::Plain), 3),
                                                  pow(in.make(t, {9}, Values::Plain), -1),
                                                  pow(in.make(t, {9}, Values::Mixed), 0)};
                     }});
  }
  for (DType t : kIntTypes) {
    cases.push_back({nameOf("pow int", {t}), kExact, [=](InputMaker& in) {
                       return std::vector<Tensor>{pow(in.make(t, {6, 8}, Values::Near1), in.make(t, {8}, Values::Exponent)),
                                                  pow(in.make(t, {20}, Values::Mixed), in.make(t, {20}, Values::Exponent)),
                                                  pow(in.make(t, {5}, Values::Near1), -2),
                                                  pow(in.make(t, {5}, Values::Near1), 3),
                                                  pow(2, in.make(t, {5}, Values::Exponent))};
                     }});
  }
  runCases(cases);
}

TEST(OpDifferential, WhereAndClamp) {
  std::vector<Case> cases;
  for (DType t : kAllTypes) {
    for (DType ct : {DType::boolean, DType::f32, DType::i32}) {
      cases.push_back({nameOf("where", {ct, t}), kExact, [=](InputMaker& in) {
                         return std::vector<Tensor>{
                             where(in.make(ct, {3, 1}, Values::Ties), in.make(t, {4}), in.make(t, {})),
                             where(in.make(ct, {17}, Values::Ties), in.make(t, {17}), in.make(t, {17})),
                             where(in.make(ct, {}, Values::Ties), in.make(t, {2, 3}, Values::Mixed, Layout::Transposed),
                                   in.make(t, {3})),
                             where(in.make(ct, {2, 3}, Values::Ties), in.make(t, {2, 3}), 1),
                             where(in.make(ct, {2, 3}, Values::Ties), 0.5, in.make(t, {3}))};
                       }});
    }
    cases.push_back({nameOf("where mixed", {t, DType::i8}), kExact, [=](InputMaker& in) {
                       return std::vector<Tensor>{where(in.make(DType::boolean, {4, 3}), in.make(t, {3}), in.make(DType::i8, {4, 1}))};
                     }});
    cases.push_back({nameOf("clamp", {t}), kExact, [=](InputMaker& in) {
                       return std::vector<Tensor>{clamp(in.make(t, {29}), -1, 2), clamp(in.make(t, {29}), 3, 200),
                                                  clamp(in.make(t, {4, 5}), in.make(t, {5}), in.make(t, {4, 1})),
                                                  clamp(in.make(t, {6}), -0.5, 1.5),
                                                  clamp(in.make(t, {}), in.make(t, {3}), 2)};
                     }});
  }
  runCases(cases);
}

TEST(OpDifferential, Cast) {
  std::vector<Case> cases;
  for (DType from : kAllTypes) {
    for (DType to : kAllTypes) {
      // A cast to the same dtype records nothing: no trace to compile.
      cases.push_back({nameOf("cast", {from, to}), kExact,
                       [=](InputMaker& in) {
                         return std::vector<Tensor>{cast(in.make(from, {97}), to),
                                                    cast(in.make(from, {5, 4}, Values::Plain, Layout::Transposed), to),
                                                    cast(in.make(from, {}), to)};
                       },
                       /*mayStayInterpreted=*/from == to});
    }
  }
  runCases(cases);
}

// Element loops whose length the vector lanes divide (16 with AVX-512, 8
// with AVX2) are written as vector loops before LLVM
// (kiln-cpu-vectorize-parallel-loops), which the small shapes above never
// reach: rows of 32, 64 and 256 elements, a row operand and a per-row column
// broadcast, a loop over the middle axis of [2, 48, 1] (trailing size-1
// axis), long chains (wider vectors where the annotation interleaves),
// casts between every pair of dtypes, comparisons into where, and arange
// (the loop's index as a value).
TEST(OpDifferential, VectorLoops) {
  std::vector<Case> cases;
  for (const UnaryOp& op : kUnaryOps) {
    for (DType t : kAllTypes) {
      auto fn = op.fn;
      Values v = op.values;
      // Rounding an integer records nothing: no trace to compile.
      const bool integer = t != DType::f32 && t != DType::f64 && !isHalf(t);
      cases.push_back({nameOf(op.name, {t}, " vector rows"), op.bound,
                       [=](InputMaker& in) {
                         return std::vector<Tensor>{fn(in.make(t, {3, 64}, v)), fn(in.make(t, {2, 48, 1}, v)),
                                                    fn(in.make(t, {256}, v))};
                       },
                       /*mayStayInterpreted=*/integer});
    }
  }
  for (const BinaryOp& op : kBinaryOps) {
    auto fn = op.fn;
    Values v = op.values;
    for (DType t : kAllTypes) {
      cases.push_back({nameOf(op.name, {t}, " vector rows"), op.bound, [=](InputMaker& in) {
                         return std::vector<Tensor>{
                             fn(in.make(t, {4, 32}, v), in.make(t, {4, 32}, v)),
                             fn(in.make(t, {4, 32}, v), in.make(t, {32}, v)),
                             fn(in.make(t, {3, 64}, v), in.make(t, {3, 1}, v)),
                             fn(in.make(t, {2, 48, 1}, v), in.make(t, {2, 48, 1}, v)),
                             fn(in.make(t, {2, 32}, v), 3),
                         };
                       }});
    }
  }
  for (DType from : kAllTypes)
    for (DType to : kAllTypes)
      if (from != to)
        cases.push_back({nameOf("cast", {from, to}, " vector rows"), kExact, [=](InputMaker& in) {
                           return std::vector<Tensor>{cast(in.make(from, {2, 64}), to),
                                                      cast(in.make(from, {2, 16, 1}), to)};
                         }});
  for (DType t : kFloatTypes) {
    cases.push_back({nameOf("long chain", {t}, " vector rows"), kComposite, [=](InputMaker& in) {
                       Tensor x = in.make(t, {2, 256}, Values::Plain);
                       Tensor y = tanh(add(mul(x, 1.5), 0.5));
                       return std::vector<Tensor>{add(mul(y, sigmoid(x)), mul(x, x)),
                                                  where(gt(x, in.make(t, {256}, Values::Plain)), exp(x), neg(x))};
                     }});
    cases.push_back({nameOf("arange", {t}, " vector rows"), kExact, [=](InputMaker& in) {
                       Tensor x = in.make(t, {4, 64}, Values::Plain);
                       return std::vector<Tensor>{add(x, arange(0, 64, 1, t)), mul(x, arange(0, 64, 1, t))};
                     }});
  }
  runCases(cases);
}

// ---- reductions ----------------------------------------------------------------

TEST(OpDifferential, Reductions) {
  using ReduceFn = Tensor (*)(const Tensor&, const std::vector<int>&, bool);
  struct ReduceOp {
    const char* name;
    ReduceFn fn;
    Bound bound;
    Values values;
  };
  const ReduceOp ops[] = {{"sum", sum, kSummed, Values::Mixed},  {"sum plain", sum, kSummed, Values::Plain},
                          {"mean", mean, kSummed, Values::Plain}, {"max", max, kExact, Values::Mixed},
                          {"min", min, kExact, Values::Mixed},    {"prod", prod, kSummed, Values::Near1},
                          {"prod mixed", prod, kSummed, Values::Mixed}};
  std::vector<Case> cases;
  for (const ReduceOp& op : ops) {
    for (DType t : kAllTypes) {
      ReduceFn fn = op.fn;
      Values v = op.values;
      cases.push_back({nameOf(op.name, {t}), op.bound, [=](InputMaker& in) {
                         Tensor x = in.make(t, {3, 4, 5}, v);
                         return std::vector<Tensor>{fn(x, {}, false),
                                                    fn(x, {0}, true),
                                                    fn(x, {-1}, false),
                                                    fn(x, {0, 2}, false),
                                                    fn(x, {1}, true),
                                                    fn(in.make(t, {}, v), {}, false),
                                                    fn(in.make(t, {7}, v), {0}, true),
                                                    fn(in.make(t, {4, 6}, v, Layout::Transposed), {1}, false),
                                                    fn(transpose(in.make(t, {2, 5}, v)), {0}, false)};
                       }});
    }
  }
  // cumsum: the same additions in the same order in both tiers (the
  // compiled kernel calls the interpreter's running sum): bit-exact.
  for (DType t : kAllTypes) {
    cases.push_back({nameOf("cumsum", {t}), kExact, [=](InputMaker& in) {
                       Tensor x = in.make(t, {3, 4, 5});
                       return std::vector<Tensor>{cumsum(x, 0), cumsum(x, 1), cumsum(x, -1),
                                                  cumsum(in.make(t, {}), 0), cumsum(in.make(t, {9}), 0),
                                                  cumsum(in.make(t, {4, 6}, Values::Mixed, Layout::Transposed), 1),
                                                  cumsum(add(x, x), 2)};
                     }});
  }
  for (bool isMax : {true, false}) {
    for (bool last : {false, true}) {
      for (DType t : kAllTypes) {
        for (Values v : {Values::Ties, Values::Mixed}) {
          std::string extra = std::string(v == Values::Ties ? " ties" : "") + (last ? " last index" : "");
          cases.push_back({nameOf(isMax ? "argmax" : "argmin", {t}, extra.c_str()), kExact, [=](InputMaker& in) {
                             auto f = [&](const Tensor& x, int axis, bool keepdim) {
                               return isMax ? argmax(x, axis, keepdim, last) : argmin(x, axis, keepdim, last);
                             };
                             Tensor x = in.make(t, {3, 4, 5}, v);
                             return std::vector<Tensor>{f(x, 0, false),      f(x, -1, true),
                                                        f(x, 1, false),      f(in.make(t, {11}, v), 0, false),
                                                        f(in.make(t, {}, v), 0, true),
                                                        f(in.make(t, {4, 6}, v, Layout::Transposed), 1, false)};
                           }});
        }
      }
    }
  }
  runCases(cases);
}

// ---- matmul ----------------------------------------------------------------------

TEST(OpDifferential, Matmul) {
  std::vector<Case> cases;
  for (DType t : kAllTypes) {
    Values v = is_floating(t) ? Values::Plain : Values::Mixed;
    cases.push_back({nameOf("matmul", {t}), kMatmul, [=](InputMaker& in) {
                       return std::vector<Tensor>{
                           matmul(in.make(t, {3, 4}, v), in.make(t, {4, 5}, v)),
                           matmul(in.make(t, {4}, v), in.make(t, {4, 5}, v)),
                           matmul(in.make(t, {3, 4}, v), in.make(t, {4}, v)),
                           matmul(in.make(t, {6}, v), in.make(t, {6}, v)),
                           matmul(in.make(t, {2, 3, 4}, v), in.make(t, {4, 5}, v)),
                           matmul(in.make(t, {2, 1, 3, 4}, v), in.make(t, {5, 4, 2}, v)),
                           matmul(in.make(t, {3}, v), in.make(t, {2, 3, 2}, v)),
                           matmul(in.make(t, {5, 7}, v, Layout::Transposed), in.make(t, {7, 3}, v, Layout::Strided)),
                           matmul(transpose(in.make(t, {4, 3}, v)), in.make(t, {1, 4, 2}, v)),
                           matmul(in.make(t, {17, 33}, v), in.make(t, {33, 9}, v)),
                       };
                     }});
  }
  // The compiled batched GEMM's two shortcuts: many small products run one
  // per thread (attention heads), and a weight shared by every batch makes
  // one GEMM of the stacked rows.
  cases.push_back({"matmul f32 batches", kMatmul, [](InputMaker& in) {
                     const DType f = DType::f32;
                     return std::vector<Tensor>{
                         matmul(in.make(f, {32, 16, 8}), in.make(f, {32, 8, 16})),
                         matmul(in.make(f, {8, 64, 128}), in.make(f, {128, 40})),
                         matmul(in.make(f, {3, 5, 64, 32}), in.make(f, {32, 24}, Values::Plain, Layout::Transposed)),
                     };
                   }});
  cases.push_back({"matmul f32 i32", kMatmul, [](InputMaker& in) {
                     return std::vector<Tensor>{matmul(in.make(DType::f32, {3, 4}, Values::Plain), in.make(DType::i32, {4, 2}, Values::Plain))};
                   }});
  runCases(cases);
}

// ---- shape and index ops ------------------------------------------------------

TEST(OpDifferential, ShapeOps) {
  std::vector<Case> cases;
  for (DType t : kAllTypes) {
    cases.push_back({nameOf("reshape/permute/broadcast", {t}), kExact, [=](InputMaker& in) {
                       return std::vector<Tensor>{
                           // a reshape of a computed value
                           reshape(where(in.make(DType::boolean, {3, 4}), in.make(t, {3, 4}), in.make(t, {4})), {2, -1}),
                           reshape(in.make(t, {4, 6}, Values::Mixed, Layout::Transposed), {3, 8}),
                           concat({reshape(in.make(t, {}), {1, 1}), in.make(t, {2, 1})}, 0),
                           transpose(in.make(t, {2, 3, 4}), 0, 2),
                           permute(in.make(t, {2, 3, 4}), {1, 2, 0}),
                           broadcast_to(in.make(t, {3, 1}), {2, 3, 5}),
                           broadcast_to(in.make(t, {}), {4}),
                           squeeze(in.make(t, {1, 3, 1, 2}), {}),
                           squeeze(in.make(t, {1, 3, 1}), {2}),
                           unsqueeze(in.make(t, {3, 2}), 1),
                           unsqueeze(in.make(t, {}), 0),
                       };
                     }});
    cases.push_back({nameOf("slice", {t}), kExact, [=](InputMaker& in) {
                       Tensor x = in.make(t, {7, 9});
                       return std::vector<Tensor>{
                           slice(x, 0, 1, 6, 2),           slice(x, 1, -5, 100, 3),
                           slice(x, -1, 0, 9, 4),          slice(slice(x, 0, 1, 7, 2), 1, 2, 8, 2),
                           slice(in.make(t, {5, 6}, Values::Mixed, Layout::Transposed), 1, 1, 5, 2),
                           slice(in.make(t, {10}), 0, 3, 4), slice(x, 0, -2, 7),
                           // Negative steps (reversed, through index_select).
                           slice(x, 1, -1, INT64_MIN, -1), slice(x, 0, 6, 1, -2),
                           flip(in.make(t, {4, 6}, Values::Mixed, Layout::Transposed), {0, 1}),
                       };
                     }});
    cases.push_back({nameOf("concat", {t}), kExact, [=](InputMaker& in) {
                       return std::vector<Tensor>{
                           concat({in.make(t, {2, 3}), in.make(t, {1, 3}), in.make(t, {4, 3})}, 0),
                           concat({in.make(t, {2, 3}), in.make(t, {2, 5}, Values::Mixed, Layout::Transposed)}, -1),
                           concat({in.make(t, {3}), in.make(t, {3})}, 0),
                           concat({transpose(in.make(t, {3, 2})), slice(in.make(t, {2, 8}), 1, 0, 8, 3)}, 1),
                       };
                     }});
  }
  cases.push_back({"concat mixed i8 f16", kExact, [](InputMaker& in) {
                     return std::vector<Tensor>{concat({in.make(DType::i8, {2, 3}), in.make(DType::f16, {1, 3})}, 0)};
                   }});
  runCases(cases);
}

// The compiled index_add starts from a copy of its input: with x's last use
// in the trace the index_add, a kernel that wrote its result into x's
// buffer changed the caller's x (found in review).
TEST(OpDifferential, IndexAddNeverWritesItsInput) {
  JitScope m(JitMode::Sync, 1);
  Tensor w = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor idx = from_vector<int64_t>({2, 0}, {2});
  Tensor s = from_vector<float>({10, 20, 30, 40}, {2, 2});
  const Stats before = stats();
  for (int run = 0; run < 3; ++run) {
    EXPECT_EQ(index_add(w, 0, idx, s).to_vector<float>(), (std::vector<float>{31, 42, 3, 4, 15, 26})) << run;
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6})) << run;
  }
  EXPECT_GE(stats().compiled_runs, before.compiled_runs + 2) << "the index_add ran compiled";
}

TEST(OpDifferential, ScatterAddNeverWritesItsInput) {
  JitScope m(JitMode::Sync, 1);
  Tensor w = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor idx = from_vector<int64_t>({2, 2, 0, 1}, {2, 2});
  Tensor s = from_vector<float>({10, 20, 30, 40}, {2, 2});
  const Stats before = stats();
  for (int run = 0; run < 3; ++run) {
    EXPECT_EQ(scatter_add(w, 1, idx, s).to_vector<float>(), (std::vector<float>{1, 2, 33, 34, 45, 6})) << run;
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6})) << run;
  }
  EXPECT_GE(stats().compiled_runs, before.compiled_runs + 2) << "the scatter_add ran compiled";
}

TEST(OpDifferential, IndexOps) {
  std::vector<Case> cases;
  for (DType t : kAllTypes) {
    for (DType it : kIntTypes) {
      cases.push_back({nameOf("index_select", {t, it}), kExact, [=](InputMaker& in) {
                         Tensor x = in.make(t, {5, 4, 3});
                         return std::vector<Tensor>{
                             index_select(x, 0, in.index(it, {7}, 5)),
                             index_select(x, 1, in.index(it, {2, 3}, 4)),
                             index_select(x, -1, in.index(it, {}, 3)),
                             index_select(in.make(t, {6, 4}, Values::Mixed, Layout::Transposed), 1, in.index(it, {5}, 4)),
                             index_select(in.make(t, {6}), 0, in.index(it, {3, 2}, 6)),
                         };
                       }});
      cases.push_back({nameOf("gather", {t, it}), kExact, [=](InputMaker& in) {
                         Tensor x = in.make(t, {4, 5});
                         return std::vector<Tensor>{
                             gather(x, 1, in.index(it, {4, 7}, 5)),
                             gather(x, 0, in.index(it, {2, 5}, 4)),
                             gather(in.make(t, {3, 4, 2}), 1, in.index(it, {3, 2, 2}, 4)),
                             gather(in.make(t, {6}), 0, in.index(it, {9}, 6)),
                             gather(in.make(t, {5, 3}, Values::Mixed, Layout::Strided), -1, in.index(it, {5, 1}, 3)),
                         };
                       }});
    }
  }
  // index_add: duplicate indices (more than rows), every axis, strided and
  // transposed operands, none at all.
  for (DType t : kAllTypes) {
    if (t == DType::boolean) continue;
    for (DType it : kIntTypes) {
      cases.push_back({nameOf("index_add", {t, it}), kExact, [=](InputMaker& in) {
                         Tensor x = in.make(t, {5, 4, 3});
                         return std::vector<Tensor>{
                             index_add(x, 0, in.index(it, {9}, 5), in.make(t, {9, 4, 3})),
                             index_add(x, 1, in.index(it, {6}, 4), in.make(t, {5, 6, 3}, Values::Mixed, Layout::Strided)),
                             index_add(x, -1, in.index(it, {2}, 3), in.make(t, {5, 4, 2})),
                             index_add(in.make(t, {6, 4}, Values::Mixed, Layout::Transposed), 1, in.index(it, {5}, 4),
                                       in.make(t, {6, 5}, Values::Mixed, Layout::Transposed)),
                             index_add(in.make(t, {7}), 0, in.index(it, {12}, 7), in.make(t, {12})),
                         };
                       }});
    }
  }
  // scatter_add: duplicate positions, every axis, an index smaller than x
  // off the axis, strided and transposed operands.
  for (DType t : kAllTypes) {
    if (t == DType::boolean) continue;
    for (DType it : kIntTypes) {
      cases.push_back({nameOf("scatter_add", {t, it}), kExact, [=](InputMaker& in) {
                         Tensor x = in.make(t, {5, 4, 3});
                         return std::vector<Tensor>{
                             scatter_add(x, 0, in.index(it, {9, 4, 3}, 5), in.make(t, {9, 4, 3})),
                             scatter_add(x, 1, in.index(it, {3, 6, 2}, 4),
                                         in.make(t, {3, 6, 2}, Values::Mixed, Layout::Strided)),
                             scatter_add(x, -1, in.index(it, {5, 4, 2}, 3), in.make(t, {5, 4, 2})),
                             scatter_add(in.make(t, {6, 4}, Values::Mixed, Layout::Transposed), 1,
                                         in.index(it, {6, 5}, 4), in.make(t, {6, 5}, Values::Mixed, Layout::Transposed)),
                             scatter_add(in.make(t, {7}), 0, in.index(it, {12}, 7), in.make(t, {12})),
                             scatter_add(in.make(t, {2, 3, 4, 5}), 2, in.index(it, {2, 2, 6, 5}, 4),
                                         in.make(t, {2, 2, 6, 5})),
                             // The index through a permute: still the parameter's values.
                             scatter_add(in.make(t, {4, 5}), 1, permute(in.index(it, {3, 4}, 5), {1, 0}),
                                         in.make(t, {4, 3})),
                         };
                       }});
    }
  }
  for (DType it : kIntTypes) {
    for (DType t : kAllTypes) {
      cases.push_back({nameOf("one_hot", {it, t}), kExact, [=](InputMaker& in) {
                         return std::vector<Tensor>{one_hot(in.index(it, {6}, 4), 4, t),
                                                    one_hot(in.index(it, {2, 3}, 5), 5, t),
                                                    one_hot(in.index(it, {}, 3), 3, t)};
                       }});
    }
  }
  runCases(cases);
}

// ---- one-pass row kernels ---------------------------------------------------------

/// Rows of +0, -0 and negative values, some all -0, some with one +0, and
/// their mirror image (-x): the max (min) of a row is a zero whose sign the
/// order of the elements must not decide.
Tensor signedZeroRows(DType t, int64_t rows, int64_t cols) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t h = (r * 7 + c * 13) % 5;
      float x = h == 0 ? -1.5f : -0.0f;
      if (r % 3 == 1 && c == (r * 5) % cols) x = 0.0f;  // one +0, anywhere in the row
      if (r % 3 == 2 && c % 4 == 1) x = 0.0f;           // several
      v[static_cast<size_t>(r * cols + c)] = x;
    }
  Tensor x = from_vector(v, {rows, cols});
  Tensor both = concat({x, neg(x)}, 0);
  return t == DType::f32 ? both : cast(both, t);
}

/// Rows of finite values with one NaN each, at a column that moves with the
/// row over the whole row (every vector lane, the interleaved accumulators
/// and the tail), but for every fourth row, which has none; and a row of
/// -inf and one of +inf (last). The compiled max and min keep NaN out of the loop's
/// vectors and put it back after (X86VectorIdioms.h): each place a NaN
/// can be met must still give NaN.
Tensor oneNaNRows(DType t, int64_t rows, int64_t cols) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float x = static_cast<float>((r * 31 + c * 17) % 23) * 0.25f - 2.5f;
      if (r % 4 != 3 && c == (r * 37 + 11) % cols) x = NAN;
      if (r == rows - 2) x = -INFINITY;
      if (r == rows - 1) x = INFINITY;
      v[static_cast<size_t>(r * cols + c)] = x;
    }
  Tensor x = from_vector(v, {rows, cols});
  return t == DType::f32 ? x : cast(x, t);
}

// Softmax and layer_norm rows run as one parallel loop whose temporaries are
// row buffers on the stack, with vectorised IEEE max/min: rows longer than a
// vector with tails, enough rows to run in parallel, special values (NaN and
// infinite rows), signed zeros, empty dimensions and rows long enough that
// the next row is prefetched.
TEST(OpDifferential, RowKernels) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    cases.push_back({nameOf("softmax rows", {t}), kComposite, [=](InputMaker& in) {
                       return std::vector<Tensor>{softmax(in.make(t, {256, 300}, Values::Plain)),
                                                  softmax(in.make(t, {24, 70})), softmax(in.make(t, {40, 6})),
                                                  log_softmax(in.make(t, {64, 33})),
                                                  // rows of >= 1 KiB: the next row prefetched (NextRowPrefetch.h)
                                                  softmax(in.make(t, {40, 1030})), log_softmax(in.make(t, {9, 1100})),
                                                  softmax(oneNaNRows(t, 90, 300)), log_softmax(oneNaNRows(t, 20, 1030))};
                     }});
    cases.push_back({nameOf("layer_norm rows", {t}), kComposite, [=](InputMaker& in) {
                       return std::vector<Tensor>{layer_norm(in.make(t, {256, 300}, Values::Plain)),
                                                  layer_norm(in.make(t, {33, 1040})),
                                                  layer_norm(in.make(t, {40, 6})),
                                                  layer_norm(in.make(t, {24, 70}, Values::Plain),
                                                             in.make(t, {70}, Values::Plain),
                                                             in.make(t, {70}, Values::Plain))};
                     }});
    cases.push_back({nameOf("max/min rows", {t}), kExactSigned, [=](InputMaker& in) {
                       Tensor x = in.make(t, {33, 70});
                       Tensor z = signedZeroRows(t, 12, 37);
                       Tensor n = oneNaNRows(t, 90, 300), m = oneNaNRows(t, 33, 83);
                       return std::vector<Tensor>{max(x, {1}), min(x, {1}, true), max(x, {0}), max(z, {1}),
                                                  min(z, {1}), max(z, {0}),       min(z),      max(n, {1}),
                                                  min(n, {1}), max(n, {0}),       max(m, {1}), min(m)};
                     }});
    cases.push_back({nameOf("softmax/layer_norm empty", {t}), kComposite,
                     [=](InputMaker& in) {
                       // (softmax over an empty axis is rejected: an empty set has no maximum)
                       return std::vector<Tensor>{softmax(in.make(t, {0, 5})), softmax(in.make(t, {3, 0}), 0),
                                                  layer_norm(in.make(t, {0, 8})), layer_norm(in.make(t, {4, 0, 3})),
                                                  max(in.make(t, {0, 4}), {1})};
                     },
                     /*mayStayInterpreted=*/true});
  }
  runCases(cases);
}

// ---- nn composites ---------------------------------------------------------------

TEST(OpDifferential, NnComposites) {
  std::vector<Case> cases;
  for (DType t : kAllTypes) {
    cases.push_back({nameOf("softmax/log_softmax", {t}), kComposite, [=](InputMaker& in) {
                       Tensor x = in.make(t, {4, 7}, Values::Plain);
                       return std::vector<Tensor>{softmax(x),
                                                  softmax(x, 0),
                                                  log_softmax(x),
                                                  log_softmax(in.make(t, {2, 3, 5}, Values::Plain), 1),
                                                  softmax(in.make(t, {}, Values::Plain)),
                                                  softmax(in.make(t, {6, 5}, Values::Plain, Layout::Transposed))};
                     }});
    cases.push_back({nameOf("layer_norm", {t}), kComposite, [=](InputMaker& in) {
                       DType wt = is_floating(t) ? t : DType::f32;
                       return std::vector<Tensor>{
                           layer_norm(in.make(t, {4, 8}, Values::Plain)),
                           layer_norm(in.make(t, {3, 2, 6}, Values::Plain), in.make(wt, {2, 6}, Values::Plain),
                                      in.make(wt, {2, 6}, Values::Plain)),
                           layer_norm(in.make(t, {5, 4}, Values::Plain, Layout::Transposed), in.make(wt, {4}, Values::Plain)),
                       };
                     }});
  }
  for (DType t : kFloatTypes) {
    for (DType it : kIntTypes) {
      cases.push_back({nameOf("cross_entropy", {t, it}), kComposite, [=](InputMaker& in) {
                         return std::vector<Tensor>{cross_entropy(in.make(t, {6, 5}, Values::Plain), in.index(it, {6}, 5))};
                       }});
    }
  }
  runCases(cases);
}

// ---- convolution and pooling ----------------------------------------------------------

Conv2dOptions convOptions(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                          int64_t groups, Layout2d layout = Layout2d::NCHW) {
  Conv2dOptions o;
  o.stride = std::move(stride);
  o.padding = std::move(padding);
  o.dilation = std::move(dilation);
  o.groups = groups;
  o.layout = layout;
  return o;
}

TEST(OpDifferential, ConvAndPooling) {
  std::vector<Case> cases;
  for (DType t : kFloatTypes) {
    const Values v = Values::Plain;
    cases.push_back({nameOf("conv2d", {t}), kComposite, [=](InputMaker& in) {
                       return std::vector<Tensor>{
                           conv2d(in.make(t, {2, 3, 7, 6}, v), in.make(t, {4, 3, 3, 3}, v), in.make(t, {4}, v),
                                  convOptions({1}, {1}, {1}, 1)),
                           conv2d(in.make(t, {1, 4, 9, 8}, v), in.make(t, {6, 2, 3, 2}, v), {},
                                  convOptions({2, 3}, {1, 0, 2, 1}, {2, 1}, 2)),
                           conv2d(in.make(t, {2, 5, 6, 3}, v, Layout::Transposed), in.make(t, {5, 1, 3, 3}, v), {},
                                  convOptions({1}, {1}, {1}, 5)),
                           conv2d(in.make(t, {3, 8, 5, 5}, v), in.make(t, {16, 8, 1, 1}, v, Layout::Strided),
                                  in.make(t, {16}, v), convOptions({1}, {0}, {1}, 1)),
                           conv2d(in.make(t, {2, 6, 5, 4}, v), in.make(t, {3, 4, 2, 2}, v), {},
                                  convOptions({1}, {0}, {1}, 1, Layout2d::NHWC)),
                           conv2d(in.make(t, {2, 16, 12, 12}, v), in.make(t, {16, 16, 3, 3}, v), {},
                                  convOptions({2}, {1}, {1}, 1)),
                       };
                     }});
    cases.push_back({nameOf("conv2d relu bias", {t}), kComposite, [=](InputMaker& in) {
                       // conv + bias + relu: the epilogue a compiled conv fuses.
                       Tensor y = conv2d(in.make(t, {2, 3, 6, 6}, v), in.make(t, {5, 3, 3, 3}, v), in.make(t, {5}, v),
                                         convOptions({1}, {1}, {1}, 1));
                       return std::vector<Tensor>{relu(y), conv2d(relu(y), in.make(t, {2, 5, 1, 1}, v))};
                     }});
    cases.push_back({nameOf("conv2d empty batch", {t}), kComposite,
                     [=](InputMaker& in) {
                       return std::vector<Tensor>{conv2d(in.make(t, {0, 3, 5, 5}, v), in.make(t, {2, 3, 3, 3}, v))};
                     },
                     /*mayStayInterpreted=*/true});
    if (!isHalf(t))
      cases.push_back({nameOf("conv2d gradients", {t}), kComposite, [=](InputMaker& in) {
                         // A training step's backward: the input and weight
                         // gradients are convolutions too (strided, grouped).
                         Tensor x = in.make(t, {2, 4, 9, 8}, v).requires_grad();
                         Tensor w = in.make(t, {6, 2, 3, 3}, v).requires_grad();
                         Tensor b = in.make(t, {6}, v).requires_grad();
                         Tensor y = conv2d(x, w, b, convOptions({2, 1}, {1, 0, 1, 2}, {1, 2}, 2));
                         Tensor loss = sum(mul(relu(y), in.make(t, y.shape(), v)));
                         return grad(loss, {x, w, b});
                       }});
    cases.push_back({nameOf("max_pool2d/avg_pool2d", {t}), kComposite, [=](InputMaker& in) {
                       Pool2dOptions a;
                       a.kernel = {3};
                       a.stride = {2};
                       a.padding = {1};
                       Pool2dOptions b;
                       b.kernel = {2, 3};
                       b.stride = {2, 1};
                       b.padding = {0, 1, 1, 1};
                       b.ceil_mode = true;
                       b.count_include_pad = true;
                       Pool2dOptions c = a;
                       c.dilation = {2, 1};
                       c.layout = Layout2d::NHWC;
                       Tensor x = in.make(t, {2, 3, 9, 7}, Values::Mixed);
                       return std::vector<Tensor>{max_pool2d(x, a), avg_pool2d(in.make(t, {2, 3, 9, 7}, v), a),
                                                  max_pool2d(x, b), avg_pool2d(in.make(t, {1, 2, 5, 6}, v), b),
                                                  max_pool2d(in.make(t, {2, 7, 6, 3}, v), c)};
                     }});
    cases.push_back({nameOf("adaptive_avg_pool2d", {t}), kComposite, [=](InputMaker& in) {
                       Tensor x = in.make(t, {2, 3, 7, 6}, v);
                       return std::vector<Tensor>{adaptive_avg_pool2d(x, 1, 1), adaptive_avg_pool2d(x, 7, 3),
                                                  adaptive_avg_pool2d(x, 3, 4)};
                     }});
    cases.push_back({nameOf("batch_norm", {t}), kComposite, [=](InputMaker& in) {
                       Tensor x = in.make(t, {4, 3, 5, 5}, v);
                       BatchNormResult train = batch_norm(x, in.make(t, {3}, v), in.make(t, {3}, v),
                                                          in.make(t, {3}, v), in.make(t, {3}, Values::Positive), true);
                       BatchNormResult infer = batch_norm(x, in.make(t, {3}, v), {}, in.make(t, {3}, v),
                                                          in.make(t, {3}, Values::Positive), false);
                       return std::vector<Tensor>{train.y, train.running_mean, train.running_var, infer.y};
                     }});
  }
  runCases(cases);
}

// ---- creation ----------------------------------------------------------------------

TEST(OpDifferential, Creation) {
  std::vector<Case> cases;
  for (DType t : kAllTypes) {
    cases.push_back({nameOf("arange/full", {t}), kExact, [=](InputMaker&) {
                       return std::vector<Tensor>{
                           arange(0, 10, 1, t),          arange(-3.5, 7, 0.75, t), arange(5, -5, -1.5, t),
                           arange(0, 300, 7, t),         arange(int64_t{9}, t),    full({3, 2}, 2.5, t),
                           full({}, -7, t),              full({4}, 1e10, t),       full({2, 2}, true, t),
                           zeros({3}, t),                ones({2, 3}, t),          scalar_tensor(300, t),
                       };
                     }});
    cases.push_back({nameOf("arange/full in compute", {t}), kExact, [=](InputMaker& in) {
                       Tensor x = in.make(t, {6});
                       Tensor c = in.make(DType::boolean, {6});
                       return std::vector<Tensor>{where(c, x, arange(0, 6, 1, t)), where(c, full({2, 1}, 3, t), x)};
                     }});
  }
  for (DType t : kAllTypes) {
    cases.push_back({nameOf("rand", {t}), kExact, [=](InputMaker&) {
                       return std::vector<Tensor>{rand({4, 5}, 42, t), rand({}, 7, t), rand({3, 2, 2}, 99, t, -2, 3),
                                                  rand({1000}, 1234567, t)};
                     }});
    cases.push_back({nameOf("randn", {t}), t == DType::f64 ? kTranscendental : kExact, [=](InputMaker&) {
                       return std::vector<Tensor>{randn({4, 5}, 42, t), randn({}, 7, t), randn({3, 2, 2}, 99, t, 1, 0.5),
                                                  randn({1000}, 1234567, t)};
                     }});
  }
  runCases(cases);
}

// ---- collectives ---------------------------------------------------------------

// One process (no mpirun: the single-process communicator), CPU tensors (the
// MPI backend takes host memory); test/dist runs them on two ranks against
// a reference. Here: the regions around them compiled, the values unchanged.
TEST(OpDifferential, Collectives) {
  dist::init();
  std::vector<Case> cases;
  for (DType t : kAllTypes) {
    const bool numeric = t != DType::boolean;
    cases.push_back({nameOf("collectives", {t}), kExact, [=](InputMaker& in) {
                       Tensor x = in.make(t, {4, 3}).to(Device::cpu());
                       Tensor y = in.make(t, {2, 5}, Values::Mixed, Layout::Transposed).to(Device::cpu());
                       Tensor xx = concat({x, x}, 0), yy = concat({y, y}, 1);
                       std::vector<Tensor> outs = {concat({dist::broadcast(xx, 0), x}, 0),
                                                   concat({dist::all_gather(yy), yy}, 0)};
                       if (numeric) {
                         outs.push_back(concat({dist::all_reduce(xx, dist::ReduceOp::sum), xx}, 1));
                         outs.push_back(concat({dist::all_reduce(xx, dist::ReduceOp::max), xx}, 1));
                         outs.push_back(concat({dist::reduce_scatter(yy, dist::ReduceOp::sum), yy}, 0));
                       }
                       if (is_floating(t)) outs.push_back(concat({dist::all_reduce(xx, dist::ReduceOp::mean), xx}, 0));
                       return outs;
                     },
                     false, true});
  }
  runCases(cases);
}

// Last in the file (GoogleTest runs a file's tests in order): every op
// kind of the op table (include/kiln/op_table.def) was recorded by some
// program above, so a new op without a differential entry fails here.
TEST(OpDifferential, EveryOpKindIsCompared) {
  if (::testing::GTEST_FLAG(filter) != "*") GTEST_SKIP() << "needs every test of this file to run first";
  for (int i = 0; i < core::kNumOpKinds; ++i) {
    const std::string name(core::opName(static_cast<core::OpKind>(i)));
    EXPECT_TRUE(recordedOps().count(name)) << "no program of this file records " << name
                                           << "; add a case for it";
  }
}

}  // namespace
}  // namespace kiln
