// Shared helpers of the op conformance tests: a reference tensor (shape +
// doubles, row-major), reference shape/broadcast/promotion rules written
// independently of the library, seeded random shapes and inputs (including
// non-contiguous views), and comparison with per-dtype tolerances.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/runtime.h"
#include "kiln/shape.h"
#include "kiln/tensor.h"

namespace kt {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using Dims = std::vector<int64_t>;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInff = std::numeric_limits<float>::infinity();

// ---- dtypes -------------------------------------------------------------------

inline const std::vector<DType> kAllTypes = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64,
                                             DType::i32, DType::i8,  DType::u8,  DType::boolean};
inline const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};
inline const std::vector<DType> kIntTypes = {DType::i64, DType::i32, DType::i8, DType::u8};
inline const std::vector<DType> kNumericTypes = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                                 DType::i64, DType::i32, DType::i8,  DType::u8};

/// got and want (floating tensors, compared as f32) bit for bit, any NaN
/// matching any NaN (Kiln's ops keep NaN, not its payload).
inline void expectSameTensorBits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const std::vector<float> g = got.to_vector<float>(), e = want.to_vector<float>();
  ASSERT_EQ(g.size(), e.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(e[i])) EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i;
    else EXPECT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(e[i])) << what << " at " << i;
  }
}

inline std::string tname(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

inline bool isFloat(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
inline bool isInt(DType t) { return t == DType::i64 || t == DType::i32 || t == DType::i8 || t == DType::u8; }
inline bool isBool(DType t) { return t == DType::boolean; }
/// 0 bool, 1 integer, 2 floating.
inline int category(DType t) { return isFloat(t) ? 2 : isInt(t) ? 1 : 0; }
inline int width(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
    case DType::i8:
    case DType::u8: return 1;
    case DType::f32:
    case DType::i32: return 2;
    case DType::f64:
    case DType::i64: return 3;
    default: return 0;
  }
}

/// Reference of promote_types (dtype.h), written independently.
inline DType refPromote(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (isFloat(a)) {
    if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) return DType::f32;
  } else if (isInt(a)) {
    if ((a == DType::i8 && b == DType::u8) || (a == DType::u8 && b == DType::i8)) return DType::i32;
  }
  return width(a) >= width(b) ? a : b;
}

/// An operand for the promotion reference: prio 2 = tensor of rank >= 1,
/// 1 = rank-0 tensor, 0 = C++ scalar (dt then is the category default:
/// f32 for floating, i64 for integral, bool for bool).
struct Opd {
  DType dt;
  int prio;
};
inline Opd tensorOpd(DType dt, int rank) { return {dt, rank == 0 ? 1 : 2}; }
inline Opd scalarOpd(const kiln::Scalar& s) {
  switch (s.kind()) {
    case kiln::Scalar::Kind::Bool: return {DType::boolean, 0};
    case kiln::Scalar::Kind::Integral: return {DType::i64, 0};
    case kiln::Scalar::Kind::Floating: return {DType::f32, 0};
  }
  return {DType::f32, 0};
}
/// ops.h's mixed-priority rule.
inline DType resultType(Opd a, Opd b) {
  if (a.prio == b.prio) return refPromote(a.dt, b.dt);
  const Opd& hi = a.prio > b.prio ? a : b;
  const Opd& lo = a.prio > b.prio ? b : a;
  if (category(lo.dt) > category(hi.dt)) return refPromote(hi.dt, lo.dt);
  return hi.dt;
}

/// Rounds to a binary float format with `p` significand bits (implicit bit
/// included), minimum normal exponent emin and maximum exponent emax, to
/// nearest even, overflowing to infinity.
inline double roundToFormat(double x, int p, int emin, int emax) {
  if (!std::isfinite(x) || x == 0) return x;
  double a = std::fabs(x);
  int e = 0;
  std::frexp(a, &e);
  int ex = std::max(e - 1, emin);
  double ulp = std::ldexp(1.0, ex - (p - 1));
  double q = std::nearbyint(a / ulp) * ulp;
  if (q >= std::ldexp(1.0, emax + 1)) return std::copysign(kInf, x);
  return std::copysign(q, x);
}
inline double toF16(double x) { return roundToFormat(x, 11, -14, 15); }
inline double toBF16(double x) { return roundToFormat(x, 8, -126, 127); }

