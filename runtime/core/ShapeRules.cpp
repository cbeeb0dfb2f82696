#include "runtime/core/ShapeRules.h"

#include <algorithm>
#include <cstdlib>

#include "runtime/core/TensorSize.h"

namespace kiln::core {

namespace {
int category(DType t) {
  if (t == DType::boolean) return 0;
  return is_integral(t) ? 1 : 2;
}
DType categoryDefault(int cat) {
  return cat == 0 ? DType::boolean : cat == 1 ? DType::i64 : DType::f32;
}
}  // namespace

std::string broadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  int rank = std::max(a.rank(), b.rank());
  Shape r;
  r.resize(rank);
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return "shapes " + a.str() + " and " + b.str() + " do not broadcast: axis " + std::to_string(i - rank) +
             " has extents " + std::to_string(da) + " and " + std::to_string(db) +
             "; extents must be equal or 1 (reshape or slice one operand)";
    r[i] = da == 1 ? db : da;
  }
  if (auto e = checkElementCount(r); !e.empty()) return "broadcasting " + a.str() + " and " + b.str() + ": " + e;
  *out = r;
  return {};
}

std::string checkBroadcastTo(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank())
    return "cannot broadcast " + from.str() + " to the lower-rank shape " + to.str();
  for (int i = 0; i < from.rank(); ++i) {
    int64_t f = from[i], t = to[to.rank() - from.rank() + i];
    if (f != t && f != 1)
      return "cannot broadcast " + from.str() + " to " + to.str() + ": extent " + std::to_string(f) +
             " must equal " + std::to_string(t) + " or be 1";
  }
  return {};
}

std::string normalizeAxis(int64_t axis, int rank, int* out) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
           " (valid: " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")";
  }
  *out = static_cast<int>(a);
  return {};
}

Shape reducedShape(const Shape& in, AxisMask mask, bool keepdim) {
  Shape r;
  for (int i = 0; i < in.rank(); ++i) {
    if (mask & (1u << i)) {
      if (keepdim) r.push_back(1);
    } else {
      r.push_back(in[i]);
    }
  }
  return r;
}

std::string reduceShape(const Shape& in, std::span<const int> axes, bool keepdim, Shape* out, AxisMask* mask) {
  AxisMask m = 0;
  if (axes.empty()) {
    m = in.rank() == 0 ? 0 : ((1u << in.rank()) - 1);
  }
  for (int a : axes) {
    int n;
    if (in.rank() == 0 && (a == 0 || a == -1)) continue;  // rank 0: axis 0/-1 means "the value"
    if (auto e = normalizeAxis(a, in.rank(), &n); !e.empty()) return e;
    if (m & (1u << n)) return "axis " + std::to_string(a) + " is listed twice";
    m |= 1u << n;
  }
  *mask = m;
  *out = reducedShape(in, m, keepdim);
  return {};
}

std::string matmulShape(const Shape& a, const Shape& b, Shape* out) {
  if (a.rank() < 2 || b.rank() < 2)
    return "operands must have rank >= 2, got " + a.str() + " and " + b.str();
  int64_t k1 = a[a.rank() - 1], k2 = b[b.rank() - 2];
  if (k1 != k2)
    return "inner extents differ: " + a.str() + " @ " + b.str() + " needs a's last extent (" + std::to_string(k1) +
           ") to equal b's second-to-last (" + std::to_string(k2) + "); transpose one operand?";
  Shape ba(a.dims().subspan(0, a.rank() - 2)), bb(b.dims().subspan(0, b.rank() - 2)), batch;
  if (auto e = broadcastShapes(ba, bb, &batch); !e.empty())
    return "batch dimensions of " + a.str() + " and " + b.str() + " do not broadcast";
  batch.push_back(a[a.rank() - 2]);
  batch.push_back(b[b.rank() - 1]);
  if (auto e = checkElementCount(batch); !e.empty()) return "the product of " + a.str() + " and " + b.str() + ": " + e;
  *out = batch;
  return {};
}

Conv2dParams Conv2dParams::fromAttrs(std::span<const int64_t> a) {
  Conv2dParams p;
  if (a.size() < static_cast<size_t>(kAttrCount)) return p;
  p.strideH = a[0], p.strideW = a[1];
  p.padTop = a[2], p.padLeft = a[3], p.padBottom = a[4], p.padRight = a[5];
  p.dilationH = a[6], p.dilationW = a[7];
  p.groups = a[8];
  return p;
}

