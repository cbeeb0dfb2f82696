#include "runtime/backends/gpu/Tier0OpLibrary.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "kiln/error.h"
#include "runtime/backends/Hal.h"
#include "runtime/core/Storage.h"
#include "runtime/interp/Kernels.h"

namespace kiln::hal {

using tier0::Family;
using tier0::KernelSpec;
using tier0::Layout;

Tier0OpLibrary::Tier0OpLibrary(Device device) : device_(device) {}

void Tier0OpLibrary::launch(KernelSpec spec, const Shape& shape, char* out, const int64_t* outStrides,
                           std::initializer_list<Operand> inputs) {
  const int64_t n = shape.numel();
  if (n == 0) return;
  // Axes with their strides, operand 0 the output; extent-1 axes dropped and
  // axes merged where every operand steps through them as through one.
  const int operands = 1 + static_cast<int>(inputs.size());
  int64_t dense[Shape::kMaxRank];
  core::contiguousStrides(shape, dense);
  const int64_t* strideOf[4] = {outStrides ? outStrides : dense, nullptr, nullptr, nullptr};
  {
    int k = 1;
    for (const Operand& o : inputs) strideOf[k++] = o.strides;
  }
  int64_t extent[Shape::kMaxRank];
  int64_t stride[4][Shape::kMaxRank];
  int rank = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = rank > 0;
    for (int o = 0; o < operands && merge; ++o)
      merge = stride[o][rank - 1] == strideOf[o][d] * shape[d];
    if (merge) {
      extent[rank - 1] *= shape[d];
      for (int o = 0; o < operands; ++o) stride[o][rank - 1] = strideOf[o][d];
      continue;
    }
    extent[rank] = shape[d];
    for (int o = 0; o < operands; ++o) stride[o][rank] = strideOf[o][d];
    ++rank;
  }
  spec.layout = rank <= 1 ? Layout::Rank1 : Layout::RankN;
  const std::string entry = spec.entryName();

  // Parameters: all 8 bytes (Tier0Kernels.h).
  std::vector<uint64_t> values;
  values.reserve(static_cast<size_t>(spec.paramCount()));
  values.push_back(reinterpret_cast<uintptr_t>(out));
  for (const Operand& o : inputs) values.push_back(reinterpret_cast<uintptr_t>(o.data));
  values.push_back(static_cast<uint64_t>(n));
  const int firstStrided = spec.stridedOutput() ? 0 : 1;
  if (spec.layout == Layout::Rank1) {
    for (int o = firstStrided; o < operands; ++o) values.push_back(static_cast<uint64_t>(rank == 0 ? 0 : stride[o][0]));
  } else {
    const int pad = tier0::kRank - rank;
    for (int d = 0; d < tier0::kRank; ++d) values.push_back(static_cast<uint64_t>(d < pad ? 1 : extent[d - pad]));
    for (int o = firstStrided; o < operands; ++o)
      for (int d = 0; d < tier0::kRank; ++d) values.push_back(static_cast<uint64_t>(d < pad ? 0 : stride[o][d - pad]));
  }
  if (static_cast<int>(values.size()) != spec.paramCount())
    throw Error(device_.str() + ": " + entry + ": internal error: " + std::to_string(values.size()) +
                " parameters packed, the kernel takes " + std::to_string(spec.paramCount()));
  dispatch(entry, values, n);
}

void Tier0OpLibrary::unary(core::OpKind op, const interp::Arg& in, char* out) {
  KernelSpec s;
  s.family = Family::Unary;
  s.op = op;
  s.in = s.out = in.dtype;
  launch(s, in.shape, out, nullptr, {{in.data, in.strides}});
}

void Tier0OpLibrary::binary(core::OpKind op, const interp::Arg& a, const interp::Arg& b, const Shape& shape,
                           char* out) {
  KernelSpec s;
  s.family = Family::Binary;
  s.op = op;
  s.in = s.out = a.dtype;
  launch(s, shape, out, nullptr, {{a.data, a.strides}, {b.data, b.strides}});
}