/// The value `v` converted to dtype `t` the way C++ casts do (integers wrap
/// modulo 2^n, floats truncate toward zero when going to an integer type,
/// bool is v != 0). Float-to-int inputs must be in range.
inline double castTo(double v, DType t) {
  switch (t) {
    case DType::f64: return v;
    case DType::f32: return static_cast<double>(static_cast<float>(v));
    case DType::f16: return toF16(v);
    case DType::bf16: return toBF16(v);
    case DType::i64: return static_cast<double>(static_cast<int64_t>(v));
    case DType::i32: return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(v)));
    case DType::i8: return static_cast<double>(static_cast<int8_t>(static_cast<int64_t>(v)));
    case DType::u8: return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(v)));
    case DType::boolean: return v != 0 ? 1.0 : 0.0;  // NaN != 0
  }
  return v;
}

// ---- shapes ---------------------------------------------------------------------

inline int64_t numelOf(const Dims& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
inline Shape toShape(const Dims& d) { return Shape(std::span<const int64_t>(d.data(), d.size())); }
inline Dims toDims(const Shape& s) { return Dims(s.begin(), s.end()); }
inline std::string str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}
inline Dims stridesOf(const Dims& s) {
  Dims st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}
inline Dims unravel(int64_t flat, const Dims& s) {
  Dims idx(s.size(), 0);
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    if (s[i] == 0) return idx;
    idx[i] = flat % s[i];
    flat /= s[i];
  }
  return idx;
}
inline int64_t ravel(const Dims& idx, const Dims& s) {
  int64_t f = 0;
  for (size_t i = 0; i < s.size(); ++i) f = f * s[i] + idx[i];
  return f;
}
inline int normAxis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

inline bool broadcastable(const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}
inline Dims broadcastShape(const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[r - 1 - i] = x == 1 ? y : x;
  }
  return out;
}
/// Flat index into a tensor of shape `in` of the element that broadcasts to
/// index `outIdx` of a larger shape.
inline int64_t broadcastSource(const Dims& outIdx, const Dims& in) {
  size_t off = outIdx.size() - in.size();
  int64_t f = 0;
  for (size_t i = 0; i < in.size(); ++i) f = f * in[i] + (in[i] == 1 ? 0 : outIdx[off + i]);
  return f;
}

// ---- reference tensor -------------------------------------------------------

struct Ref {
  Dims shape;
  std::vector<double> v;
  Ref() = default;
  explicit Ref(Dims s, double fill = 0) : shape(std::move(s)), v(static_cast<size_t>(numelOf(shape)), fill) {}
  Ref(Dims s, std::vector<double> vals) : shape(std::move(s)), v(std::move(vals)) {}
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  double& at(const Dims& idx) { return v[static_cast<size_t>(ravel(idx, shape))]; }
  double at(const Dims& idx) const { return v[static_cast<size_t>(ravel(idx, shape))]; }
};