void Conv2dParams::toAttrs(int64_t* a) const {
  const int64_t v[kAttrCount] = {strideH, strideW, padTop, padLeft, padBottom, padRight, dilationH, dilationW, groups};
  std::copy(v, v + kAttrCount, a);
}

namespace {
std::string pair(int64_t a, int64_t b) { return "(" + std::to_string(a) + ", " + std::to_string(b) + ")"; }
}  // namespace

std::string conv2dShape(const Shape& x, const Shape& w, const Conv2dParams& p, Shape* out) {
  if (x.rank() != 4 || w.rank() != 4)
    return "input " + x.str() + " and weight " + w.str() +
           " must both have rank 4 (input [N, C, H, W], weight [C_out, C/groups, kH, kW])";
  if (p.strideH < 1 || p.strideW < 1) return "strides " + pair(p.strideH, p.strideW) + " must be >= 1";
  if (p.dilationH < 1 || p.dilationW < 1) return "dilations " + pair(p.dilationH, p.dilationW) + " must be >= 1";
  if (p.padTop < 0 || p.padLeft < 0 || p.padBottom < 0 || p.padRight < 0)
    return "paddings (top " + std::to_string(p.padTop) + ", left " + std::to_string(p.padLeft) + ", bottom " +
           std::to_string(p.padBottom) + ", right " + std::to_string(p.padRight) + ") must be >= 0";
  if (p.groups < 1) return "groups = " + std::to_string(p.groups) + " must be >= 1";
  const int64_t c = x[1], co = w[0], cg = w[1], kh = w[2], kw = w[3];
  if (c % p.groups != 0 || co % p.groups != 0)
    return "groups = " + std::to_string(p.groups) + " must divide the input channels (" + std::to_string(c) +
           " in " + x.str() + ") and the output channels (" + std::to_string(co) + " in weight " + w.str() + ")";
  if (cg * p.groups != c)
    return "weight " + w.str() + " has " + std::to_string(cg) + " input channels per group, but input " + x.str() +
           " with groups = " + std::to_string(p.groups) + " has " + std::to_string(c / p.groups) +
           "; the weight's second extent must be C/groups";
  if (kh < 1 || kw < 1) return "the kernel " + pair(kh, kw) + " of weight " + w.str() + " is empty";
  const int64_t spanH = (kh - 1) * p.dilationH + 1, spanW = (kw - 1) * p.dilationW + 1;
  const int64_t ph = x[2] + p.padTop + p.padBottom, pw = x[3] + p.padLeft + p.padRight;
  if (spanH > ph || spanW > pw)
    return "the kernel " + pair(kh, kw) + " with dilations " + pair(p.dilationH, p.dilationW) + " spans " +
           pair(spanH, spanW) + ", larger than the padded input " + pair(ph, pw) + " of " + x.str() +
           "; use a smaller kernel or more padding";
  Shape r{x[0], co, (ph - spanH) / p.strideH + 1, (pw - spanW) / p.strideW + 1};
  if (auto e = checkElementCount(r); !e.empty()) return "the result of " + x.str() + " conv " + w.str() + ": " + e;
  *out = r;
  return {};
}

std::string poolExtent(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin, int64_t padEnd,
                       int64_t dilation, bool ceilMode, int64_t* out) {
  if (kernel < 1) return "kernel extent " + std::to_string(kernel) + " must be >= 1";
  if (stride < 1) return "stride " + std::to_string(stride) + " must be >= 1";
  if (dilation < 1) return "dilation " + std::to_string(dilation) + " must be >= 1";
  if (padBegin < 0 || padEnd < 0)
    return "paddings " + pair(padBegin, padEnd) + " must be >= 0";
  const int64_t span = (kernel - 1) * dilation + 1, padded = in + padBegin + padEnd;
  if (span > padded)
    return "the window (kernel " + std::to_string(kernel) + ", dilation " + std::to_string(dilation) + ") spans " +
           std::to_string(span) + ", more than the padded extent " + std::to_string(padded) +
           "; use a smaller kernel or more padding";
  int64_t n = ceilMode ? (padded - span + stride - 1) / stride + 1 : (padded - span) / stride + 1;
  if (ceilMode && (n - 1) * stride >= in + padBegin) --n;  // starts in the end padding
  *out = n;
  return {};
}

void samePadding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, bool upper, int64_t* padBegin,
                 int64_t* padEnd) {
  const int64_t outExtent = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (outExtent - 1) * stride + (kernel - 1) * dilation + 1 - in);
  const int64_t small = total / 2, large = total - small;
  *padBegin = upper ? small : large;
  *padEnd = upper ? large : small;
}

