// Unary, binary, comparison, select, cast, copy and fill kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "runtime/core/Half.h"
#include "runtime/core/Random.h"
#include "runtime/interp/Dispatch.h"
#include "runtime/interp/ElementwiseLoop.h"
#include "runtime/interp/HalfConversion.h"
#include "runtime/interp/Kernels.h"
#include "runtime/interp/VectorMath.h"

namespace kiln::interp {

namespace {

template <class T>
inline T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class T>
inline T wrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <class T>
inline T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (sizeof(T) < sizeof(unsigned)) {
      return static_cast<T>(static_cast<unsigned>(static_cast<U>(a)) * static_cast<unsigned>(static_cast<U>(b)));
    } else {
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    }
  } else {
    return a * b;
  }
}
template <class T>
inline T intPow(T base, T e) {
  if (e < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return (e % 2) ? T(-1) : T(1);
    }
    return 0;
  }
  T r = 1;
  while (e) {
    if (e & 1) r = wrapMul(r, base);
    base = wrapMul(base, base);
    e = static_cast<T>(e >> 1);
  }
  return r;
}
template <class T>
inline T maxNan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <class T>
inline T minNan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

/// C's fmod (the result takes the dividend's sign). Integers: x % 0 and
/// x % -1 give 0 (no trap; compiled code does the same).
template <class T>
inline T truncMod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;
    }
    return static_cast<T>(a % b);
  }
}
/// Python's modulo: the result takes the divisor's sign.
template <class T>
inline T floorMod(T a, T b) {
  T r = truncMod(a, b);
  if constexpr (std::is_unsigned_v<T>) {
    return r;
  } else {
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  }
}

/// Calls run(o, a, sa, n) for every run of n elements of one input (`a`,
/// sa elements apart) and the dense output (`o`).
template <class TIn, class TOut, class Run>
void unaryRuns(const Arg& in, char* out, Run run) {
  char* base[2] = {out, const_cast<char*>(in.data)};
  int64_t st[2][Shape::kMaxRank];
  denseByteStrides(in.shape, sizeof(TOut), st[0]);
  for (int d = 0; d < in.shape.rank(); ++d) st[1][d] = in.strides[d] * static_cast<int64_t>(sizeof(TIn));
  forEachStrided<2>(in.shape, base, st, [&](char* const* p, const int64_t* s, int64_t n) {
    run(reinterpret_cast<TOut*>(p[0]), reinterpret_cast<const TIn*>(p[1]), s[1] / static_cast<int64_t>(sizeof(TIn)),
        n);
  });
}

/// Calls run(o, x, sx, y, sy, n) for every run of n elements of two inputs
/// (already broadcast; strides in elements, 0 for a broadcast one) and the
/// dense output.
template <class TIn, class TOut, class Run>
void binaryRuns(const Arg& a, const Arg& b, const Shape& shape, char* out, Run run) {
  char* base[3] = {out, const_cast<char*>(a.data), const_cast<char*>(b.data)};
  int64_t st[3][Shape::kMaxRank];
  denseByteStrides(shape, sizeof(TOut), st[0]);
  for (int d = 0; d < shape.rank(); ++d) {
    st[1][d] = a.strides[d] * static_cast<int64_t>(sizeof(TIn));
    st[2][d] = b.strides[d] * static_cast<int64_t>(sizeof(TIn));
  }
  constexpr auto E = static_cast<int64_t>(sizeof(TIn));
  forEachStrided<3>(shape, base, st, [&](char* const* p, const int64_t* s, int64_t n) {
    run(reinterpret_cast<TOut*>(p[0]), reinterpret_cast<const TIn*>(p[1]), s[1] / E,
        reinterpret_cast<const TIn*>(p[2]), s[2] / E, n);
  });
}

/// Runs f elementwise over one input into a dense output.
template <class TIn, class TOut, class F>
void mapUnary(const Arg& in, char* out, F f) {
  unaryRuns<TIn, TOut>(in, out, [&](TOut* o, const TIn* a, int64_t sa, int64_t n) {
    if (sa == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i * sa]);
    }
  });
}