void Tier0OpLibrary::compare(core::OpKind op, const interp::Arg& a, const interp::Arg& b, const Shape& shape,
                            char* out) {
  KernelSpec s;
  s.family = Family::Compare;
  s.op = op;
  s.in = a.dtype;
  s.out = DType::boolean;
  launch(s, shape, out, nullptr, {{a.data, a.strides}, {b.data, b.strides}});
}

void Tier0OpLibrary::where(const interp::Arg& cond, const interp::Arg& a, const interp::Arg& b, const Shape& shape,
                          char* out) {
  KernelSpec s;
  s.family = Family::Where;
  s.op = core::OpKind::Where;
  s.in = s.out = a.dtype;
  launch(s, shape, out, nullptr, {{cond.data, cond.strides}, {a.data, a.strides}, {b.data, b.strides}});
}

void Tier0OpLibrary::cast(const interp::Arg& in, DType to, char* out) {
  if (in.dtype == to) {
    copy(in, out);
    return;
  }
  KernelSpec s;
  s.family = Family::Cast;
  s.op = core::OpKind::Cast;
  s.in = in.dtype;
  s.out = to;
  launch(s, in.shape, out, nullptr, {{in.data, in.strides}});
}

void Tier0OpLibrary::copy(const interp::Arg& in, char* out) {
  KernelSpec s;
  s.family = Family::Copy;
  s.in = s.out = tier0::dtypeOfSize(dtype_size(in.dtype));
  launch(s, in.shape, out, nullptr, {{in.data, in.strides}});
}

void Tier0OpLibrary::copyInto(const interp::Arg& in, char* out, const int64_t* outStrides) {
  KernelSpec s;
  s.family = Family::Copy;
  s.in = s.out = tier0::dtypeOfSize(dtype_size(in.dtype));
  launch(s, in.shape, out, outStrides, {{in.data, in.strides}});
}

void Tier0OpLibrary::full(DType t, int64_t n, double f, int64_t i, char* out) {
  // The element's bytes, made on the host by the reference kernel.
  uint64_t pattern = 0;
  interp::fullKernel(t, 1, f, i, reinterpret_cast<char*>(&pattern));
  KernelSpec s;
  s.family = Family::Fill;
  s.in = s.out = tier0::dtypeOfSize(dtype_size(t));
  launchLeaf(s, n, {pattern}, out);
}

void Tier0OpLibrary::launchLeaf(const KernelSpec& spec, int64_t n, std::initializer_list<uint64_t> extra, char* out) {
  if (n <= 0) return;
  const std::string entry = spec.entryName();
  std::vector<uint64_t> values = {reinterpret_cast<uintptr_t>(out), static_cast<uint64_t>(n)};
  values.insert(values.end(), extra.begin(), extra.end());
  dispatch(entry, values, n);
}

void Tier0OpLibrary::arange(DType t, int64_t n, double start, double step, char* out) {
  KernelSpec s;
  s.family = Family::Arange;
  s.op = core::OpKind::Arange;
  s.in = s.out = t;
  uint64_t startBits = 0, stepBits = 0;
  std::memcpy(&startBits, &start, 8);
  std::memcpy(&stepBits, &step, 8);
  launchLeaf(s, n, {startBits, stepBits}, out);
}

void Tier0OpLibrary::random(core::OpKind op, DType t, int64_t n, uint64_t seed, char* out) {
  KernelSpec s;
  s.family = Family::Random;
  s.op = op;
  s.in = s.out = t;
  launchLeaf(s, n, {seed}, out);
}