std::string reshapeShape(const Shape& in, const Shape& requested, Shape* out) {
  int inferred = -1;
  Shape known = requested;  // the -1 extent counted as 1
  for (int i = 0; i < requested.rank(); ++i) {
    if (requested[i] == -1) {
      if (inferred >= 0) return "only one extent of " + requested.str() + " may be -1";
      inferred = i;
      known[i] = 1;
    } else if (requested[i] < 0) {
      return "extent " + std::to_string(requested[i]) + " in " + requested.str() + " is negative";
    }
  }
  if (auto e = checkElementCount(known); !e.empty())
    return "cannot reshape " + in.str() + " to " + requested.str() + ": " + e;
  Shape r = requested;
  if (inferred >= 0) {
    const int64_t k = known.numel();
    if (k == 0 || in.numel() % k != 0)
      return "cannot infer the -1 extent of " + requested.str() + " for " + std::to_string(in.numel()) +
             " elements of " + in.str();
    r[inferred] = in.numel() / k;
    // An empty input leaves the other extents' product unchecked by numel.
    if (auto e = checkElementCount(r); !e.empty())
      return "cannot reshape " + in.str() + " to " + requested.str() + ": " + e;
  }
  if (r.numel() != in.numel())
    return "cannot reshape " + in.str() + " (" + std::to_string(in.numel()) + " elements) to " + requested.str() +
           " (" + std::to_string(r.numel()) + " elements)";
  *out = r;
  return {};
}

std::string permuteShape(const Shape& in, std::span<const int64_t> perm, Shape* out) {
  if (static_cast<int>(perm.size()) != in.rank())
    return "permutation has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(in.rank());
  AxisMask seen = 0;
  Shape r;
  for (int64_t p : perm) {
    int n;
    if (auto e = normalizeAxis(p, in.rank(), &n); !e.empty()) return "permutation: " + e;
    if (seen & (1u << n)) return "permutation lists axis " + std::to_string(n) + " twice";
    seen |= 1u << n;
    r.push_back(in[n]);
  }
  *out = r;
  return {};
}

std::string normalizeSlice(int64_t extent, int64_t start, int64_t stop, int64_t step, int64_t* normStart,
                           int64_t* outExtent) {
  if (step <= 0) return "slice step must be positive, got " + std::to_string(step);
  auto clampIdx = [extent](int64_t v) {
    if (v < 0) v += extent;
    return std::clamp<int64_t>(v, 0, extent);
  };
  int64_t s = clampIdx(start), e = clampIdx(stop);
  *normStart = s;
  *outExtent = e > s ? (e - s - 1) / step + 1 : 0;  // (e - s + step - 1) could overflow
  return {};
}

std::string checkSlice(const Shape& in, std::span<const int64_t> starts, std::span<const int64_t> steps,
                       const Shape& out) {
  if (static_cast<int>(starts.size()) != in.rank() || static_cast<int>(steps.size()) != in.rank() ||
      out.rank() != in.rank())
    return "slice needs one start and one step per axis of " + in.str();
  for (int i = 0; i < in.rank(); ++i) {
    if (steps[i] <= 0) return "slice step must be positive on axis " + std::to_string(i);
    if (starts[i] < 0 || starts[i] > in[i])
      return "slice start " + std::to_string(starts[i]) + " is outside [0, " + std::to_string(in[i]) + "] on axis " +
             std::to_string(i);
    int64_t span = 0, last = 0;
    if (out[i] < 0 || (out[i] > 0 && (__builtin_mul_overflow(out[i] - 1, steps[i], &span) ||
                                      __builtin_add_overflow(starts[i], span, &last) || last >= in[i])))
      return "slice of " + std::to_string(out[i]) + " elements from " + std::to_string(starts[i]) + " by " +
             std::to_string(steps[i]) + " runs past extent " + std::to_string(in[i]) + " on axis " + std::to_string(i);
  }
  return {};
}

std::string concatShape(std::span<const Shape* const> ins, int axis, Shape* out) {
  if (ins.empty()) return "needs at least one tensor";
  const Shape& first = *ins[0];
  if (first.rank() == 0) return "cannot concatenate rank-0 tensors (unsqueeze them first)";
  int a;
  if (auto e = normalizeAxis(axis, first.rank(), &a); !e.empty()) return e;
  Shape r = first;
  r[a] = 0;
  for (const Shape* s : ins) {
    if (s->rank() != first.rank())
      return "all tensors need the same rank: " + first.str() + " vs " + s->str();
    for (int i = 0; i < first.rank(); ++i) {
      if (i != a && (*s)[i] != first[i])
        return "extents differ off the concatenation axis " + std::to_string(a) + ": " + first.str() + " vs " +
               s->str();
    }
    if (__builtin_add_overflow(r[a], (*s)[a], &r[a]))
      return "the concatenated extent of axis " + std::to_string(a) + " is more than fits in int64";
  }
  if (auto e = checkElementCount(r); !e.empty()) return e;
  *out = r;
  return {};
}