/// Runs an f32 array function (VectorMath.h) over one input into a dense
/// output: unit-stride runs directly, strided ones through a small buffer,
/// so every layout computes with the same code.
template <class Fn>
void mapUnaryF32(const Arg& in, char* out, Fn fn) {
  unaryRuns<float, float>(in, out, [&](float* o, const float* a, int64_t sa, int64_t n) {
    if (sa == 1) return fn(a, o, n);
    constexpr int64_t kChunk = 256;
    float buffer[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      for (int64_t j = 0; j < m; ++j) buffer[j] = a[(i + j) * sa];
      fn(buffer, o + i, m);
    }
  });
}

/// The correctly rounded unary ops VectorMath's exactF32 computes.
std::optional<ExactF32> exactF32Of(OpKind op) {
  switch (op) {
    case OpKind::Sqrt: return ExactF32::Sqrt;
    case OpKind::Rsqrt: return ExactF32::Rsqrt;
    case OpKind::Reciprocal: return ExactF32::Reciprocal;
    case OpKind::Floor: return ExactF32::Floor;
    case OpKind::Ceil: return ExactF32::Ceil;
    case OpKind::Round: return ExactF32::Round;
    default: return std::nullopt;
  }
}

/// An f32 add, sub, mul or div (already broadcast) into a dense output:
/// runs whose strides are 0 or 1 element go to the vectorised arithF32,
/// others elementwise (the same IEEE operations either way).
void mapArithF32(ArithF32 op, const Arg& a, const Arg& b, const Shape& shape, char* out) {
  auto run = [op](float* o, const float* x, int64_t sx, const float* y, int64_t sy, int64_t n) {
    if ((sx == 0 || sx == 1) && (sy == 0 || sy == 1)) return arithF32(op, x, sx, y, sy, o, n);
    for (int64_t i = 0; i < n; ++i) {
      const float u = x[i * sx], v = y[i * sy];
      switch (op) {
        case ArithF32::Add: o[i] = u + v; break;
        case ArithF32::Sub: o[i] = u - v; break;
        case ArithF32::Mul: o[i] = u * v; break;
        case ArithF32::Div: o[i] = u / v; break;
      }
    }
  };
  binaryRuns<float, float>(a, b, shape, out, run);
}

/// Runs f elementwise over two inputs (already broadcast) into a dense output.
template <class TIn, class TOut, class F>
void mapBinary(const Arg& a, const Arg& b, const Shape& shape, char* out, F f) {
  binaryRuns<TIn, TOut>(a, b, shape, out, [&](TOut* o, const TIn* x, int64_t sx, const TIn* y, int64_t sy, int64_t n) {
    if (sx == 1 && sy == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (sx == 1 && sy == 0) {
      const TIn yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (sx == 0 && sy == 1) {
      const TIn xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i * sx], y[i * sy]);
    }
  });
}

template <class T>
struct UnaryFloat {
  OpKind op;
  T operator()(T x) const {
    switch (op) {
      case OpKind::Exp: return std::exp(x);
      case OpKind::Expm1: return std::expm1(x);
      case OpKind::Log: return std::log(x);
      case OpKind::Log1p: return std::log1p(x);
      case OpKind::Log2: return std::log2(x);
      case OpKind::Erf: return std::erf(x);
      case OpKind::Sqrt: return std::sqrt(x);
      case OpKind::Rsqrt: return T(1) / std::sqrt(x);
      case OpKind::Tanh: return std::tanh(x);
      case OpKind::Sigmoid: {
        // exp(-|x|) never overflows: below -88.7, 1 / (1 + exp(-x)) gave 0
        // where the result is a denormal e / (1 + e). Compiled code computes
        // the same way (kiln-to-linalg's ScalarBuilder).
        const T e = std::exp(-std::fabs(x));
        const T s = T(1) / (T(1) + e);
        return x < T(0) ? e * s : s;
      }
      case OpKind::Sin: return std::sin(x);
      case OpKind::Cos: return std::cos(x);
      case OpKind::Atan: return std::atan(x);
      case OpKind::Floor: return std::floor(x);
      case OpKind::Ceil: return std::ceil(x);
      case OpKind::Round: return std::nearbyint(x);
      case OpKind::Reciprocal: return T(1) / x;
      default: return x;
    }
  }
};

}  // namespace