inline Ref broadcastRef(const Ref& r, const Dims& to) {
  Ref out(to);
  for (int64_t i = 0; i < out.numel(); ++i) out.v[i] = r.v[broadcastSource(unravel(i, to), r.shape)];
  return out;
}
template <class F>
Ref mapRef(const Ref& a, F f) {
  Ref out(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out.v[i] = f(a.v[i]);
  return out;
}
template <class F>
Ref zipRef(const Ref& a, const Ref& b, F f) {
  Dims s = broadcastShape(a.shape, b.shape);
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims idx = unravel(i, s);
    out.v[i] = f(a.v[broadcastSource(idx, a.shape)], b.v[broadcastSource(idx, b.shape)]);
  }
  return out;
}
template <class F>
Ref zip3Ref(const Ref& a, const Ref& b, const Ref& c, F f) {
  Dims s = broadcastShape(broadcastShape(a.shape, b.shape), c.shape);
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims idx = unravel(i, s);
    out.v[i] = f(a.v[broadcastSource(idx, a.shape)], b.v[broadcastSource(idx, b.shape)],
                 c.v[broadcastSource(idx, c.shape)]);
  }
  return out;
}
inline Ref castRef(const Ref& a, DType t) {
  return mapRef(a, [t](double x) { return castTo(x, t); });
}
inline Ref permuteRef(const Ref& a, const std::vector<int>& perm) {
  Dims s(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) s[i] = a.shape[perm[i]];
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims idx = unravel(i, s);
    Dims src(a.shape.size());
    for (size_t k = 0; k < perm.size(); ++k) src[perm[k]] = idx[k];
    out.v[i] = a.at(src);
  }
  return out;
}
inline Ref transposeRef(const Ref& a, int x, int y) {
  std::vector<int> perm(a.shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[normAxis(x, a.rank())], perm[normAxis(y, a.rank())]);
  return permuteRef(a, perm);
}
/// Python slice bounds: negative counts from the end, then clamped to [0, n].
inline int64_t sliceBound(int64_t b, int64_t n) {
  if (b < 0) b += n;
  return std::clamp<int64_t>(b, 0, n);
}
inline Ref sliceRef(const Ref& a, int axis, int64_t start, int64_t stop, int64_t step) {
  axis = normAxis(axis, a.rank());
  int64_t n = a.shape[axis];
  int64_t s0 = sliceBound(start, n), s1 = sliceBound(stop, n);
  int64_t cnt = s1 > s0 ? (s1 - s0 + step - 1) / step : 0;
  Dims s = a.shape;
  s[axis] = cnt;
  Ref out(s);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Dims idx = unravel(i, s);
    idx[axis] = s0 + idx[axis] * step;
    out.v[i] = a.at(idx);
  }
  return out;
}
inline Ref concatRef(const std::vector<Ref>& xs, int axis) {
  axis = normAxis(axis, xs[0].rank());
  Dims s = xs[0].shape;
  s[axis] = 0;
  for (const Ref& x : xs) s[axis] += x.shape[axis];
  Ref out(s);
  int64_t base = 0;
  for (const Ref& x : xs) {
    for (int64_t i = 0; i < x.numel(); ++i) {
      Dims idx = unravel(i, x.shape);
      idx[axis] += base;
      out.at(idx) = x.v[i];
    }
    base += x.shape[axis];
  }
  return out;
}

// ---- random ------------------------------------------------------------------

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  /// Uniform integer in [lo, hi].
  int64_t randint(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
  bool coin(double p = 0.5) { return uniform(0, 1) < p; }
  template <class T>
  const T& pick(const std::vector<T>& xs) {
    return xs[static_cast<size_t>(randint(0, static_cast<int64_t>(xs.size()) - 1))];
  }
};

/// A random shape of rank in [minRank, maxRank], extents in [1, maxExtent]
/// (0 with probability zeroProb), with at most maxNumel elements.
inline Dims randomShape(Rng& rng, int minRank, int maxRank, int64_t maxExtent, double zeroProb = 0.0,
                        int64_t maxNumel = 256) {
  for (;;) {
    int r = static_cast<int>(rng.randint(minRank, maxRank));
    Dims s(r);
    for (auto& d : s) d = rng.coin(zeroProb) ? 0 : rng.randint(1, maxExtent);
    if (numelOf(s) <= maxNumel) return s;
  }
}
/// Two shapes that broadcast together: suffixes of one random shape with some
/// extents replaced by 1 (and, with zeroProb, size-0 extents).
inline std::pair<Dims, Dims> randomBroadcastPair(Rng& rng, int maxRank = 4, double zeroProb = 0.05) {
  Dims out = randomShape(rng, 0, maxRank, 5, zeroProb, 200);
  auto derive = [&]() {
    size_t r = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(out.size())));
    Dims s(out.end() - r, out.end());
    for (auto& d : s)
      if (rng.coin(0.3)) d = 1;
    return s;
  };
  return {derive(), derive()};
}