void Tier0OpLibrary::reduce(core::OpKind op, const interp::Arg& in, core::AxisMask mask, char* out) {
  // Kept axes index the (dense) output, reduced axes are folded in order.
  int64_t keptExtent[Shape::kMaxRank], keptStride[Shape::kMaxRank], redExtent[Shape::kMaxRank],
      redStride[Shape::kMaxRank];
  int kept = 0, reduced = 0;
  int64_t nOut = 1, m = 1;
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (mask & (1u << d)) {
      redExtent[reduced] = in.shape[d];
      redStride[reduced++] = in.strides[d];
      m *= in.shape[d];
    } else {
      keptExtent[kept] = in.shape[d];
      keptStride[kept++] = in.strides[d];
      nOut *= in.shape[d];
    }
  }
  if (nOut == 0) return;
  if (m == 0) {
    if (op == core::OpKind::ReduceSum || op == core::OpKind::ReduceProd) {
      full(in.dtype, nOut, op == core::OpKind::ReduceSum ? 0.0 : 1.0, op == core::OpKind::ReduceSum ? 0 : 1, out);
      return;
    }
    throw Error(std::string(core::opName(op)) + " on " + device_.str() + ": " + in.shape.str() +
                " has no elements along the reduced axes");
  }
  KernelSpec s;
  // A warp per output where the lanes' loads coalesce (the innermost reduced
  // axis contiguous) and every lane has an element of each of its rows; else
  // a thread per output.
  const bool warp = hasWarpReductions() && (in.dtype == DType::f32 || in.dtype == DType::i32) && reduced > 0 &&
                    redStride[reduced - 1] == 1 && redExtent[reduced - 1] >= 32;
  s.family = warp ? Family::WarpReduce : Family::Reduce;
  s.op = op;
  s.in = s.out = in.dtype;
  s.layout = Layout::RankN;
  const std::string entry = s.entryName();
  std::vector<uint64_t> values = {reinterpret_cast<uintptr_t>(out), reinterpret_cast<uintptr_t>(in.data),
                                  static_cast<uint64_t>(nOut)};
  auto padded = [&](const int64_t* v, int count, uint64_t fill) {
    for (int d = 0; d < tier0::kRank; ++d) {
      const int at = d - (tier0::kRank - count);
      values.push_back(at < 0 ? fill : static_cast<uint64_t>(v[at]));
    }
  };
  padded(keptExtent, kept, 1);
  padded(keptStride, kept, 0);
  values.push_back(static_cast<uint64_t>(m));
  padded(redExtent, reduced, 1);
  padded(redStride, reduced, 0);
  dispatch(entry, values, warp ? nOut * 32 : nOut);
}

void Tier0OpLibrary::launchTake(const interp::Arg& x, const interp::Arg& index, const Shape& outShape,
                               const int64_t* xStrides, const int64_t* indexStrides, int64_t axisStride, char* out) {
  const int64_t n = outShape.numel();
  if (n == 0) return;
  KernelSpec s;
  s.family = Family::Take;
  s.in = s.out = tier0::dtypeOfSize(dtype_size(x.dtype));
  s.layout = Layout::RankN;
  const std::string entry = s.entryName();
  std::vector<uint64_t> values = {reinterpret_cast<uintptr_t>(out), reinterpret_cast<uintptr_t>(x.data),
                                  reinterpret_cast<uintptr_t>(index.data), static_cast<uint64_t>(n)};
  const int rank = outShape.rank(), pad = tier0::kRank - rank;
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 1 : static_cast<uint64_t>(outShape[d - pad]));
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 0 : static_cast<uint64_t>(xStrides[d - pad]));
  for (int d = 0; d < tier0::kRank; ++d)
    values.push_back(d < pad ? 0 : static_cast<uint64_t>(indexStrides[d - pad]));
  values.push_back(static_cast<uint64_t>(axisStride));
  dispatch(entry, values, n);
}

void Tier0OpLibrary::indexSelect(const interp::Arg& x, int axis, const interp::Arg& index, const Shape& outShape,
                                char* out) {
  // out[pre, j..., post] = x[pre, index[j...], post]
  int64_t xs[Shape::kMaxRank] = {}, is[Shape::kMaxRank] = {};
  const int k = index.shape.rank();
  for (int d = 0; d < outShape.rank(); ++d) {
    if (d < axis) xs[d] = x.strides[d];
    else if (d < axis + k) is[d] = index.strides[d - axis];
    else xs[d] = x.strides[d - k + 1];
  }
  launchTake(x, index, outShape, xs, is, x.strides[axis], out);
}

void Tier0OpLibrary::gather(const interp::Arg& x, int axis, const interp::Arg& index, char* out) {
  // out[c] = x[c with c[axis] = index[c]]
  int64_t xs[Shape::kMaxRank] = {};
  for (int d = 0; d < index.shape.rank(); ++d) xs[d] = d == axis ? 0 : x.strides[d];
  launchTake(x, index, index.shape, xs, index.strides, x.strides[axis], out);
}