Arg broadcastArg(const Arg& a, const Shape& shape) {
  Arg r = a;
  r.shape = shape;
  const int off = shape.rank() - a.shape.rank();
  for (int d = 0; d < shape.rank(); ++d) {
    int src = d - off;
    r.strides[d] = (src < 0 || a.shape[src] == 1) ? 0 : a.strides[src];
  }
  return r;
}

void unaryKernel(OpKind op, const Arg& in, char* out) {
  switch (op) {
    case OpKind::Exp:
    case OpKind::Expm1:
    case OpKind::Log:
    case OpKind::Log1p:
    case OpKind::Log2:
    case OpKind::Erf:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Sin:
    case OpKind::Cos:
    case OpKind::Atan:
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Round:
    case OpKind::Reciprocal:
      dispatchFloat(in.dtype, [&]<class T>() {
        if constexpr (std::is_same_v<T, float>) {
          if (op == OpKind::Exp) return mapUnaryF32(in, out, expF32);
          if (op == OpKind::Tanh) return mapUnaryF32(in, out, tanhF32);
          if (op == OpKind::Sigmoid) return mapUnaryF32(in, out, sigmoidF32);
          if (op == OpKind::Erf) return mapUnaryF32(in, out, erfF32);
          if (op == OpKind::Log) return mapUnaryF32(in, out, logF32);
          if (op == OpKind::Log2) return mapUnaryF32(in, out, log2F32);
          if (op == OpKind::Log1p) return mapUnaryF32(in, out, log1pF32);
          if (op == OpKind::Expm1) return mapUnaryF32(in, out, expm1F32);
          if (op == OpKind::Atan) return mapUnaryF32(in, out, atanF32);
          if (op == OpKind::Sin) return mapUnaryF32(in, out, sinF32);
          if (op == OpKind::Cos) return mapUnaryF32(in, out, cosF32);
          if (std::optional<ExactF32> e = exactF32Of(op))
            return mapUnaryF32(in, out, [e = *e](const float* x, float* y, int64_t n) { exactF32(e, x, y, n); });
        }
        // Dedicated loops for the hot ops let the compiler inline them.
        if (op == OpKind::Exp) return mapUnary<T, T>(in, out, [](T x) { return std::exp(x); });
        if (op == OpKind::Tanh) return mapUnary<T, T>(in, out, [](T x) { return std::tanh(x); });
        mapUnary<T, T>(in, out, UnaryFloat<T>{op});
      });
      return;
    case OpKind::Neg:
      dispatchNumeric(in.dtype, [&]<class T>() {
        mapUnary<T, T>(in, out, [](T x) {
          if constexpr (std::is_floating_point_v<T>) return -x;  // -0.0 for +0.0, like compiled code
          else return wrapSub(T(0), x);
        });
      });
      return;
    case OpKind::Abs:
      dispatchNumeric(in.dtype, [&]<class T>() {
        mapUnary<T, T>(in, out, [](T x) {
          if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
          else if constexpr (std::is_unsigned_v<T>) return x;
          else return x < 0 ? wrapSub(T(0), x) : x;
        });
      });
      return;
    case OpKind::Sign:
      dispatchNumeric(in.dtype, [&]<class T>() {
        mapUnary<T, T>(in, out, [](T x) {
          if constexpr (std::is_floating_point_v<T>) {
            if (x != x) return x;
          }
          return static_cast<T>((T(0) < x) - (x < T(0)));
        });
      });
      return;
    case OpKind::Square:
      dispatchNumeric(in.dtype, [&]<class T>() { mapUnary<T, T>(in, out, [](T x) { return wrapMul(x, x); }); });
      return;
    case OpKind::Relu:
      dispatchNumeric(in.dtype, [&]<class T>() { mapUnary<T, T>(in, out, [](T x) { return x < T(0) ? T(0) : x; }); });
      return;
    case OpKind::LogicalNot:
      mapUnary<bool, bool>(in, out, [](bool x) { return !x; });
      return;
    default: throw Error("interpreter: op " + std::string(core::opName(op)) + " is not unary");
  }
}

