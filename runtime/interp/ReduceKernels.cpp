// Reductions over any set of axes, and argmax/argmin over one axis.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include "runtime/interp/Dispatch.h"
#include "runtime/interp/Kernels.h"
#include "runtime/interp/VectorClones.h"

namespace kiln::interp {

namespace {

/// Axes as (extent, stride) pairs with neighbours merged where the memory
/// walk allows it; extent-1 axes dropped.
struct Axes {
  int n = 0;
  int64_t extent[Shape::kMaxRank];
  int64_t stride[Shape::kMaxRank];
  int64_t count() const {
    int64_t c = 1;
    for (int i = 0; i < n; ++i) c *= extent[i];
    return c;
  }
  void add(int64_t e, int64_t s) {
    if (e == 1) return;
    if (n > 0 && stride[n - 1] == s * e) {
      extent[n - 1] *= e;
      stride[n - 1] = s;
      return;
    }
    extent[n] = e;
    stride[n] = s;
    ++n;
  }
  /// Element offset of the i-th position (row-major over the axes).
  int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; --d) {
      off += (i % extent[d]) * stride[d];
      i /= extent[d];
    }
    return off;
  }
};

/// An integer whose signed order is the order of the floats it encodes,
/// -0 < +0 included (NaNs sort past the infinities and are handled apart).
/// The map is its own inverse.
template <class K, class T>
[[gnu::always_inline]] inline K orderKey(T x) {
  const K bits = std::bit_cast<K>(x);
  return bits ^ ((bits >> (8 * sizeof(K) - 1)) & std::numeric_limits<K>::max());
}
template <class T, class K>
[[gnu::always_inline]] inline T fromOrderKey(K k) {
  return std::bit_cast<T>(static_cast<K>(k ^ ((k >> (8 * sizeof(K) - 1)) & std::numeric_limits<K>::max())));
}

/// IEEE maximum (or minimum) of p[0..n), n > 0: NaN when any element is
/// NaN, else the extreme with +0 > -0. Branch-free over one vector of lanes
/// of integer keys, so the compiler vectorises it for the clone's ISA.
template <class T, class K, bool IsMax>
[[gnu::always_inline]] inline T extremeLanes(const T* p, int64_t n) {
  constexpr int kLanes = 64 / sizeof(T);
  const K start = orderKey<K>(IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity());
  K best[kLanes], nan[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    best[l] = start;
    nan[l] = 0;
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const T x = p[i + l];
      const K k = orderKey<K>(x);
      best[l] = IsMax ? (k > best[l] ? k : best[l]) : (k < best[l] ? k : best[l]);
      nan[l] |= static_cast<K>(x != x);
    }
  for (int l = 0; i < n; ++i, ++l) {
    const T x = p[i];
    const K k = orderKey<K>(x);
    best[l] = IsMax ? (k > best[l] ? k : best[l]) : (k < best[l] ? k : best[l]);
    nan[l] |= static_cast<K>(x != x);
  }
  K b = best[0], anyNan = 0;
  for (int l = 0; l < kLanes; ++l) {
    b = IsMax ? (best[l] > b ? best[l] : b) : (best[l] < b ? best[l] : b);
    anyNan |= nan[l];
  }
  return anyNan ? std::numeric_limits<T>::quiet_NaN() : fromOrderKey<T>(b);
}

KILN_VECTOR_CLONES float extremeRunF32(const float* p, int64_t n, bool isMax) {
  return isMax ? extremeLanes<float, int32_t, true>(p, n) : extremeLanes<float, int32_t, false>(p, n);
}
KILN_VECTOR_CLONES double extremeRunF64(const double* p, int64_t n, bool isMax) {
  return isMax ? extremeLanes<double, int64_t, true>(p, n) : extremeLanes<double, int64_t, false>(p, n);
}
inline float extremeOfRun(const float* p, int64_t n, bool isMax) { return extremeRunF32(p, n, isMax); }
inline double extremeOfRun(const double* p, int64_t n, bool isMax) { return extremeRunF64(p, n, isMax); }

