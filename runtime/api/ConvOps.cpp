// Convolution, pooling and batch normalization. conv2d is a primitive
// (OpKind::Conv2d); the pools, adaptive pooling and batch_norm are recorded
// as their primitives (strided slices with maximum or add, reductions,
// elementwise ops), so the compiler fuses them. Attribute semantics follow
// ONNX (Conv, MaxPool, AveragePool, BatchNormalization).
#include <cmath>
#include <limits>
#include <string>

#include "kiln/autograd.h"
#include "runtime/api/OpSupport.h"

namespace kiln {

using core::OpKind;
using trace::NodeSpec;
using namespace api;

namespace {

/// {h, w} from a list of one or two values.
void pairOf(const char* op, const char* what, const std::vector<int64_t>& v, int64_t* h, int64_t* w) {
  if (v.size() == 1) {
    *h = *w = v[0];
  } else if (v.size() == 2) {
    *h = v[0];
    *w = v[1];
  } else {
    fail(op, std::string(what) + " needs 1 or 2 values ({h, w}), got " + std::to_string(v.size()));
  }
}

struct Pads {
  int64_t top = 0, left = 0, bottom = 0, right = 0;
};

/// Explicit paddings, or those auto_pad asks for.
Pads padsOf(const char* op, const std::vector<int64_t>& padding, AutoPad autoPad, int64_t h, int64_t w, int64_t kh,
            int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw) {
  Pads p;
  switch (autoPad) {
    case AutoPad::Valid: return p;
    case AutoPad::SameUpper:
    case AutoPad::SameLower: {
      const bool upper = autoPad == AutoPad::SameUpper;
      core::samePadding(h, kh, sh, dh, upper, &p.top, &p.bottom);
      core::samePadding(w, kw, sw, dw, upper, &p.left, &p.right);
      return p;
    }
    case AutoPad::NotSet: break;
  }
  if (padding.size() == 1) {
    p.top = p.left = p.bottom = p.right = padding[0];
  } else if (padding.size() == 2) {
    p.top = p.bottom = padding[0];
    p.left = p.right = padding[1];
  } else if (padding.size() == 4) {
    p.top = padding[0], p.left = padding[1], p.bottom = padding[2], p.right = padding[3];
  } else {
    fail(op, "padding needs 1, 2 ({h, w}) or 4 ({top, left, bottom, right}) values, got " +
                 std::to_string(padding.size()));
  }
  return p;
}

/// x as NCHW (a permuted view of NHWC input); checks rank 4.
Tensor toNchw(const char* op, const Tensor& x, Layout layout) {
  if (x.rank() != 4)
    fail(op, "input " + x.shape().str() + " must have rank 4 (" +
                 (layout == Layout::NCHW ? "[N, C, H, W]" : "[N, H, W, C]") + ")");
  return layout == Layout::NHWC ? permute(x, {0, 3, 1, 2}) : x;
}

Tensor fromNchw(const Tensor& y, Layout layout) { return layout == Layout::NHWC ? permute(y, {0, 2, 3, 1}) : y; }

/// A floating dtype for pooling (integers and bool are not pooled).
void checkFloating(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    fail(op, "input dtype " + std::string(dtype_name(x.dtype())) + " is not floating; cast it to f32 first");
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  const char* op = "conv2d";
  checkTensor(op, x);
  checkTensor(op, weight, "weight");
  checkSameDevice(op, {&x, &weight, &bias});
  Tensor in = toNchw(op, x, o.layout);
  if (weight.rank() != 4)
    fail(op, "weight " + weight.shape().str() + " must have rank 4 ([C_out, C/groups, kH, kW])");
  core::Conv2dParams p;
  pairOf(op, "stride", o.stride, &p.strideH, &p.strideW);
  pairOf(op, "dilation", o.dilation, &p.dilationH, &p.dilationW);
  p.groups = o.groups;
  const int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  Pads pads = padsOf(op, o.padding, o.auto_pad, in.shape()[2], in.shape()[3], kh, kw, std::max<int64_t>(1, p.strideH),
                     std::max<int64_t>(1, p.strideW), std::max<int64_t>(1, p.dilationH),
                     std::max<int64_t>(1, p.dilationW));
  p.padTop = pads.top, p.padLeft = pads.left, p.padBottom = pads.bottom, p.padRight = pads.right;
  Shape out;
  check(op, core::conv2dShape(in.shape(), weight.shape(), p, &out));
  if (bias.defined() && (bias.rank() != 1 || bias.shape()[0] != weight.shape()[0]))
    fail(op, "bias " + bias.shape().str() + " must be [C_out] = [" + std::to_string(weight.shape()[0]) +
                 "] for weight " + weight.shape().str());
  const core::TypedOperand ops[2] = {{x.dtype(), core::OperandPriority::Tensor},
                                     {weight.dtype(), core::OperandPriority::Tensor}};
  const DType t = core::resultType(ops);
  if (!is_floating(t))
    fail(op, "operands " + std::string(dtype_name(x.dtype())) + " and " + std::string(dtype_name(weight.dtype())) +
                 " are not floating; cast them to f32 first");
  Tensor xf = castTo(in, t), wf = castTo(weight, t);
  int64_t attrs[core::Conv2dParams::kAttrCount];
  p.toAttrs(attrs);
  Tensor y = record(NodeSpec{OpKind::Conv2d, t, out, std::span<const int64_t>(attrs, core::Conv2dParams::kAttrCount)},
                    {&xf, &wf});
  if (bias.defined()) y = add(y, reshape(castTo(bias, t), {1, weight.shape()[0], 1, 1}));
  return fromNchw(y, o.layout);
}

namespace {

/// The geometry of one pooling call (NCHW).
struct PoolGeometry {
  int64_t kh, kw, sh, sw, dh, dw;
  Pads pads;
  int64_t ho, wo;
};

PoolGeometry poolGeometry(const char* op, const Tensor& x, const Pool2dOptions& o) {
  PoolGeometry g;
  if (o.kernel.empty()) fail(op, "kernel is required ({kH, kW} or one value)");
  pairOf(op, "kernel", o.kernel, &g.kh, &g.kw);
  pairOf(op, "stride", o.stride, &g.sh, &g.sw);
  pairOf(op, "dilation", o.dilation, &g.dh, &g.dw);
  if (o.auto_pad != AutoPad::NotSet && o.ceil_mode && o.auto_pad != AutoPad::Valid)
    fail(op, "ceil_mode does not apply with auto_pad SAME_UPPER/SAME_LOWER (the output extent is ceil(in/stride))");
  g.pads = padsOf(op, o.padding, o.auto_pad, x.shape()[2], x.shape()[3], std::max<int64_t>(1, g.kh),
                  std::max<int64_t>(1, g.kw), std::max<int64_t>(1, g.sh), std::max<int64_t>(1, g.sw),
                  std::max<int64_t>(1, g.dh), std::max<int64_t>(1, g.dw));
  auto axis = [&](const char* name, int64_t in, int64_t k, int64_t s, int64_t b, int64_t e, int64_t d, int64_t* out) {
    std::string err = core::poolExtent(in, k, s, b, e, d, o.ceil_mode, out);
    if (!err.empty()) fail(op, std::string(name) + " of input " + x.shape().str() + ": " + err);
  };
  axis("height", x.shape()[2], g.kh, g.sh, g.pads.top, g.pads.bottom, g.dh, &g.ho);
  axis("width", x.shape()[3], g.kw, g.sw, g.pads.left, g.pads.right, g.dw, &g.wo);
  return g;
}

/// x (NCHW) with `before` and `after` elements of `value` added on `axis`.
Tensor padAxis(const Tensor& x, int axis, int64_t before, int64_t after, double value) {
  if (before == 0 && after == 0) return x;
  std::vector<Tensor> parts;
  Shape s = x.shape();
  if (before > 0) {
    s[axis] = before;
    parts.push_back(full(s, value, x.dtype(), x.device()));
  }
  parts.push_back(x);
  if (after > 0) {
    s[axis] = after;
    parts.push_back(full(s, value, x.dtype(), x.device()));
  }
  return concat(parts, axis);
}

/// Combines the kH*kW strided window taps of the padded input with
/// `combine` (firstMaximum or add), in row-major window order. Padding only
/// as far as some window reads.
Tensor windowTaps(const Tensor& x, const PoolGeometry& g, double padValue,
                  Tensor (*combine)(const Operand&, const Operand&)) {
  const int64_t h = x.shape()[2], w = x.shape()[3];
  const int64_t needH = (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1, needW = (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  Tensor padded = padAxis(x, 2, g.pads.top, std::max<int64_t>(0, needH - h - g.pads.top), padValue);
  padded = padAxis(padded, 3, g.pads.left, std::max<int64_t>(0, needW - w - g.pads.left), padValue);
  Tensor acc;
  for (int64_t i = 0; i < g.kh; ++i) {
    Tensor rows = slice(padded, 2, i * g.dh, i * g.dh + (g.ho - 1) * g.sh + 1, g.sh);
    for (int64_t j = 0; j < g.kw; ++j) {
      Tensor tap = slice(rows, 3, j * g.dw, j * g.dw + (g.wo - 1) * g.sw + 1, g.sw);
      acc = acc.defined() ? combine(acc, tap) : tap;
    }
  }
  return acc;
}

/// The larger of `acc` (the taps before) and `tap`, keeping the earlier one
/// on a tie and taking a NaN tap: the window's first maximum takes the whole
/// gradient, as PyTorch's max_pool2d gives it (maximum split ties in halves
/// down the chain: 1/8, 1/8, 1/4, 1/2 over four equal taps).
Tensor firstMaximum(const Operand& acc, const Operand& tap) {
  const Tensor& a = acc.tensor();
  const Tensor& t = tap.tensor();
  return where(logical_or(gt(t, a), isnan(t)), t, a);
}

/// Per output position of one axis, the window taps inside [lo, hi) (input
/// coordinates).
std::vector<double> tapCounts(int64_t outs, int64_t k, int64_t s, int64_t d, int64_t padBegin, int64_t lo, int64_t hi) {
  std::vector<double> c(static_cast<size_t>(outs));
  for (int64_t o = 0; o < outs; ++o) {
    int64_t n = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t at = o * s + i * d - padBegin;
      n += at >= lo && at < hi;
    }
    c[static_cast<size_t>(o)] = static_cast<double>(n);
  }
  return c;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& o) {
  const char* op = "max_pool2d";
  checkTensor(op, x);
  checkFloating(op, x);
  Tensor in = toNchw(op, x, o.layout);
  PoolGeometry g = poolGeometry(op, in, o);
  if (in.shape().numel() == 0 || g.ho == 0 || g.wo == 0)
    return fromNchw(zeros({in.shape()[0], in.shape()[1], g.ho, g.wo}, x.dtype(), x.device()), o.layout);
  Tensor y = windowTaps(in, g, -std::numeric_limits<double>::infinity(), &firstMaximum);
  return fromNchw(y, o.layout);
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& o) {
  const char* op = "avg_pool2d";
  checkTensor(op, x);
  checkFloating(op, x);
  Tensor in = toNchw(op, x, o.layout);
  PoolGeometry g = poolGeometry(op, in, o);
  if (in.shape().numel() == 0 || g.ho == 0 || g.wo == 0)
    return fromNchw(zeros({in.shape()[0], in.shape()[1], g.ho, g.wo}, x.dtype(), x.device()), o.layout);
  Tensor total = windowTaps(in, g, 0.0, &add);
  const int64_t h = in.shape()[2], w = in.shape()[3];
  const bool inc = o.count_include_pad;
  std::vector<double> ch = tapCounts(g.ho, g.kh, g.sh, g.dh, g.pads.top, inc ? -g.pads.top : 0,
                                     inc ? h + g.pads.bottom : h);
  std::vector<double> cw = tapCounts(g.wo, g.kw, g.sw, g.dw, g.pads.left, inc ? -g.pads.left : 0,
                                     inc ? w + g.pads.right : w);
  bool uniform = true;
  std::vector<double> inv;
  inv.reserve(ch.size() * cw.size());
  for (double a : ch)
    for (double b : cw) {
      inv.push_back(1.0 / (a * b));
      uniform = uniform && inv.back() == inv.front();
    }
  Tensor y = uniform ? mul(total, inv.front())
                     : mul(total, cast(from_vector<double>(inv, {g.ho, g.wo}, x.device()), total.dtype()));
  return fromNchw(y, o.layout);
}

Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w, Layout layout) {
  const char* op = "adaptive_avg_pool2d";
  checkTensor(op, x);
  checkFloating(op, x);
  Tensor in = toNchw(op, x, layout);
  const int64_t n = in.shape()[0], c = in.shape()[1], h = in.shape()[2], w = in.shape()[3];
  if (out_h < 1 || out_w < 1)
    fail(op, "output size (" + std::to_string(out_h) + ", " + std::to_string(out_w) + ") must be >= 1");
  if (h == 0 || w == 0)
    fail(op, "input " + in.shape().str() + " has an empty spatial extent; every output cell needs input elements");
  if (h % out_h == 0 && w % out_w == 0) {
    // Equal windows: one reshape and one mean.
    Tensor r = reshape(in, {n, c, out_h, h / out_h, out_w, w / out_w});
    return fromNchw(mean(r, {3, 5}), layout);
  }
  // Uneven windows: average each band of rows, then each band of columns.
  auto bands = [](const Tensor& t, int axis, int64_t extent, int64_t outs) {
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < outs; ++i) {
      const int64_t lo = i * extent / outs, hi = ((i + 1) * extent + outs - 1) / outs;
      parts.push_back(mean(slice(t, axis, lo, hi), {axis}, true));
    }
    return parts.size() == 1 ? parts[0] : concat(parts, axis);
  };
  return fromNchw(bands(bands(in, 2, h, out_h), 3, w, out_w), layout);
}

BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum, double eps, Layout layout) {
  const char* op = "batch_norm";
  checkTensor(op, x);
  checkFloating(op, x);
  if (x.rank() < 2) fail(op, "input " + x.shape().str() + " must have rank >= 2 (a batch and a channel axis)");
  const int axis = layout == Layout::NCHW ? 1 : x.rank() - 1;
  const int64_t c = x.shape()[axis];
  const std::pair<const Tensor*, const char*> params[] = {
      {&weight, "weight"}, {&bias, "bias"}, {&running_mean, "running_mean"}, {&running_var, "running_var"}};
  for (auto [t, name] : params) {
    if (t->defined() && (t->rank() != 1 || t->shape()[0] != c))
      fail(op, std::string(name) + " " + t->shape().str() + " must be [C] = [" + std::to_string(c) +
                   "] for input " + x.shape().str());
  }
  if (!training && (!running_mean.defined() || !running_var.defined()))
    fail(op, "inference (training = false) needs running_mean and running_var");
  if (training && running_mean.defined() != running_var.defined())
    fail(op, "give both running_mean and running_var, or neither");
  // Per-channel vectors broadcast along the channel axis.
  Shape bshape(std::vector<int64_t>(static_cast<size_t>(x.rank()), 1));
  bshape[axis] = c;
  auto along = [&](const Tensor& v) { return reshape(castTo(v, x.dtype()), bshape); };
  std::vector<int> axes;
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis) axes.push_back(d);
  BatchNormResult r;
  Tensor mu, var;
  if (training) {
    const Tensor f = castTo(x, statisticsDType(x.dtype()));
    mu = mean(f, axes, true);
    Tensor d = sub(f, mu);
    var = mean(mul(d, d), axes, true);
    r.y = castTo(mul(d, rsqrt(add(var, eps))), x.dtype());
    if (running_mean.defined()) {
      // Buffers, not functions of the parameters: without the guard each
      // step's statistics hung on the previous step's graph (growing for
      // good, and a backward pass through an inference batch norm reached
      // freed graphs).
      NoGradGuard noGrad;
      r.running_mean = add(mul(running_mean, momentum), mul(castTo(reshape(mu, {c}), running_mean.dtype()), 1.0 - momentum));
      r.running_var = add(mul(running_var, momentum), mul(castTo(reshape(var, {c}), running_var.dtype()), 1.0 - momentum));
    }
  } else {
    r.y = mul(sub(x, along(running_mean)), rsqrt(add(along(running_var), eps)));
  }
  if (weight.defined()) r.y = mul(r.y, along(weight));
  if (bias.defined()) r.y = add(r.y, along(bias));
  return r;
}

}  // namespace kiln