void binaryKernel(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) {
  if (a.dtype == DType::f32 && b.dtype == DType::f32 &&
      (op == OpKind::Add || op == OpKind::Sub || op == OpKind::Mul || op == OpKind::Div)) {
    const ArithF32 arith = op == OpKind::Add   ? ArithF32::Add
                           : op == OpKind::Sub ? ArithF32::Sub
                           : op == OpKind::Mul ? ArithF32::Mul
                                               : ArithF32::Div;
    return mapArithF32(arith, a, b, shape, out);
  }
  switch (op) {
    case OpKind::Add:
      dispatchNumeric(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return wrapAdd(x, y); }); });
      return;
    case OpKind::Sub:
      dispatchNumeric(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return wrapSub(x, y); }); });
      return;
    case OpKind::Mul:
      dispatchNumeric(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return wrapMul(x, y); }); });
      return;
    case OpKind::Div:
      dispatchFloat(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return x / y; }); });
      return;
    case OpKind::Pow:
      dispatchNumeric(a.dtype, [&]<class T>() {
        mapBinary<T, T>(a, b, shape, out, [](T x, T y) {
          if constexpr (std::is_floating_point_v<T>) return std::pow(x, y);
          else return intPow(x, y);
        });
      });
      return;
    case OpKind::Fmod:
      dispatchNumeric(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return truncMod(x, y); }); });
      return;
    case OpKind::Remainder:
      dispatchNumeric(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return floorMod(x, y); }); });
      return;
    case OpKind::Maximum:
      dispatchNumeric(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return maxNan(x, y); }); });
      return;
    case OpKind::Minimum:
      dispatchNumeric(a.dtype, [&]<class T>() { mapBinary<T, T>(a, b, shape, out, [](T x, T y) { return minNan(x, y); }); });
      return;
    case OpKind::LogicalAnd:
      mapBinary<bool, bool>(a, b, shape, out, [](bool x, bool y) { return x && y; });
      return;
    case OpKind::LogicalOr:
      mapBinary<bool, bool>(a, b, shape, out, [](bool x, bool y) { return x || y; });
      return;
    default: throw Error("interpreter: op " + std::string(core::opName(op)) + " is not binary");
  }
}

void compareKernel(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) {
  dispatchAll(a.dtype, [&]<class T>() {
    switch (op) {
      case OpKind::Eq: return mapBinary<T, bool>(a, b, shape, out, [](T x, T y) { return x == y; });
      case OpKind::Ne: return mapBinary<T, bool>(a, b, shape, out, [](T x, T y) { return x != y; });
      case OpKind::Lt: return mapBinary<T, bool>(a, b, shape, out, [](T x, T y) { return x < y; });
      case OpKind::Le: return mapBinary<T, bool>(a, b, shape, out, [](T x, T y) { return x <= y; });
      case OpKind::Gt: return mapBinary<T, bool>(a, b, shape, out, [](T x, T y) { return x > y; });
      case OpKind::Ge: return mapBinary<T, bool>(a, b, shape, out, [](T x, T y) { return x >= y; });
      default: throw Error("interpreter: op " + std::string(core::opName(op)) + " is not a comparison");
    }
  });
}