struct Range {
  double lo, hi;
  double quantum = 0;  ///< > 0: float values are multiples of it
};
/// Default value range of a dtype: floats [-4, 4], wide ints [-1000, 1000]
/// ("big": [-2^20, 2^20]), i8/u8 their full range, bool {0, 1}.
inline Range defaultRange(DType t, bool big = false) {
  switch (t) {
    case DType::i64:
    case DType::i32: return big ? Range{-1048576, 1048576} : Range{-1000, 1000};
    case DType::i8: return {-128, 127};
    case DType::u8: return {0, 255};
    case DType::boolean: return {0, 1};
    default: return {-4, 4};
  }
}
/// Small values that every dtype (incl. f16/bf16, i8, u8) holds exactly.
inline Range smallRange(DType t) {
  if (t == DType::u8) return {0, 100};
  if (t == DType::boolean) return {0, 1};
  if (isInt(t)) return {-100, 100};
  return {-4, 4};
}
inline double randomValue(Rng& rng, DType t, Range r) {
  if (isBool(t)) return rng.coin() ? 1.0 : 0.0;
  if (isInt(t)) {
    double tlo = t == DType::u8 ? 0.0 : t == DType::i8 ? -128.0 : t == DType::i32 ? -2147483648.0 : -9e15;
    double thi = t == DType::u8 ? 255.0 : t == DType::i8 ? 127.0 : t == DType::i32 ? 2147483647.0 : 9e15;
    double lo = std::max(r.lo, tlo), hi = std::min(r.hi, thi);
    return static_cast<double>(rng.randint(static_cast<int64_t>(std::ceil(lo)), static_cast<int64_t>(std::floor(hi))));
  }
  double v = rng.uniform(r.lo, r.hi);
  if (r.quantum > 0) v = std::nearbyint(v / r.quantum) * r.quantum;
  return castTo(v, t);
}
inline Ref randomRef(Rng& rng, const Dims& shape, DType t, Range r) {
  Ref out(shape);
  for (auto& x : out.v) x = randomValue(rng, t, r);
  return out;
}
inline Ref randomRef(Rng& rng, const Dims& shape, DType t) { return randomRef(rng, shape, t, defaultRange(t)); }
/// Replaces elements, each with probability p, by one of `specials`.
inline void sprinkle(Rng& rng, Ref& r, double p, const std::vector<double>& specials) {
  for (auto& x : r.v)
    if (rng.coin(p)) x = rng.pick(specials);
}

// ---- making tensors --------------------------------------------------------------

/// A materialized (f16/bf16: pending cast) tensor holding r's values, which
/// must already be representable in t.
inline Tensor makeTensor(const Ref& r, DType t) {
  Shape s = toShape(r.shape);
  auto conv = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> v(r.v.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(r.v[i]);
    return kiln::from_vector<T>(v, s);
  };
  switch (t) {
    case DType::f32: return conv(float{});
    case DType::f64: return conv(double{});
    case DType::i64: return conv(int64_t{});
    case DType::i32: return conv(int32_t{});
    case DType::i8: return conv(int8_t{});
    case DType::u8: return conv(uint8_t{});
    case DType::boolean: {
      std::vector<bool> v(r.v.size());
      for (size_t i = 0; i < v.size(); ++i) v[i] = r.v[i] != 0;
      return kiln::from_vector<bool>(v, s);
    }
    case DType::f16:
    case DType::bf16: return kiln::cast(conv(float{}), t);
  }
  return {};
}

enum class Layout { Contiguous, Transposed, Permuted, Strided, Broadcast, Any };

inline const char* layoutName(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Permuted: return "permuted";
    case Layout::Strided: return "strided-slice";
    case Layout::Broadcast: return "broadcast_to";
    case Layout::Any: return "any";
  }
  return "?";
}

/// A tensor and its reference values.
struct Input {
  Tensor t;
  Ref r;
  DType dt;
  std::string how;  ///< for failure messages
};