template <class T, class Acc>
struct Reducer {
  OpKind op;
  Acc identity() const {
    switch (op) {
      case OpKind::ReduceSum: return Acc(0);
      case OpKind::ReduceProd: return Acc(1);
      case OpKind::ReduceMax:
        if constexpr (std::is_floating_point_v<Acc>) return -std::numeric_limits<Acc>::infinity();
        else return std::numeric_limits<Acc>::lowest();
      default:
        if constexpr (std::is_floating_point_v<Acc>) return std::numeric_limits<Acc>::infinity();
        else return std::numeric_limits<Acc>::max();
    }
  }
  Acc combine(Acc a, Acc b) const {
    switch (op) {
      case OpKind::ReduceSum:
        if constexpr (std::is_integral_v<Acc> && !std::is_same_v<Acc, bool>)
          return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
        else return a + b;
      case OpKind::ReduceProd:
        if constexpr (std::is_integral_v<Acc> && !std::is_same_v<Acc, bool>)
          return static_cast<Acc>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
        else return a * b;
      // Floats: IEEE 754-2019 maximum/minimum, as the compiled kernels: NaN
      // wins and +0 > -0, so the result does not depend on the order.
      case OpKind::ReduceMax:
        if constexpr (std::is_floating_point_v<Acc>) {
          if (a != a) return a;
          if (b != b) return b;
          if (a == b) return std::signbit(a) ? b : a;
        }
        return a > b ? a : b;
      default:
        if constexpr (std::is_floating_point_v<Acc>) {
          if (a != a) return a;
          if (b != b) return b;
          if (a == b) return std::signbit(a) ? a : b;
        }
        return a < b ? a : b;
    }
  }
  /// Reduces a strided run of n elements.
  Acc run(const T* p, int64_t n, int64_t stride, Acc acc) const {
    if constexpr (std::is_floating_point_v<T>) {
      if ((op == OpKind::ReduceMax || op == OpKind::ReduceMin) && stride == 1 && n > 0)
        return combine(acc, static_cast<Acc>(extremeOfRun(p, n, op == OpKind::ReduceMax)));
    }
    if (op == OpKind::ReduceSum && stride == 1) {
      // Independent partial sums vectorise and keep f32 error small.
      Acc part[8] = {Acc(0), Acc(0), Acc(0), Acc(0), Acc(0), Acc(0), Acc(0), Acc(0)};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) part[l] = combine(part[l], static_cast<Acc>(p[i + l]));
      for (; i < n; ++i) part[0] = combine(part[0], static_cast<Acc>(p[i]));
      for (int l = 0; l < 8; ++l) acc = combine(acc, part[l]);
      return acc;
    }
    for (int64_t i = 0; i < n; ++i) acc = combine(acc, static_cast<Acc>(p[i * stride]));
    return acc;
  }
};

template <class T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<std::is_same_v<T, bool>, bool, int64_t>>;

