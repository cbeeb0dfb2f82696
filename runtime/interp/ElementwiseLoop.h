// The strided n-operand loop under every elementwise kernel: coalesces
// axes, splits the index space over TBB threads, and hands the innermost run
// to a kernel that specialises contiguous and broadcast cases.
#pragma once

#include <algorithm>
#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "kiln/shape.h"

namespace kiln::interp {

/// Operand k has base pointer base[k] and byte strides strides[k][d] over
/// `shape`. `inner(ptrs, innerStrides, count)` processes `count` elements
/// along the last (coalesced) axis.
template <int N, class Inner>
void forEachStrided(const Shape& shape, char* const (&base)[N], const int64_t (&strides)[N][Shape::kMaxRank],
                    const Inner& inner, int64_t grain = 32768) {
  const int64_t total = shape.numel();
  if (total == 0) return;
  // Coalesce: drop extent-1 axes, merge an axis into the next outer one when
  // every operand steps over them as one.
  int64_t dims[Shape::kMaxRank];
  int64_t st[N][Shape::kMaxRank];
  int rank = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    if (rank > 0) {
      bool merge = true;
      for (int k = 0; k < N; ++k)
        if (st[k][rank - 1] != strides[k][d] * shape[d]) merge = false;
      if (merge) {
        dims[rank - 1] *= shape[d];
        for (int k = 0; k < N; ++k) st[k][rank - 1] = strides[k][d];
        continue;
      }
    }
    dims[rank] = shape[d];
    for (int k = 0; k < N; ++k) st[k][rank] = strides[k][d];
    ++rank;
  }
  if (rank == 0) {
    dims[0] = 1;
    for (int k = 0; k < N; ++k) st[k][0] = 0;
    rank = 1;
  }

  auto runRange = [&](int64_t begin, int64_t end) {
    int64_t idx[Shape::kMaxRank];
    int64_t rem = begin;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
    }
    char* ptr[N];
    int64_t innerStrides[N];
    for (int k = 0; k < N; ++k) {
      ptr[k] = base[k];
      for (int d = 0; d < rank; ++d) ptr[k] += idx[d] * st[k][d];
      innerStrides[k] = st[k][rank - 1];
    }
    int64_t pos = begin;
    const int last = rank - 1;
    while (pos < end) {
      int64_t count = std::min(dims[last] - idx[last], end - pos);
      inner(ptr, innerStrides, count);
      pos += count;
      if (pos >= end) break;
      idx[last] += count;
      for (int k = 0; k < N; ++k) ptr[k] += count * st[k][last];
      for (int d = last; d > 0 && idx[d] == dims[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
        for (int k = 0; k < N; ++k) ptr[k] += st[k][d - 1] - dims[d] * st[k][d];
      }
    }
  };
  if (total < grain) {
    runRange(0, total);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, total, grain),
                    [&](const tbb::blocked_range<int64_t>& r) { runRange(r.begin(), r.end()); });
}

/// Byte strides of a dense row-major buffer.
inline void denseByteStrides(const Shape& shape, int64_t elemSize, int64_t* out) {
  int64_t s = elemSize;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    out[d] = s;
    s *= shape[d];
  }
}

}  // namespace kiln::interp
