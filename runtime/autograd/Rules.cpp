// Vector-Jacobian products of the recorded primitives (runtime/core/
// OpKinds.def), written with the public ops so that backward ops are
// recorded like any others. Conventions are documented in kiln/autograd.h.
#include <algorithm>
#include <string>

#include "kiln/error.h"
#include "kiln/ops.h"
#include "runtime/autograd/GradInfo.h"
#include "runtime/core/ShapeRules.h"
#include "runtime/core/TensorImpl.h"

namespace kiln::autograd {

using core::OpKind;

Tensor sumToShape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.rank() - shape.rank();
  std::vector<int> axes;
  for (int d = 0; d < lead; ++d) axes.push_back(d);
  for (int d = 0; d < shape.rank(); ++d)
    if (shape[d] == 1 && g.shape()[lead + d] != 1) axes.push_back(lead + d);
  Tensor s = axes.empty() ? g : sum(g, axes, true);
  return reshape(s, shape);
}

namespace {

Shape withExtent(const Shape& s, int axis, int64_t extent) {
  Shape r = s;
  r[axis] = extent;
  return r;
}

/// Places g (extent e along `axis`) at positions start, start+step, ... of
/// a zero tensor with extent n along `axis`; the other axes keep g's extents.
/// Built from concat and reshape, so no scatter primitive is needed.
Tensor scatterStrided(const Tensor& g, int axis, int64_t start, int64_t step, int64_t n) {
  const int64_t e = g.shape()[axis];
  if (e == 0 || n == 0) return zeros(withExtent(g.shape(), axis, n), g.dtype(), g.device());
  Tensor spread = g;
  int64_t len = e;
  if (step > 1) {
    // [.., e, ..] -> [.., e, 1, ..] ++ zeros [.., e, step-1, ..] -> [.., e*step, ..]
    Tensor col = unsqueeze(g, axis + 1);
    Shape zs = col.shape();
    zs[axis + 1] = step - 1;
    spread = concat({col, zeros(zs, g.dtype(), g.device())}, axis + 1);
    len = e * step;
    spread = reshape(spread, withExtent(g.shape(), axis, len));
  }
  if (start + len > n) {  // only trailing zeros lie past the end
    len = n - start;
    spread = slice(spread, axis, 0, len);
  }
  std::vector<Tensor> parts;
  if (start > 0) parts.push_back(zeros(withExtent(g.shape(), axis, start), g.dtype(), g.device()));
  parts.push_back(spread);
  if (start + len < n) parts.push_back(zeros(withExtent(g.shape(), axis, n - start - len), g.dtype(), g.device()));
  return parts.size() == 1 ? parts[0] : concat(parts, axis);
}

/// The reduced axes of a reduce node, as a mask.
core::AxisMask reduceMask(const GradInfo& n) {
  core::AxisMask mask = 0;
  for (int64_t a : n.attrs) mask |= 1u << a;
  return mask;
}

/// g (the reduction's result gradient) with the reduced axes kept as 1.
Tensor keepdims(const Tensor& g, const Tensor& x, const GradInfo& n) {
  if (n.keepdim) return g;
  return reshape(g, core::reducedShape(x.shape(), reduceMask(n), true));
}

std::vector<int> maskAxes(core::AxisMask mask, int rank) {
  std::vector<int> axes;
  for (int d = 0; d < rank; ++d)
    if (mask & (1u << d)) axes.push_back(d);
  return axes;
}

/// conv2d's input gradient, itself a convolution: g spread out by the
/// stride (zeros between), convolved with the weight flipped in space and
/// with in/out channels swapped per group, stride 1, the forward dilation.
Tensor conv2dInputGrad(const Tensor& g, const Tensor& w, const Shape& xShape, const core::Conv2dParams& p) {
  const int64_t groups = p.groups, co = w.shape()[0], cg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const int64_t ho = g.shape()[2], wo = g.shape()[3], h = xShape[2], wd = xShape[3];
  const int64_t lh = (ho - 1) * p.strideH + 1, lw = (wo - 1) * p.strideW + 1;
  Tensor d = g;
  if (p.strideH > 1) d = scatterStrided(d, 2, 0, p.strideH, lh);
  if (p.strideW > 1) d = scatterStrided(d, 3, 0, p.strideW, lw);
  // Paddings of the spread gradient; negative ones crop it instead.
  int64_t top = (kh - 1) * p.dilationH - p.padTop, bottom = h + p.padTop - lh;
  int64_t left = (kw - 1) * p.dilationW - p.padLeft, right = wd + p.padLeft - lw;
  if (top < 0 || bottom < 0) {
    d = slice(d, 2, std::max<int64_t>(0, -top), lh - std::max<int64_t>(0, -bottom));
    top = std::max<int64_t>(0, top), bottom = std::max<int64_t>(0, bottom);
  }
  if (left < 0 || right < 0) {
    d = slice(d, 3, std::max<int64_t>(0, -left), lw - std::max<int64_t>(0, -right));
    left = std::max<int64_t>(0, left), right = std::max<int64_t>(0, right);
  }
  Tensor wt = reshape(w, {groups, co / groups, cg, kh, kw});
  wt = reshape(permute(wt, {0, 2, 1, 3, 4}), {groups * cg, co / groups, kh, kw});
  wt = flip(wt, {2, 3});
  Conv2dOptions o;
  o.padding = {top, left, bottom, right};
  o.dilation = {p.dilationH, p.dilationW};
  o.groups = groups;
  return conv2d(d, wt, {}, o);
}

/// conv2d's weight gradient, also a convolution: the input with channels as
/// the batch ([C/groups, groups*N, H, W]) convolved with the output
/// gradient as the kernel ([C_out, N, Ho, Wo]); the forward stride becomes
/// the dilation and the forward dilation the stride.
Tensor conv2dWeightGrad(const Tensor& g, const Tensor& x, const Shape& wShape, const core::Conv2dParams& p) {
  const int64_t groups = p.groups, n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const int64_t co = wShape[0], cg = c / groups, kh = wShape[2], kw = wShape[3];
  const int64_t ho = g.shape()[2], wo = g.shape()[3];
  Tensor xs = reshape(permute(reshape(x, {n, groups, cg, h, wd}), {2, 1, 0, 3, 4}), {cg, groups * n, h, wd});
  Tensor gs = reshape(permute(reshape(g, {n, groups, co / groups, ho, wo}), {1, 2, 0, 3, 4}), {co, n, ho, wo});
  Conv2dOptions o;
  o.stride = {p.dilationH, p.dilationW};
  o.dilation = {p.strideH, p.strideW};
  o.padding = {p.padTop, p.padLeft,
               std::max<int64_t>(0, (kh - 1) * p.dilationH + (ho - 1) * p.strideH - p.padTop - (h - 1)),
               std::max<int64_t>(0, (kw - 1) * p.dilationW + (wo - 1) * p.strideW - p.padLeft - (wd - 1))};
  o.groups = groups;
  Tensor r = conv2d(xs, gs, {}, o);  // [C/groups, C_out, >= kH, >= kW]
  r = slice(slice(r, 2, 0, kh), 3, 0, kw);
  return permute(r, {1, 0, 2, 3});
}

/// An operand's share of maximum's/minimum's gradient: 0 where it loses,
/// 0.5 at a tie, else 1, so that where either operand is NaN both get the
/// whole gradient (as PyTorch's maximum/minimum; counting wins gave both 0).
Tensor extremeShare(const Tensor& loses, const Tensor& ties, DType t) {
  return sub(sub(1.0, cast(loses, t)), mul(cast(ties, t), 0.5));
}

}  // namespace