template <class T>
void reduceTyped(OpKind op, const Arg& in, core::AxisMask mask, T* out) {
  // Sum and product accumulate wide; max/min compare in the element type.
  using Acc = std::conditional_t<std::is_same_v<T, bool>, bool, AccOf<T>>;
  Reducer<T, Acc> red{op};
  const T* src = reinterpret_cast<const T*>(in.data);
  Axes kept, reduced;
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (mask & (1u << d)) reduced.add(in.shape[d], in.strides[d]);
    else kept.add(in.shape[d], in.strides[d]);
  }
  const int64_t outCount = kept.count(), redCount = reduced.count();
  if (outCount == 0) return;
  auto finish = [](Acc a) { return static_cast<T>(a); };

  // One run of contiguous (or singly strided) elements per output.
  if (reduced.n <= 1) {
    const int64_t rs = reduced.n ? reduced.stride[0] : 1;
    if (outCount == 1) {
      // Whole-range reduction: split the run over threads, always at the
      // same points and joined in the same order (parallel_reduce's
      // splits follow the threads' stealing, so a sum's bits varied from
      // run to run).
      Acc total = tbb::parallel_deterministic_reduce(
          tbb::blocked_range<int64_t>(0, redCount, 1 << 16), red.identity(),
          [&](const tbb::blocked_range<int64_t>& r, Acc acc) {
            return red.run(src + kept.offset(0) + r.begin() * rs, r.end() - r.begin(), rs, acc);
          },
          [&](Acc a, Acc b) { return red.combine(a, b); });
      out[0] = finish(total);
      return;
    }
    // Kept axes contiguous and the reduced axis outer: accumulate whole rows.
    if (kept.n == 1 && kept.stride[0] == 1 && rs != 1) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, outCount, 1024), [&](const tbb::blocked_range<int64_t>& r) {
        const int64_t width = r.end() - r.begin();
        // Not a vector: vector<bool> has no data() (max/min of bools).
        std::unique_ptr<Acc[]> acc(new Acc[static_cast<size_t>(width)]);
        Acc* a = acc.get();
        std::fill(a, a + width, red.identity());
        auto columns = [&](auto combine) {
          for (int64_t j = 0; j < redCount; ++j) {
            const T* row = src + j * rs + r.begin();
            for (int64_t k = 0; k < width; ++k) a[k] = combine(a[k], static_cast<Acc>(row[k]));
          }
        };
        // A sum's additions without the op's switch in the loop, which kept
        // it scalar (the same additions in the same order): a linear layer's
        // bias gradient, a sum over the batch, took 7x a row sum's time.
        if (op == OpKind::ReduceSum)
          columns([](Acc x, Acc y) { return Reducer<T, Acc>{OpKind::ReduceSum}.combine(x, y); });
        else
          columns([&](Acc x, Acc y) { return red.combine(x, y); });
        for (int64_t k = 0; k < width; ++k) out[r.begin() + k] = finish(a[k]);
      });
      return;
    }
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(redCount, 1));
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, outCount, grain), [&](const tbb::blocked_range<int64_t>& r) {
      for (int64_t o = r.begin(); o < r.end(); ++o)
        out[o] = finish(red.run(src + kept.offset(o), redCount, rs, red.identity()));
    });
    return;
  }
  // General case: several non-mergeable reduced axes.
  const int64_t inner = reduced.extent[reduced.n - 1], innerStride = reduced.stride[reduced.n - 1];
  Axes outerRed = reduced;
  outerRed.n -= 1;
  const int64_t outerCount = outerRed.count();
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(redCount, 1));
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, outCount, grain), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t o = r.begin(); o < r.end(); ++o) {
      const T* base = src + kept.offset(o);
      Acc acc = red.identity();
      for (int64_t j = 0; j < outerCount; ++j) acc = red.run(base + outerRed.offset(j), inner, innerStride, acc);
      out[o] = finish(acc);
    }
  });
}

}  // namespace

void reduceKernel(OpKind op, const Arg& in, core::AxisMask mask, char* out) {
  if (op == OpKind::ReduceSum || op == OpKind::ReduceProd) {
    dispatchNumeric(in.dtype, [&]<class T>() { reduceTyped<T>(op, in, mask, reinterpret_cast<T*>(out)); });
  } else {
    dispatchAll(in.dtype, [&]<class T>() { reduceTyped<T>(op, in, mask, reinterpret_cast<T*>(out)); });
  }
}

void argReduceKernel(OpKind op, const Arg& in, int axis, bool selectLast, char* out) {
  dispatchAll(in.dtype, [&]<class T>() {
    const T* src = reinterpret_cast<const T*>(in.data);
    int64_t* o = reinterpret_cast<int64_t*>(out);
    Axes kept;
    for (int d = 0; d < in.shape.rank(); ++d)
      if (d != axis) kept.add(in.shape[d], in.strides[d]);
    const int64_t n = in.shape.rank() ? in.shape[axis] : 1, s = in.shape.rank() ? in.strides[axis] : 0;
    const bool isMax = op == OpKind::ArgMax;
    const int64_t outCount = kept.count();
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1));
    // The last extreme is the first one met scanning backwards.
    const int64_t first = selectLast ? n - 1 : 0, dir = selectLast ? -1 : 1;
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, outCount, grain), [&](const tbb::blocked_range<int64_t>& r) {
      for (int64_t k = r.begin(); k < r.end(); ++k) {
        const T* p = src + kept.offset(k);
        int64_t best = first;
        T bv = p[first * s];
        for (int64_t j = 1; j < n; ++j) {
          const int64_t i = first + j * dir;
          T v = p[i * s];
          if constexpr (std::is_floating_point_v<T>) {
            if (bv != bv) break;  // the first NaN met is the extreme
            if (v != v) {
              best = i;
              bv = v;
              break;
            }
          }
          if (isMax ? v > bv : v < bv) {
            best = i;
            bv = v;
          }
        }
        o[k] = best;
      }
    });
  });
}

}  // namespace kiln::interp