/// A tensor of `shape` and dtype `t` with random values in `range`, made
/// either dense or as a non-contiguous view (transpose, permute, slice with a
/// step > 1, broadcast_to) of a random base.
inline Input makeInput(Rng& rng, const Dims& shape, DType t, Range range, Layout layout = Layout::Any) {
  int rank = static_cast<int>(shape.size());
  if (layout == Layout::Any) {
    std::vector<Layout> ok = {Layout::Contiguous};
    if (rank >= 1) ok.push_back(Layout::Strided), ok.push_back(Layout::Broadcast);
    if (rank >= 2) ok.push_back(Layout::Transposed), ok.push_back(Layout::Permuted);
    layout = rng.pick(ok);
  }
  auto base = [&](const Ref& r) {
    Tensor b = makeTensor(r, t);
    if (!isFloat(t) || t == DType::f32 || t == DType::f64 || rng.coin()) return b;
    kiln::sync();  // materialize the f16/bf16 cast, so the view is of a buffer
    return b;
  };
  Input in;
  in.dt = t;
  in.how = std::string(layoutName(layout)) + " " + tname(t) + str(shape);
  switch (layout) {
    case Layout::Contiguous:
    case Layout::Any: {
      in.r = randomRef(rng, shape, t, range);
      in.t = base(in.r);
      break;
    }
    case Layout::Transposed: {
      int a = static_cast<int>(rng.randint(0, rank - 1)), b = static_cast<int>(rng.randint(0, rank - 1));
      if (a == b) b = (a + 1) % rank;
      Dims bs = shape;
      std::swap(bs[a], bs[b]);
      Ref br = randomRef(rng, bs, t, range);
      int pa = rng.coin() ? a - rank : a;  // negative axes sometimes
      in.t = kiln::transpose(base(br), pa, b);
      in.r = transposeRef(br, a, b);
      break;
    }
    case Layout::Permuted: {
      std::vector<int> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng.g);
      Dims bs(rank);
      for (int i = 0; i < rank; ++i) bs[perm[i]] = shape[i];
      Ref br = randomRef(rng, bs, t, range);
      in.t = kiln::permute(base(br), perm);
      in.r = permuteRef(br, perm);
      break;
    }
    case Layout::Strided: {
      int a = static_cast<int>(rng.randint(0, rank - 1));
      int64_t step = rng.randint(2, 3), off = rng.randint(0, step - 1), extra = rng.randint(0, step - 1);
      Dims bs = shape;
      bs[a] = off + step * shape[a] + extra;
      Ref br = randomRef(rng, bs, t, range);
      int64_t stop = off + step * shape[a];
      in.t = kiln::slice(base(br), a, off, stop, step);
      in.r = sliceRef(br, a, off, stop, step);
      break;
    }
    case Layout::Broadcast: {
      size_t r = static_cast<size_t>(rng.randint(0, rank));
      Dims bs(shape.end() - r, shape.end());
      for (auto& d : bs)
        if (rng.coin(0.5)) d = 1;
      Ref br = randomRef(rng, bs, t, range);
      in.t = kiln::broadcast_to(base(br), toShape(shape));
      in.r = broadcastRef(br, shape);
      break;
    }
  }
  return in;
}
inline Input makeInput(Rng& rng, const Dims& shape, DType t, Layout layout = Layout::Any) {
  return makeInput(rng, shape, t, defaultRange(t), layout);
}
/// A dense tensor with exactly the given values.
inline Input makeExact(const Ref& r, DType t) { return {makeTensor(r, t), castRef(r, t), t, "exact " + tname(t)}; }

// ---- comparison ----------------------------------------------------------------