void whereKernel(const Arg& cond, const Arg& a, const Arg& b, const Shape& shape, char* out) {
  // f16 and bf16 values are moved as their bits (a select rounds nothing).
  dispatchStorage(a.dtype, [&]<class T>() {
    char* base[4] = {out, const_cast<char*>(cond.data), const_cast<char*>(a.data), const_cast<char*>(b.data)};
    int64_t st[4][Shape::kMaxRank];
    denseByteStrides(shape, sizeof(T), st[0]);
    for (int d = 0; d < shape.rank(); ++d) {
      st[1][d] = cond.strides[d];
      st[2][d] = a.strides[d] * static_cast<int64_t>(sizeof(T));
      st[3][d] = b.strides[d] * static_cast<int64_t>(sizeof(T));
    }
    forEachStrided<4>(shape, base, st, [&](char* const* p, const int64_t* s, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      // Bytes, not bool: GCC vectorises a select on bytes, not on bools.
      const uint8_t* c = reinterpret_cast<const uint8_t*>(p[1]);
      const int64_t sx = s[2] / static_cast<int64_t>(sizeof(T)), sy = s[3] / static_cast<int64_t>(sizeof(T));
      const T* x = reinterpret_cast<const T*>(p[2]);
      const T* y = reinterpret_cast<const T*>(p[3]);
      // Both branches loaded, then selected: the compiler vectorises it into
      // blends, where a branch per element mispredicted on mixed masks
      // (where(x > 0.5, x, y) on uniform x: 14x an add's time).
      if (s[1] == 1 && sx == 1 && sy == 1) {
        for (int64_t i = 0; i < n; ++i) {
          const T xv = x[i], yv = y[i];
          o[i] = c[i] ? xv : yv;
        }
      } else if (s[1] == 1 && sx == 1 && sy == 0) {
        const T yv = *y;
        for (int64_t i = 0; i < n; ++i) {
          const T xv = x[i];
          o[i] = c[i] ? xv : yv;
        }
      } else if (s[1] == 1 && sx == 0 && sy == 1) {
        const T xv = *x;
        for (int64_t i = 0; i < n; ++i) {
          const T yv = y[i];
          o[i] = c[i] ? xv : yv;
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          const T xv = x[i * sx], yv = y[i * sy];
          o[i] = c[i * s[1]] ? xv : yv;
        }
      }
    });
  });
}

bool productThenAddKernel(OpKind op, const Arg& a, const Arg& b, const Arg& c, bool productFirst, const Shape& shape,
                          char* out) {
  if ((op != OpKind::Add && op != OpKind::Sub) || a.dtype != b.dtype || a.dtype != c.dtype ||
      (a.dtype != DType::f32 && a.dtype != DType::f64))
    return false;
  auto run = [&]<class T>() {
    char* base[4] = {out, const_cast<char*>(a.data), const_cast<char*>(b.data), const_cast<char*>(c.data)};
    int64_t st[4][Shape::kMaxRank];
    denseByteStrides(shape, sizeof(T), st[0]);
    for (int d = 0; d < shape.rank(); ++d) {
      st[1][d] = a.strides[d] * static_cast<int64_t>(sizeof(T));
      st[2][d] = b.strides[d] * static_cast<int64_t>(sizeof(T));
      st[3][d] = c.strides[d] * static_cast<int64_t>(sizeof(T));
    }
    // The sign of c and of the product: x*y + c, x*y - c, c - x*y.
    const T cSign = op == OpKind::Sub && productFirst ? T(-1) : T(1);
    const T pSign = op == OpKind::Sub && !productFirst ? T(-1) : T(1);
    constexpr auto E = static_cast<int64_t>(sizeof(T));
    forEachStrided<4>(shape, base, st, [&](char* const* p, const int64_t* s, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      const T* y = reinterpret_cast<const T*>(p[2]);
      const T* z = reinterpret_cast<const T*>(p[3]);
      // The product is rounded before the sum (this file is built without
      // floating-point contraction): the two ops' results exactly. Negating
      // is exact, so c - x*y is (-x*y) + c and x*y - c is x*y + (-c).
      if (s[1] == E && s[2] == E && s[3] == E) {
        if constexpr (std::is_same_v<T, float>) return productThenAddF32(x, y, z, pSign, cSign, o, n);
        for (int64_t i = 0; i < n; ++i) o[i] = pSign * (x[i] * y[i]) + cSign * z[i];
      } else {
        const int64_t sx = s[1] / E, sy = s[2] / E, sz = s[3] / E;
        for (int64_t i = 0; i < n; ++i) o[i] = pSign * (x[i * sx] * y[i * sy]) + cSign * z[i * sz];
      }
    });
  };
  if (a.dtype == DType::f32)
    run.template operator()<float>();
  else
    run.template operator()<double>();
  return true;
}