std::string indexSelectShape(const Shape& x, int axis, const Shape& index, Shape* out) {
  int a;
  if (auto e = normalizeAxis(axis, x.rank(), &a); !e.empty()) return e;
  if (x.rank() - 1 + index.rank() > Shape::kMaxRank)
    return "result rank would exceed " + std::to_string(Shape::kMaxRank);
  Shape r;
  for (int i = 0; i < a; ++i) r.push_back(x[i]);
  for (int64_t d : index) r.push_back(d);
  for (int i = a + 1; i < x.rank(); ++i) r.push_back(x[i]);
  if (auto e = checkElementCount(r); !e.empty()) return e;
  *out = r;
  return {};
}

std::string indexAddShape(const Shape& x, int axis, const Shape& index, const Shape& source) {
  int a;
  if (auto e = normalizeAxis(axis, x.rank(), &a); !e.empty()) return e;
  if (index.rank() != 1) return "index " + index.str() + " must be 1-D (flatten it with reshape)";
  Shape want = x;
  want[a] = index[0];
  if (source != want)
    return "source " + source.str() + " must be " + want.str() + ": x " + x.str() + " with index's " +
           std::to_string(index[0]) + " along axis " + std::to_string(a);
  return {};
}

std::string gatherShape(const Shape& x, int axis, const Shape& index, Shape* out) {
  int a;
  if (auto e = normalizeAxis(axis, x.rank(), &a); !e.empty()) return e;
  if (index.rank() != x.rank())
    return "index " + index.str() + " must have the rank of the input " + x.str();
  for (int i = 0; i < x.rank(); ++i) {
    if (i != a && index[i] > x[i])
      return "index " + index.str() + " is larger than the input " + x.str() + " on axis " + std::to_string(i);
  }
  *out = index;
  return {};
}

std::string scatterAddShape(const Shape& x, int axis, const Shape& index, const Shape& source) {
  Shape positions;
  if (auto e = gatherShape(x, axis, index, &positions); !e.empty()) return e;
  if (source != index)
    return "source " + source.str() + " must have index's shape " + index.str() +
           " (one source element per index; slice source to it)";
  return {};
}

DType resultType(std::span<const TypedOperand> operands) {
  // Promote within each priority tier, then let a lower tier of a higher
  // category win, as PyTorch does.
  bool has[3] = {false, false, false};
  DType tier[3] = {DType::boolean, DType::boolean, DType::boolean};
  for (const TypedOperand& o : operands) {
    int p = static_cast<int>(o.priority);
    DType t = o.dtype;
    if (o.priority == OperandPriority::Scalar) t = categoryDefault(category(t));
    tier[p] = has[p] ? promote_types(tier[p], t) : t;
    has[p] = true;
  }
  DType r{};
  bool any = false;
  for (int p = 2; p >= 0; --p) {
    if (!has[p]) continue;
    if (!any) {
      r = tier[p];
      any = true;
    } else if (category(tier[p]) > category(r)) {
      r = p == 0 ? categoryDefault(category(tier[p])) : tier[p];
    }
  }
  return r;
}

DType floatingResult(DType t) { return is_floating(t) ? t : DType::f32; }

DType sumResult(DType t) { return is_floating(t) ? t : DType::i64; }

std::optional<std::pair<int64_t, int64_t>> integerRange(DType t) {
  switch (t) {
    case DType::i8: return std::pair<int64_t, int64_t>{INT8_MIN, INT8_MAX};
    case DType::u8: return std::pair<int64_t, int64_t>{0, UINT8_MAX};
    case DType::i32: return std::pair<int64_t, int64_t>{INT32_MIN, INT32_MAX};
    case DType::i64: return std::pair<int64_t, int64_t>{INT64_MIN, INT64_MAX};
    default: return std::nullopt;
  }
}

std::string checkArithmetic(const char* what, DType t) {
  if (t == DType::boolean)
    return std::string(what) + " is not defined for bool tensors; use logical_not/logical_xor or cast to an "
                               "integer type first";
  return {};
}

}  // namespace kiln::core