namespace {

/// index_add's checked index as IndexAddRows' table (Tier0Kernels.h): the
/// distinct target rows, where each one's source rows start, and the source
/// rows grouped by target, each group in index order.
/// `groups` receives the number of distinct targets.
std::vector<int64_t> targetRowTable(const std::vector<int64_t>& index, int64_t& groups) {
  const auto count = static_cast<int64_t>(index.size());
  std::vector<int64_t> order(index.size());
  for (int64_t j = 0; j < count; ++j) order[j] = j;
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return index[a] != index[b] ? index[a] < index[b] : a < b; });
  std::vector<int64_t> targets, starts;
  for (int64_t k = 0; k < count; ++k) {
    if (k == 0 || index[order[k]] != index[order[k - 1]]) {
      targets.push_back(index[order[k]]);
      starts.push_back(k);
    }
  }
  starts.push_back(count);
  groups = static_cast<int64_t>(targets.size());
  std::vector<int64_t> table;
  table.reserve(targets.size() + starts.size() + order.size());
  table.insert(table.end(), targets.begin(), targets.end());
  table.insert(table.end(), starts.begin(), starts.end());
  table.insert(table.end(), order.begin(), order.end());
  return table;
}

}  // namespace

void Tier0OpLibrary::indexAdd(const interp::Arg& x, int axis, std::vector<int64_t> index,
                              const interp::Arg& source, char* out) {
  const Shape& shape = x.shape;
  if (shape.numel() == 0) return;
  copy(x, out);
  if (index.empty()) return;
  int64_t outStrides[Shape::kMaxRank];
  core::contiguousStrides(shape, outStrides);
  // One launch (index_add takes numeric dtypes only: no bool reaches here;
  // halves add through f32 as the host's). A source that reads out itself
  // (cumsum: each row adds the row before it, already summed) needs the
  // additions in index order across rows: IndexAdd, each position of a row
  // walking the whole index. Otherwise each target row's additions are its
  // own: IndexAddRows, a thread per position of each distinct target, over
  // its source rows (Tier0Kernels.h). The index or the table goes to the
  // device on the stream the kernel runs on; the host copy lives until that
  // copy is done.
  const auto outBegin = reinterpret_cast<uintptr_t>(out), at = reinterpret_cast<uintptr_t>(source.data);
  const bool readsOut = at >= outBegin && at < outBegin + shape.numel() * dtype_size(x.dtype);
  const auto count = static_cast<int64_t>(index.size());
  int64_t groups = 0;
  auto values = std::make_shared<std::vector<int64_t>>(readsOut ? std::move(index) : targetRowTable(index, groups));
  const auto length = static_cast<int64_t>(values->size());
  const core::View onDevice =
      interp::allocDense(deviceContext(device_).allocator(), DType::i64, Shape{length}, "index_add");
  Stream& stream = deviceContext(device_).defaultStream();
  stream.copy(onDevice.bytes(DType::i64), values->data(), static_cast<std::size_t>(length) * sizeof(int64_t));
  stream.hostCall([values] {});
  launchIndexAdd(shape, axis, outStrides, out, source, onDevice.bytes(DType::i64), count, groups);
}

void Tier0OpLibrary::launchIndexAdd(const Shape& shape, int axis, const int64_t* outStrides, char* out,
                                    const interp::Arg& source, const char* index, int64_t count, int64_t groups) {
  KernelSpec s;
  s.family = groups > 0 ? Family::IndexAddRows : Family::IndexAdd;
  s.op = core::OpKind::IndexAdd;
  s.in = s.out = source.dtype;
  s.layout = Layout::RankN;
  Shape row = shape;  // the positions one index value addresses
  row[axis] = 1;
  const int64_t rowN = row.numel(), n = groups > 0 ? groups * rowN : rowN;
  std::vector<uint64_t> values = {reinterpret_cast<uintptr_t>(out), reinterpret_cast<uintptr_t>(source.data),
                                  reinterpret_cast<uintptr_t>(index), static_cast<uint64_t>(n)};
  const int rank = row.rank(), pad = tier0::kRank - rank;
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 1 : static_cast<uint64_t>(row[d - pad]));
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 0 : static_cast<uint64_t>(outStrides[d - pad]));
  for (int d = 0; d < tier0::kRank; ++d)
    values.push_back(d < pad ? 0 : static_cast<uint64_t>(source.strides[d - pad]));
  if (groups > 0) {
    values.push_back(static_cast<uint64_t>(rowN));
    values.push_back(static_cast<uint64_t>(groups));
  } else {
    values.push_back(static_cast<uint64_t>(count));
  }
  values.push_back(static_cast<uint64_t>(outStrides[axis]));
  values.push_back(static_cast<uint64_t>(source.strides[axis]));
  if (static_cast<int>(values.size()) != s.paramCount())
    throw Error(device_.str() + ": " + s.entryName() + ": internal error: " + std::to_string(values.size()) +
                " parameters packed, the kernel takes " + std::to_string(s.paramCount()));
  dispatch(s.entryName(), values, n);
}