namespace {

/// The bits of `f` as `to`, f16 or bf16.
inline uint16_t halfBits(float f, DType to) { return to == DType::f16 ? core::floatToHalf(f) : core::floatToBf16(f); }

/// Elements of a half-type run widened into L1 at a time (binaryHalfRuns,
/// unaryHalfRuns).
inline constexpr int64_t kHalfChunk = 512;

template <class Dst>
inline Dst fromDouble(double v, DType dst) {
  if constexpr (std::is_same_v<Dst, bool>) {
    return v != 0;
  } else if constexpr (std::is_same_v<Dst, uint16_t>) {  // f16 / bf16
    return halfBits(static_cast<float>(v), dst);
  } else if constexpr (std::is_floating_point_v<Dst>) {
    return static_cast<Dst>(v);
  } else {
    // Saturate, NaN to 0: C++ leaves out-of-range float->int undefined.
    if (v != v) return 0;
    if (v <= static_cast<double>(std::numeric_limits<Dst>::min())) return std::numeric_limits<Dst>::min();
    if (v >= static_cast<double>(std::numeric_limits<Dst>::max())) return std::numeric_limits<Dst>::max();
    return static_cast<Dst>(v);
  }
}

}  // namespace

void castKernel(const Arg& in, DType to, char* out) {
  const DType from = in.dtype;
  // Half types to and from f32 in vectorised runs (HalfConversion.h; the
  // scalar f16 conversions' branches cost about 1 ns an element).
  if ((from == DType::f16 || from == DType::bf16) && to == DType::f32) {
    unaryRuns<uint16_t, float>(in, out, [&](float* o, const uint16_t* a, int64_t sa, int64_t n) {
      widenHalfRun(from, a, sa, o, n);
    });
    return;
  }
  if (from == DType::f32 && (to == DType::f16 || to == DType::bf16)) {
    unaryRuns<float, uint16_t>(in, out, [&](uint16_t* o, const float* a, int64_t sa, int64_t n) {
      if (sa == 1) return narrowHalfRun(to, a, o, n);
      for (int64_t i = 0; i < n; ++i) o[i] = halfBits(a[i * sa], to);
    });
    return;
  }
  dispatchStorage(from, [&]<class Src>() {
    dispatchStorage(to, [&]<class Dst>() {
      mapUnary<Src, Dst>(in, out, [=](Src x) -> Dst {
        if constexpr (std::is_same_v<Src, uint16_t>) {
          float f = from == DType::f16 ? core::halfToFloat(x) : core::bf16ToFloat(x);
          if constexpr (std::is_same_v<Dst, uint16_t>) {
            return halfBits(f, to);
          } else {
            return fromDouble<Dst>(f, to);
          }
        } else if constexpr (std::is_floating_point_v<Src>) {
          if constexpr (std::is_same_v<Dst, uint16_t>) {
            return halfBits(static_cast<float>(x), to);
          } else {
            return fromDouble<Dst>(static_cast<double>(x), to);
          }
        } else {
          // Integer or bool source: integer destinations wrap like C++ casts;
          // floating ones round once (through f64, a 64-bit integer would
          // round twice: 2^60 + 2^36 + 1 became 2^60, not 2^60 + 2^37), and
          // half ones from that f32 (as PyTorch).
          if constexpr (std::is_same_v<Dst, bool>) return x != 0;
          else if constexpr (std::is_same_v<Dst, uint16_t>) return halfBits(static_cast<float>(x), to);
          else return static_cast<Dst>(x);
        }
      });
    });
  });
}

void copyKernel(const Arg& in, char* out) {
  const auto E = static_cast<int64_t>(dtype_size(in.dtype));
  char* base[2] = {out, const_cast<char*>(in.data)};
  int64_t st[2][Shape::kMaxRank];
  denseByteStrides(in.shape, E, st[0]);
  for (int d = 0; d < in.shape.rank(); ++d) st[1][d] = in.strides[d] * E;
  forEachStrided<2>(in.shape, base, st, [E](char* const* p, const int64_t* s, int64_t n) {
    if (s[1] == E) {
      std::memcpy(p[0], p[1], static_cast<size_t>(n * E));
      return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * E, p[1] + i * s[1], static_cast<size_t>(E));
  });
}

void fullKernel(DType t, int64_t n, double f, int64_t i, char* out) {
  dispatchStorage(t, [&]<class T>() {
    T v;
    if constexpr (std::is_same_v<T, bool>) v = f != 0;  // f holds the value for every scalar kind
    else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, uint16_t>) v = static_cast<T>(i);
    else v = fromDouble<T>(f, t);
    T* o = reinterpret_cast<T*>(out);
    std::fill(o, o + n, v);
  });
}