struct Tol {
  double rtol = 0, atol = 0;
};
/// Per-dtype tolerance of a single elementwise op (computed in f32 for
/// f16/bf16 and rounded once).
inline Tol tolFor(DType t) {
  switch (t) {
    case DType::f64: return {1e-12, 1e-13};
    case DType::f32: return {1e-5, 1e-6};
    case DType::f16: return {1e-3, 1e-5};
    case DType::bf16: return {1e-2, 1e-5};
    default: return {0, 0};
  }
}
/// Tolerance of an op recorded as several primitives, each rounded to the
/// dtype.
inline Tol compositeTolFor(DType t) {
  switch (t) {
    case DType::f64: return {1e-11, 1e-12};
    case DType::f32: return {2e-5, 2e-6};
    case DType::f16: return {1e-2, 4e-3};
    case DType::bf16: return {6e-2, 3e-2};
    default: return {0, 0};
  }
}
/// Relative accumulation error per sqrt(#terms) of a sum in dtype t
/// (f16/bf16 accumulate in f32).
inline double accumEps(DType t) { return t == DType::f64 ? 1e-14 : 1e-6; }

inline std::string fmt(double x) {
  std::ostringstream o;
  o.precision(17);
  o << x;
  return o.str();
}

/// Compares the tensor's shape and values with the reference. Floats:
/// |a - e| <= atol + rtol |e| + extraAtol[i] (NaN matches NaN, infinities
/// must be equal); integer and bool dtypes: exact.
inline ::testing::AssertionResult near(const Tensor& t, const Ref& ref, Tol tol,
                                        const std::vector<double>* extraAtol = nullptr) {
  if (!t.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  std::vector<double> got;
  Dims shape;
  try {
    shape = toDims(t.shape());
    if (shape != ref.shape)
      return ::testing::AssertionFailure() << "shape " << str(shape) << ", expected " << str(ref.shape);
    got = t.to_vector<double>();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "reading the tensor threw: " << e.what();
  }
  if (got.size() != ref.v.size())
    return ::testing::AssertionFailure() << "to_vector gave " << got.size() << " values, expected " << ref.v.size();
  bool exact = !isFloat(t.dtype());
  int bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < got.size(); ++i) {
    double a = got[i], e = ref.v[i];
    bool ok;
    if (std::isnan(e) || std::isnan(a)) ok = std::isnan(e) && std::isnan(a);
    else if (std::isinf(e) || std::isinf(a)) ok = a == e;
    else if (exact) ok = a == e;
    else ok = std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e) + (extraAtol ? (*extraAtol)[i] : 0.0);
    if (!ok) {
      if (bad < 6)
        msg << "\n  at " << str(unravel(static_cast<int64_t>(i), ref.shape)) << ": got " << fmt(a) << ", expected "
            << fmt(e);
      ++bad;
    }
  }
  if (bad)
    return ::testing::AssertionFailure() << bad << " of " << got.size() << " values differ (" << tname(t.dtype())
                                         << " " << str(shape) << ", rtol " << tol.rtol << ", atol " << tol.atol
                                         << "):" << msg.str();
  return ::testing::AssertionSuccess();
}

/// Compares dtypes by name so that failures print readably.
#define EXPECT_DTYPE(tensor, expected) EXPECT_EQ(::kt::tname((tensor).dtype()), ::kt::tname(expected))

inline std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The call must throw kiln::Error, and the message must name the op.
template <class F>
void expectKilnError(F&& f, const std::string& op) {
  EXPECT_THROW((void)f(), kiln::Error) << "expected kiln::Error from " << op;
  try {
    (void)f();
  } catch (const kiln::Error& e) {
    EXPECT_NE(lower(e.what()).find(lower(op)), std::string::npos)
        << "the error message does not name the op '" << op << "': " << e.what();
  } catch (...) {
  }
}

/// Runs body(threadIndex) on n threads at once; exceptions become failures.
inline void runOnThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> ts;
  ts.reserve(n);
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&body, i] {
      try {
        body(i);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << i << " threw: " << e.what();
      } catch (...) {
        ADD_FAILURE() << "thread " << i << " threw a non-std exception";
      }
    });
  for (auto& t : ts) t.join();
}

/// Seeds for the random tests; fixed so failures reproduce.
inline constexpr uint64_t kSeed = 0x6b696c6e;  // "kiln"

}  // namespace kt
