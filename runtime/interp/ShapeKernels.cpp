// Data-movement kernels: strided copies, index_select, gather and index_add.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "kiln/error.h"
#include "runtime/core/Half.h"
#include "runtime/interp/ElementwiseLoop.h"
#include "runtime/interp/Kernels.h"

namespace kiln::interp {

namespace {
[[noreturn]] void badIndex(const char* op, int64_t index, int axis, int64_t extent) {
  throw Error(std::string(op) + ": index " + std::to_string(index) + " is out of range for axis " +
              std::to_string(axis) + " of extent " + std::to_string(extent) + " (valid: 0 to " +
              std::to_string(extent - 1) + ")");
}
}  // namespace

void checkIndexRange(const char* op, const int64_t* values, int64_t n, int axis, int64_t extent) {
  for (int64_t i = 0; i < n; ++i)
    if (values[i] < 0 || values[i] >= extent) badIndex(op, values[i], axis, extent);
}

void copyIntoKernel(const Arg& in, char* out, const int64_t* outStrides) {
  const auto E = static_cast<int64_t>(dtype_size(in.dtype));
  char* base[2] = {out, const_cast<char*>(in.data)};
  int64_t st[2][Shape::kMaxRank];
  for (int d = 0; d < in.shape.rank(); ++d) {
    st[0][d] = outStrides[d] * E;
    st[1][d] = in.strides[d] * E;
  }
  forEachStrided<2>(in.shape, base, st, [E](char* const* p, const int64_t* s, int64_t n) {
    if (s[0] == E && s[1] == E) {
      std::memcpy(p[0], p[1], static_cast<size_t>(n * E));
      return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * s[0], p[1] + i * s[1], static_cast<size_t>(E));
  });
}

void indexSelectKernel(const Arg& x, int axis, const Arg& index, const Shape& outShape, char* out) {
  // out[pre, j..., post] = x[pre, index[j...], post]
  const auto E = static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t extent = x.shape[axis];
  int64_t pre = 1, post = 1;
  for (int d = 0; d < axis; ++d) pre *= x.shape[d];
  for (int d = axis + 1; d < x.shape.rank(); ++d) post *= x.shape[d];
  const int64_t nIdx = index.shape.numel();
  // Index values in row-major order of the index tensor, checked once.
  std::vector<int64_t> idx(static_cast<size_t>(nIdx));
  copyKernel(index, reinterpret_cast<char*>(idx.data()));
  for (int64_t v : idx)
    if (v < 0 || v >= extent) badIndex("index_select", v, axis, extent);
  // View x as [pre, extent, post] via its strides (pre/post axes may be
  // non-contiguous: copy each [post] run through copyIntoKernel).
  Arg row = x;
  Shape postShape;
  for (int d = axis + 1; d < x.shape.rank(); ++d) postShape.push_back(x.shape[d]);
  row.shape = postShape;
  for (int d = axis + 1; d < x.shape.rank(); ++d) row.strides[d - axis - 1] = x.strides[d];
  int64_t denseStrides[Shape::kMaxRank];
  {
    int64_t s = 1;
    for (int d = postShape.rank() - 1; d >= 0; --d) {
      denseStrides[d] = s;
      s *= postShape[d];
    }
  }
  (void)outShape;
  auto body = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      // Offset of pre-index p in x.
      int64_t off = 0, rem = p;
      for (int d = axis - 1; d >= 0; --d) {
        off += (rem % x.shape[d]) * x.strides[d];
        rem /= x.shape[d];
      }
      for (int64_t j = 0; j < nIdx; ++j) {
        Arg src = row;
        src.data = x.data + (off + idx[j] * x.strides[axis]) * E;
        copyIntoKernel(src, out + ((p * nIdx + j) * post) * E, denseStrides);
      }
    }
  };
  if (pre * nIdx * post < kParallelGrain) {
    body(0, pre);
  } else {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, pre, 1),
                      [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); });
  }
}