void arangeKernel(DType t, int64_t n, double start, double step, char* out) {
  dispatchStorage(t, [&]<class T>() {
    T* o = reinterpret_cast<T*>(out);
    for (int64_t k = 0; k < n; ++k) o[k] = fromDouble<T>(start + static_cast<double>(k) * step, t);
  });
}

void randomKernel(OpKind op, DType t, int64_t n, uint64_t seed, char* out) {
  dispatchStorage(t, [&]<class T>() {
    if constexpr (std::is_same_v<T, uint16_t> || std::is_floating_point_v<T>) {
      T* o = reinterpret_cast<T*>(out);
      auto fill = [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          double v = op == OpKind::RandUniform ? core::uniformAt(seed, static_cast<uint64_t>(k))
                                               : core::normalAt(seed, static_cast<uint64_t>(k));
          o[k] = fromDouble<T>(v, t);
        }
      };
      if (n < kParallelGrain) {
        fill(0, n);
      } else {
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, kParallelGrain / 4),
                          [&](const tbb::blocked_range<int64_t>& r) { fill(r.begin(), r.end()); });
      }
    } else {
      unsupportedDType("rand", t);
    }
  });
}

namespace {

/// binaryHalfKernel for half type `t`: chunks of each run widened into L1,
/// computed by arithF32 (the f32 op's code) and rounded as the cast
/// rounds.
void binaryHalfRuns(DType t, ArithF32 arith, const Arg& a, const Arg& b, const Shape& shape, char* out) {
  binaryRuns<uint16_t, uint16_t>(
      a, b, shape, out, [&](uint16_t* o, const uint16_t* x, int64_t sx, const uint16_t* y, int64_t sy, int64_t n) {
        float xf[kHalfChunk], yf[kHalfChunk], of[kHalfChunk];
        for (int64_t i = 0; i < n; i += kHalfChunk) {
          const int64_t m = std::min(kHalfChunk, n - i);
          widenHalfRun(t, x + i * sx, sx, xf, m);
          widenHalfRun(t, y + i * sy, sy, yf, m);
          arithF32(arith, xf, 1, yf, 1, of, m);
          narrowHalfRun(t, of, o + i, m);
        }
      });
}

/// unaryHalfKernel for half type `t`: chunks of each run widened into L1,
/// computed by unaryKernel's f32 code and rounded as the cast rounds.
void unaryHalfRuns(DType t, OpKind op, const Arg& in, char* out) {
  unaryRuns<uint16_t, uint16_t>(in, out, [&](uint16_t* o, const uint16_t* x, int64_t sx, int64_t n) {
    float xf[kHalfChunk], of[kHalfChunk];
    for (int64_t i = 0; i < n; i += kHalfChunk) {
      const int64_t m = std::min(kHalfChunk, n - i);
      widenHalfRun(t, x + i * sx, sx, xf, m);
      Arg chunk;
      chunk.data = reinterpret_cast<const char*>(xf);
      chunk.shape = Shape({m});
      chunk.strides[0] = 1;
      unaryKernel(op, chunk, reinterpret_cast<char*>(of));
      narrowHalfRun(t, of, o + i, m);
    }
  });
}

}  // namespace

bool unaryHalfKernel(OpKind op, const Arg& in, char* out) {
  if (in.dtype != DType::bf16 && in.dtype != DType::f16) return false;
  unaryHalfRuns(in.dtype, op, in, out);
  return true;
}

bool binaryHalfKernel(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) {
  const DType t = a.dtype;
  if ((t != DType::bf16 && t != DType::f16) || b.dtype != t) return false;
  ArithF32 arith;
  switch (op) {
    case OpKind::Add: arith = ArithF32::Add; break;
    case OpKind::Sub: arith = ArithF32::Sub; break;
    case OpKind::Mul: arith = ArithF32::Mul; break;
    case OpKind::Div: arith = ArithF32::Div; break;
    default: return false;
  }
  binaryHalfRuns(t, arith, a, b, shape, out);
  return true;
}

}  // namespace kiln::interp