std::vector<Tensor> vjp(const GradInfo& n, const Tensor& out, const Tensor& g, const std::vector<bool>& needs) {
  const std::vector<Tensor>& in = n.inputs;
  std::vector<Tensor> r(in.size());
  const DType t = g.dtype();
  auto need = [&](size_t i) { return i < needs.size() && needs[i]; };
  switch (n.op) {
    // ---- unary -------------------------------------------------------------
    case OpKind::Neg: r[0] = neg(g); break;
    case OpKind::Abs: r[0] = mul(g, sign(in[0])); break;
    case OpKind::Exp: r[0] = mul(g, out); break;
    case OpKind::Expm1: r[0] = mul(g, add(out, 1.0)); break;
    case OpKind::Log: r[0] = div(g, in[0]); break;
    case OpKind::Log1p: r[0] = div(g, add(in[0], 1.0)); break;
    case OpKind::Log2: r[0] = div(g, mul(in[0], 0.6931471805599453)); break;  // x ln 2
    case OpKind::Erf: {
      constexpr double kTwoOverSqrtPi = 1.1283791670955126;
      r[0] = mul(g, mul(exp(neg(square(in[0]))), kTwoOverSqrtPi));
      break;
    }
    case OpKind::Sqrt: r[0] = div(g, mul(out, 2.0)); break;
    case OpKind::Rsqrt: r[0] = mul(mul(g, -0.5), mul(out, square(out))); break;
    case OpKind::Tanh: r[0] = mul(g, sub(1.0, square(out))); break;
    case OpKind::Sigmoid: r[0] = mul(g, mul(out, sub(1.0, out))); break;
    // From the output (x > 0 exactly where relu(x) > 0, NaN included): a
    // compiled step then keeps only the ReLU's output, which the next layer
    // reads anyway, not its input too (a batch norm's result before ReLU).
    case OpKind::Relu: r[0] = where(gt(out, 0.0), g, 0.0); break;
    case OpKind::Sin: r[0] = mul(g, cos(in[0])); break;
    case OpKind::Cos: r[0] = neg(mul(g, sin(in[0]))); break;
    case OpKind::Atan: r[0] = div(g, add(square(in[0]), 1.0)); break;
    case OpKind::Reciprocal: r[0] = neg(mul(g, square(out))); break;
    case OpKind::Square: r[0] = mul(g, mul(in[0], 2.0)); break;
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Round:
    case OpKind::Sign: break;  // piecewise constant: zero gradient

    // ---- binary (broadcasting: sum back to each input's shape) ------------------
    case OpKind::Add:
      if (need(0)) r[0] = sumToShape(g, in[0].shape());
      if (need(1)) r[1] = sumToShape(g, in[1].shape());
      break;
    case OpKind::Sub:
      if (need(0)) r[0] = sumToShape(g, in[0].shape());
      if (need(1)) r[1] = sumToShape(neg(g), in[1].shape());
      break;
    case OpKind::Mul:
      if (need(0)) r[0] = sumToShape(mul(g, in[1]), in[0].shape());
      if (need(1)) r[1] = sumToShape(mul(g, in[0]), in[1].shape());
      break;
    case OpKind::Div:
      if (need(0)) r[0] = sumToShape(div(g, in[1]), in[0].shape());
      if (need(1)) r[1] = sumToShape(neg(div(mul(g, out), in[1])), in[1].shape());
      break;
    case OpKind::Pow:
      if (need(0)) {
        Tensor d = mul(g, mul(in[1], pow(in[0], sub(in[1], 1.0))));
        r[0] = sumToShape(where(eq(in[1], 0.0), 0.0, d), in[0].shape());
      }
      if (need(1)) {
        Tensor d = mul(g, mul(out, log(in[0])));
        r[1] = sumToShape(where(eq(in[0], 0.0), 0.0, d), in[1].shape());
      }
      break;
    case OpKind::Fmod:
    case OpKind::Remainder: {
      // a - q * b with q the truncated (fmod) or floored (remainder) a / b,
      // piecewise constant in a and b, as in PyTorch. q is the quotient the
      // result holds, (a - out) / b rounded to its integer: the rounded
      // a / b can lie across an integer from it (fmod(1, 0.1) is 0.0999...,
      // q = 9, where floor(1 / 0.1) is 10), as PyTorch's floor division,
      // which derives it from fmod too.
      if (need(0)) r[0] = sumToShape(g, in[0].shape());
      if (need(1)) {
        Tensor q = round(div(sub(in[0], out), in[1]));
        r[1] = sumToShape(neg(mul(g, q)), in[1].shape());
      }
      break;
    }
    case OpKind::Maximum:
    case OpKind::Minimum: {
      const bool isMax = n.op == OpKind::Maximum;
      Tensor ties = eq(in[0], in[1]);
      if (need(0))
        r[0] = sumToShape(mul(g, extremeShare(isMax ? lt(in[0], in[1]) : gt(in[0], in[1]), ties, t)), in[0].shape());
      if (need(1))
        r[1] = sumToShape(mul(g, extremeShare(isMax ? lt(in[1], in[0]) : gt(in[1], in[0]), ties, t)), in[1].shape());
      break;
    }

    // ---- select and cast --------------------------------------------------------
    case OpKind::Where:
      if (need(1)) r[1] = sumToShape(where(in[0], g, 0.0), in[1].shape());
      if (need(2)) r[2] = sumToShape(where(in[0], 0.0, g), in[2].shape());
      break;
    case OpKind::Cast:
      if (is_floating(in[0].dtype())) r[0] = cast(g, in[0].dtype());
      break;

    // ---- reductions -------------------------------------------------------------
    case OpKind::ReduceSum: r[0] = broadcast_to(keepdims(g, in[0], n), in[0].shape()); break;
    case OpKind::ReduceProd:
      r[0] = div(mul(keepdims(g, in[0], n), keepdims(out, in[0], n)), in[0]);
      break;
    case OpKind::ReduceMax:
    case OpKind::ReduceMin: {
      // Split evenly between tied extremes.
      Tensor hits = cast(eq(in[0], keepdims(out, in[0], n)), t);
      Tensor count = sum(hits, maskAxes(reduceMask(n), in[0].rank()), true);
      r[0] = mul(hits, div(keepdims(g, in[0], n), count));
      break;
    }

    // ---- matmul: [..,M,K] x [..,K,N], batch dims broadcast ---------------------------
    case OpKind::Matmul:
      if (need(0)) r[0] = sumToShape(matmul(g, transpose(in[1])), in[0].shape());
      if (need(1)) {
        const int ra = in[0].rank();
        if (in[1].rank() == 2 && ra >= 3) {
          // A weight shared by every batch: its gradient sums over the
          // batches, so the batches' rows stack into one GEMM of K = rows
          // (one pass, no per-batch products to add up afterwards).
          // Rows counted, not inferred (-1): K or N may be 0.
          const int64_t k = in[0].shape()[ra - 1], cols = g.shape()[g.rank() - 1];
          int64_t rows = 1;
          for (int d = 0; d < ra - 1; ++d) rows *= in[0].shape()[d];
          r[1] = matmul(transpose(reshape(in[0], {rows, k})), reshape(g, {rows, cols}));
        } else {
          r[1] = sumToShape(matmul(transpose(in[0]), g), in[1].shape());
        }
      }
      break;

    case OpKind::Conv2d: {
      const core::Conv2dParams p = core::Conv2dParams::fromAttrs(n.attrs);
      if (need(0)) r[0] = conv2dInputGrad(g, in[1], in[0].shape(), p);
      if (need(1)) r[1] = conv2dWeightGrad(g, in[0], in[1].shape(), p);
      break;
    }

    // ---- shape --------------------------------------------------------------------
    case OpKind::Reshape:
      r[0] = reshape(g, in[0].shape());
      // Tensor::to records its copy to another device as a reshape.
      if (r[0].device() != in[0].device()) r[0] = r[0].to(in[0].device());
      break;
    case OpKind::Permute: {
      std::vector<int> inverse(n.attrs.size());
      for (size_t i = 0; i < n.attrs.size(); ++i) inverse[n.attrs[i]] = static_cast<int>(i);
      r[0] = permute(g, inverse);
      break;
    }
    case OpKind::BroadcastTo: r[0] = sumToShape(g, in[0].shape()); break;
    case OpKind::Slice: {
      const int rank = in[0].rank();
      Tensor s = g;
      for (int d = 0; d < rank; ++d) {
        const int64_t start = n.attrs[d], step = n.attrs[rank + d];
        if (start != 0 || step != 1 || s.shape()[d] != in[0].shape()[d])
          s = scatterStrided(s, d, start, step, in[0].shape()[d]);
      }
      r[0] = s;
      break;
    }
    case OpKind::Concat: {
      const int axis = static_cast<int>(n.i0);
      int64_t offset = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const int64_t e = in[i].shape()[axis];
        if (need(i)) r[i] = e == g.shape()[axis] ? g : slice(g, axis, offset, offset + e);
        offset += e;
      }
      break;
    }

    // ---- indexing ------------------------------------------------------------------------
    case OpKind::IndexSelect: {
      // out = x[:axis] + index.shape + x[axis+1:]: g's rows added back into
      // x's at the rows they came from.
      const Tensor& x = in[0];
      const int axis = static_cast<int>(n.i0);
      const int64_t count = in[1].numel();
      // index_add: work and memory follow the selected rows, not the table
      // (an embedding of a 50k vocabulary took a [tokens, 50k] one-hot and
      // a GEMM over it). On a GPU too: tier 0 adds each selected row into
      // its target with a thread per element (IndexAddRows), and compiled
      // steps run it there between their kernels (RegionBoundaries).
      Shape rows = x.shape();
      rows[axis] = count;
      r[0] = index_add(zeros(x.shape(), t, x.device()), axis, reshape(in[1], Shape{count}), reshape(g, rows));
      break;
    }
    case OpKind::IndexAdd: {
      // out = x + (source's rows added at index): g to x, g's rows at index
      // to source.
      const int axis = static_cast<int>(n.i0);
      if (need(0)) r[0] = g;
      if (need(2)) r[2] = index_select(g, axis, in[1]);
      break;
    }
    case OpKind::Cumsum: {
      // Each x[i] reaches every out[k] with k >= i: the running sums of g
      // from the end.
      const int axis = static_cast<int>(n.i0);
      r[0] = flip(cumsum(flip(g, {axis}), axis), {axis});
      break;
    }
    case OpKind::ScatterAdd: {
      // out = x + (source's elements added where index names them): g to
      // x, g at those positions (gather) to source.
      const int axis = static_cast<int>(n.i0);
      if (need(0)) r[0] = g;
      if (need(2)) r[2] = gather(g, axis, in[1]);
      break;
    }
    case OpKind::Gather: {
      // out[.., j, ..] = x[.., index[.., j, ..], ..] along axis: sum over j of
      // g * one_hot(index) gives index's shape with the axis replaced by n.
      // Indices per row along the axis from which the gradient is a
      // scatter_add instead. One per row (cross-entropy's gather of each
      // row's target) keeps the one-hot product: x-sized, as scatter_add's
      // zeros are, and it fuses with its neighbours in a compiled step. A
      // few per row from a wide axis (top-k) took k times x in one-hot
      // products: 4 of 8192 columns for 256 rows, forward and backward,
      // interpreted 24.5 -> 7.9 ms.
      constexpr int64_t kGatherScatterFrom = 2;
      const Tensor& x = in[0];
      const int axis = static_cast<int>(n.i0), rank = x.rank();
      const int64_t extent = x.shape()[axis];
      if (x.numel() == 0) {  // nothing to scatter into (one_hot has no 0 classes)
        r[0] = zeros(x.shape(), t, x.device());
        break;
      }
      if (in[1].shape()[axis] >= kGatherScatterFrom) {
        // scatter_add: each element of g is added where it was read from.
        // Work and memory follow index's elements, not index x n (one_hot's:
        // a gather of 64 of 8192 columns per row took a [rows, 64, 8192]
        // product), and its index is gather's own, which a compiled kernel
        // checks before launch as gather's. On a GPU, tier 0 gives each
        // element read a thread of its own (IndexAddRows over x flattened).
        r[0] = scatter_add(zeros(x.shape(), t, x.device()), axis, in[1], g);
        break;
      }
      Tensor hot = one_hot(in[1], extent, t);  // index.shape + [n]
      Tensor products = mul(unsqueeze(g, -1), hot);
      // index.shape - axis + [n]. One index along the axis (cross-entropy's
      // gather of each row's target): the sum of one term is the term, with
      // a zero's sign made positive as a sum from +0 makes it; summed, it
      // cost the transformer bench's step a 1 MB f64 accumulator filled,
      // reduced and rounded.
      Tensor spread = in[1].shape()[axis] == 1 ? add(squeeze(products, {axis}), 0.0f) : sum(products, {axis}, false);
      std::vector<int> perm;
      for (int d = 0; d < axis; ++d) perm.push_back(d);
      perm.push_back(rank - 1);
      for (int d = axis; d < rank - 1; ++d) perm.push_back(d);
      Tensor s = permute(spread, perm);  // index.shape with the axis extent n
      for (int d = 0; d < rank; ++d)
        if (d != axis && s.shape()[d] != x.shape()[d]) s = scatterStrided(s, d, 0, 1, x.shape()[d]);
      r[0] = s;
      break;
    }

    default:
      throw Error("autograd: no gradient rule for primitive " + std::string(core::opName(n.op)) +
                  " with a floating result; please report this");
  }
  for (size_t i = 0; i < r.size(); ++i)
    if (!need(i)) r[i] = Tensor();
  return r;
}

}  // namespace kiln::autograd