void Tier0OpLibrary::argReduce(core::OpKind op, const interp::Arg& in, int axis, bool selectLast, char* out) {
  int64_t keptExtent[Shape::kMaxRank], keptStride[Shape::kMaxRank];
  int kept = 0;
  int64_t nOut = 1;
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (d == axis) continue;
    keptExtent[kept] = in.shape[d];
    keptStride[kept++] = in.strides[d];
    nOut *= in.shape[d];
  }
  const int64_t len = in.shape.rank() ? in.shape[axis] : 1, axisStride = in.shape.rank() ? in.strides[axis] : 0;
  if (nOut == 0) return;
  if (len == 0)
    throw Error(std::string(core::opName(op)) + " on " + device_.str() + ": " + in.shape.str() +
                " has no elements along axis " + std::to_string(axis));
  KernelSpec s;
  s.family = Family::ArgReduce;
  s.op = op;
  s.in = in.dtype;
  s.out = DType::i64;
  s.layout = Layout::RankN;
  const std::string entry = s.entryName();
  std::vector<uint64_t> values = {reinterpret_cast<uintptr_t>(out), reinterpret_cast<uintptr_t>(in.data),
                                  static_cast<uint64_t>(nOut)};
  const int pad = tier0::kRank - kept;
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 1 : static_cast<uint64_t>(keptExtent[d - pad]));
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 0 : static_cast<uint64_t>(keptStride[d - pad]));
  values.push_back(static_cast<uint64_t>(len));
  values.push_back(static_cast<uint64_t>(axisStride));
  values.push_back(static_cast<uint64_t>(selectLast ? len - 1 : 0));
  values.push_back(static_cast<uint64_t>(selectLast ? int64_t{-1} : int64_t{1}));
  dispatch(entry, values, nOut);
}
void Tier0OpLibrary::matmul(const interp::Arg& a, const interp::Arg& b, const Shape& outShape, char* out) {
  // One dot product per output element (tier 0 until cuBLASLt): a and b are
  // broadcast to the batch dims of outShape.
  const int64_t n = outShape.numel();
  if (n == 0) return;
  const int r = outShape.rank();
  int64_t as[Shape::kMaxRank] = {}, bs[Shape::kMaxRank] = {};
  for (int d = 0; d < r - 2; ++d) {
    as[d] = a.strides[d];
    bs[d] = b.strides[d];
  }
  as[r - 2] = a.strides[r - 2];  // M
  bs[r - 1] = b.strides[r - 1];  // N
  const int64_t k = a.shape[r - 1];
  KernelSpec s;
  s.family = Family::Contract;
  s.op = core::OpKind::Matmul;
  s.in = s.out = a.dtype;
  s.layout = Layout::RankN;
  const std::string entry = s.entryName();
  std::vector<uint64_t> values = {reinterpret_cast<uintptr_t>(out), reinterpret_cast<uintptr_t>(a.data),
                                  reinterpret_cast<uintptr_t>(b.data), static_cast<uint64_t>(n)};
  const int pad = tier0::kRank - r;
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 1 : static_cast<uint64_t>(outShape[d - pad]));
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 0 : static_cast<uint64_t>(as[d - pad]));
  for (int d = 0; d < tier0::kRank; ++d) values.push_back(d < pad ? 0 : static_cast<uint64_t>(bs[d - pad]));
  values.push_back(static_cast<uint64_t>(k));
  values.push_back(static_cast<uint64_t>(a.strides[r - 1]));
  values.push_back(static_cast<uint64_t>(b.strides[r - 2]));
  dispatch(entry, values, n);
}
void Tier0OpLibrary::conv2d(const interp::Arg& x, const interp::Arg& w, const core::Conv2dParams& p,
                            const Shape& outShape, char* out) {
  // Tier 0 as copies and one batched matmul of the existing kernels:
  // x zero-padded, unfolded (im2col) into cols [N, G, Cg*kh*kw, Ho*Wo], then
  // out [N, G, Co/G, Ho*Wo] = w [G, Co/G, Cg*kh*kw] x cols.
  if (outShape.numel() == 0) return;
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t co = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t g = p.groups, cog = co / g, ho = outShape[2], wo = outShape[3];
  const DType t = x.dtype;
  const std::size_t size = dtype_size(t);
  Allocator& memory = deviceContext(device_).allocator();
  // The (padded) input and its element strides.
  const char* src = x.data;
  int64_t xs[4] = {x.strides[0], x.strides[1], x.strides[2], x.strides[3]};
  // Temporaries are Storage: freed to the stream-ordered allocator when this
  // returns, reused only after the launches queued before.
  std::shared_ptr<core::Storage> padded;
  if (p.padTop || p.padBottom || p.padLeft || p.padRight) {
    const int64_t hp = h + p.padTop + p.padBottom, wp = wd + p.padLeft + p.padRight;
    padded = core::Storage::allocate(memory, static_cast<std::size_t>(n * c * hp * wp) * size);
    char* base = static_cast<char*>(padded->data());
    full(t, n * c * hp * wp, 0.0, 0, base);
    const int64_t ps[4] = {c * hp * wp, hp * wp, wp, 1};
    copyInto(x, base + static_cast<std::size_t>(p.padTop * wp + p.padLeft) * size, ps);
    src = base;
    std::copy(ps, ps + 4, xs);
  }
  // cols[n, g, c, i, j, oh, ow] = xp[n, g*Cg + c, oh*sh + i*dh, ow*sw + j*dw]: a strided view, copied dense.
  const int64_t k = cg * kh * kw, pixels = ho * wo;
  auto cols = core::Storage::allocate(memory, static_cast<std::size_t>(n * g * k * pixels) * size);
  interp::Arg view;
  view.data = src;
  view.dtype = t;
  view.shape = Shape{n, g, cg, kh, kw, ho, wo};
  const int64_t vs[7] = {xs[0],      cg * xs[1], xs[1], p.dilationH * xs[2], p.dilationW * xs[3], p.strideH * xs[2],
                         p.strideW * xs[3]};
  std::copy(vs, vs + 7, view.strides);
  copy(view, static_cast<char*>(cols->data()));
  // The weight as [1, G, Co/G, K] (dense over its last three axes first).
  interp::Arg a;
  std::shared_ptr<core::Storage> dense;
  const bool kMerges = w.strides[2] == kw * w.strides[3] && w.strides[1] == kh * w.strides[2];
  a.data = w.data;
  int64_t wCo = w.strides[0], wK = w.strides[3];
  if (!kMerges) {
    dense = core::Storage::allocate(memory, static_cast<std::size_t>(co * k) * size);
    copy(w, static_cast<char*>(dense->data()));
    a.data = static_cast<const char*>(dense->data());
    wCo = k;
    wK = 1;
  }
  a.dtype = t;
  a.shape = Shape{1, g, cog, k};
  const int64_t as[4] = {0, cog * wCo, wCo, wK};
  std::copy(as, as + 4, a.strides);
  interp::Arg b;
  b.data = static_cast<const char*>(cols->data());
  b.dtype = t;
  b.shape = Shape{n, g, k, pixels};
  const int64_t bs[4] = {g * k * pixels, k * pixels, pixels, 1};
  std::copy(bs, bs + 4, b.strides);
  matmul(a, b, Shape{n, g, cog, pixels}, out);
}

}  // namespace kiln::hal