namespace {
/// `dst += src` for one element of dtype `t`, rounded in `t` (halves through
/// f32, integers wrapping).
template <class T>
[[gnu::always_inline]] inline void addInto(char* dst, const char* src) {
  T a, b;
  std::memcpy(&a, dst, sizeof(T));
  std::memcpy(&b, src, sizeof(T));
  if constexpr (std::is_floating_point_v<T>) {
    a = a + b;
  } else {
    using U = std::make_unsigned_t<T>;
    a = static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
  std::memcpy(dst, &a, sizeof(T));
}

template <uint16_t (*ToHalf)(float), float (*FromHalf)(uint16_t)>
[[gnu::always_inline]] inline void addIntoHalf(char* dst, const char* src) {
  uint16_t a, b;
  std::memcpy(&a, dst, 2);
  std::memcpy(&b, src, 2);
  a = ToHalf(FromHalf(a) + FromHalf(b));
  std::memcpy(dst, &a, 2);
}

/// The element adder of dtype `t`.
using AddFn = void (*)(char*, const char*);
AddFn adderOf(DType t) {
  switch (t) {
    case DType::f32: return addInto<float>;
    case DType::f64: return addInto<double>;
    case DType::i64: return addInto<int64_t>;
    case DType::i32: return addInto<int32_t>;
    case DType::i8: return addInto<int8_t>;
    case DType::u8: return addInto<uint8_t>;
    case DType::f16: return addIntoHalf<core::floatToHalf, core::halfToFloat>;
    case DType::bf16: return addIntoHalf<core::floatToBf16, core::bf16ToFloat>;
    default: throw Error("index_add: dtype " + std::string(dtype_name(t)) + " does not add");
  }
}

/// Elements of a run below which it is not cut for threads.
constexpr int64_t kRunPiece = 64;

/// out[.., index[i], ..] += source[.., i, ..], the last axis (after `axis`)
/// the inner run, the axes between walked by a counter.
template <class Add>
void addRows(char* out, const Shape& shape, const int64_t* outStrides, int axis, const int64_t* index, int64_t n,
             const Arg& source, Add add) {
  const auto E = static_cast<int64_t>(dtype_size(source.dtype));
  const int rank = shape.rank();
  int64_t pre = 1;
  for (int d = 0; d < axis; ++d) pre *= shape[d];
  // The post axes as [outer..., run]: the last axis is the run; the others
  // are walked by a counter.
  const int postRank = rank - axis - 1;
  const int64_t run = postRank > 0 ? shape[rank - 1] : 1;
  const int64_t runOut = postRank > 0 ? outStrides[rank - 1] : 0, runSrc = postRank > 0 ? source.strides[rank - 1] : 0;
  int64_t outerCount = 1;
  for (int d = axis + 1; d < rank - 1; ++d) outerCount *= shape[d];
  auto offsets = [&](int64_t lin, int from, int to, const int64_t* strides) {
    int64_t off = 0;
    for (int d = to - 1; d >= from; --d) {
      off += (lin % shape[d]) * strides[d];
      lin /= shape[d];
    }
    return off;
  };
  // Tasks own disjoint (pre, outer, piece of the run) triples; each adds
  // every i in order. The run is cut in pieces so that an embedding's
  // gradient (one pre, one outer) is parallel too.
  const int64_t pieces = std::max<int64_t>(1, std::min<int64_t>(run / kRunPiece, kParallelGrain));
  const int64_t pieceLen = (run + pieces - 1) / pieces;
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t piece = t % pieces, po = t / pieces;
      const int64_t p = po / outerCount, o = po % outerCount;
      const int64_t j0 = piece * pieceLen, j1 = std::min(run, j0 + pieceLen);
      const int64_t outBase = offsets(p, 0, axis, outStrides) + offsets(o, axis + 1, rank - 1, outStrides);
      const int64_t srcBase = offsets(p, 0, axis, source.strides) + offsets(o, axis + 1, rank - 1, source.strides);
      for (int64_t i = 0; i < n; ++i) {
        char* dst = out + (outBase + index[i] * outStrides[axis]) * E;
        const char* src = source.data + (srcBase + i * source.strides[axis]) * E;
        for (int64_t j = j0; j < j1; ++j) add(dst + j * runOut * E, src + j * runSrc * E);
      }
    }
  };
  const int64_t tasks = pre * outerCount * pieces;
  if (tasks < 2 || pre * outerCount * n * run < kParallelGrain) {
    body(0, tasks);
  } else {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, 1),
                      [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); });
  }
}
}  // namespace

void indexAddInto(char* out, const Shape& shape, const int64_t* outStrides, int axis, const int64_t* index,
                  int64_t n, const Arg& source) {
  if (shape.numel() == 0 || n == 0) return;
  if (source.dtype == DType::f32) {
    // The hot case (embedding gradients) with the add inlined.
    addRows(out, shape, outStrides, axis, index, n, source,
            [](char* dst, const char* src) { addInto<float>(dst, src); });
    return;
  }
  addRows(out, shape, outStrides, axis, index, n, source, adderOf(source.dtype));
}

RunningSumRows runningSumRows(char* out, DType t, const Shape& shape, const int64_t* outStrides, int axis) {
  RunningSumRows rows;
  const int64_t extent = shape[axis];
  for (int64_t i = 1; i < extent; ++i) rows.next.push_back(i);
  rows.previous.data = out;
  rows.previous.dtype = t;
  rows.previous.shape = shape;
  rows.previous.shape[axis] = extent > 0 ? extent - 1 : 0;
  std::copy(outStrides, outStrides + shape.rank(), rows.previous.strides);
  return rows;
}

void cumsumInto(char* out, const Shape& shape, const int64_t* outStrides, int axis, DType t) {
  if (shape[axis] < 2 || shape.numel() == 0) return;
  const RunningSumRows rows = runningSumRows(out, t, shape, outStrides, axis);
  indexAddInto(out, shape, outStrides, axis, rows.next.data(), static_cast<int64_t>(rows.next.size()),
               rows.previous);
}

void indexAddKernel(const Arg& x, int axis, const std::vector<int64_t>& index, const Arg& source, char* out) {
  copyKernel(x, out);
  int64_t dense[Shape::kMaxRank];
  core::contiguousStrides(x.shape, dense);
  indexAddInto(out, x.shape, dense, axis, index.data(), static_cast<int64_t>(index.size()), source);
}

void gatherKernel(const Arg& x, int axis, const Arg& index, char* out) {
  const auto E = static_cast<int64_t>(dtype_size(x.dtype));
  const Shape& shape = index.shape;
  const int rank = shape.rank();
  const int64_t extent = x.shape[axis];
  const int64_t total = shape.numel();
  const int64_t* ip = reinterpret_cast<const int64_t*>(index.data);
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t lin = b; lin < e; ++lin) {
      int64_t rem = lin, xoff = 0, ioff = 0, axisIdx = 0;
      for (int d = rank - 1; d >= 0; --d) {
        int64_t c = rem % shape[d];
        rem /= shape[d];
        ioff += c * index.strides[d];
        if (d != axis) xoff += c * x.strides[d];
      }
      axisIdx = ip[ioff];
      if (axisIdx < 0 || axisIdx >= extent) badIndex("gather", axisIdx, axis, extent);
      xoff += axisIdx * x.strides[axis];
      std::memcpy(out + lin * E, x.data + xoff * E, static_cast<size_t>(E));
    }
  };
  if (total < kParallelGrain) {
    body(0, total);
  } else {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, total, kParallelGrain / 4),
                      [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); });
  }
}

}  // namespace kiln::interp
