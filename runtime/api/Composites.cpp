// Composite ops, recorded as their primitives so the compiler sees few op
// kinds and fuses across them.
#include <cmath>
#include <limits>

#include "kiln/autograd.h"
#include "runtime/api/OpSupport.h"

namespace kiln {

using namespace api;

Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  checkTensor("mean", x);
  Tensor f = castTo(x, core::floatingResult(x.dtype()));
  Shape out;
  core::AxisMask mask;
  check("mean", core::reduceShape(x.shape(), axes, keepdim, &out, &mask));
  int64_t count = 1;
  for (int d = 0; d < x.rank(); ++d)
    if (mask & (1u << d)) count *= x.shape()[d];
  // An empty mean is NaN, as in NumPy and PyTorch.
  double scale = count == 0 ? std::nan("") : 1.0 / static_cast<double>(count);
  // Half precision sums and scales in f32 and rounds once, as PyTorch: a
  // half sum overflowed (mean of 4 x 60000 was inf) and rounded twice
  // (mean of 2049 ones was 0.9995).
  if (f.dtype() == DType::f16 || f.dtype() == DType::bf16)
    return castTo(mul(sum(castTo(f, DType::f32), axes, keepdim), scale), f.dtype());
  return mul(sum(f, axes, keepdim), scale);
}

Tensor gelu(const Tensor& x) {
  checkTensor("gelu", x);
  Tensor f = castTo(x, core::floatingResult(x.dtype()));
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  Tensor inner = mul(add(f, mul(mul(f, mul(f, f)), 0.044715)), kSqrt2OverPi);
  return mul(mul(f, 0.5), add(tanh(inner), 1.0));
}

Tensor gelu_exact(const Tensor& x) {
  checkTensor("gelu_exact", x);
  Tensor f = castTo(x, core::floatingResult(x.dtype()));
  constexpr double kSqrtHalf = 0.7071067811865476;
  return mul(mul(f, 0.5), add(erf(mul(f, kSqrtHalf)), 1.0));
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  checkTensor("leaky_relu", x);
  if (negative_slope != negative_slope) fail("leaky_relu", "negative_slope is NaN; pass a number such as 0.01");
  Tensor f = castTo(x, core::floatingResult(x.dtype()));
  // where(x > 0, ...) keeps NaN: NaN > 0 is false and NaN * slope is NaN.
  return where(gt(f, 0.0), f, mul(f, negative_slope));
}

Tensor isnan(const Tensor& x) {
  checkTensor("isnan", x);
  if (!is_floating(x.dtype())) return zeros(x.shape(), DType::boolean, x.device());
  return ne(x, x);
}

Tensor isinf(const Tensor& x) {
  checkTensor("isinf", x);
  if (!is_floating(x.dtype())) return zeros(x.shape(), DType::boolean, x.device());
  return eq(abs(x), std::numeric_limits<double>::infinity());
}

Tensor clamp(const Tensor& x, const Operand& low, const Operand& high) {
  checkTensor("clamp", x);
  const core::TypedOperand ops[3] = {typedOperand(x), typedOperand(low), typedOperand(high)};
  DType t = core::resultType(ops);
  if (t == DType::boolean) fail("clamp", "not defined for bool tensors");
  Shape lowShape, highShape;
  check("clamp", core::broadcastShapes(x.shape(), operandShape(low), &lowShape));
  check("clamp", core::broadcastShapes(lowShape, operandShape(high), &highShape));
  Tensor xt = castTo(x, t);
  // A NaN element keeps its value but passes no gradient, as PyTorch's
  // clamp_backward (grad * (low <= x <= high)) gives it; only traced when
  // x carries a gradient in grad mode, so a plain clamp records no more ops.
  if (is_floating(t) && grad_mode_enabled() && xt.requires_grad_enabled())
    xt = where(isnan(xt), xt.detach(), xt);
  const Tensor lo = operandAs(low, t, x.device()), hi = operandAs(high, t, x.device());
  // Two selects rather than maximum then minimum: x at a bound keeps its
  // whole gradient, as PyTorch's clamp gives it (maximum's tie rule gave it
  // half, a quarter with lo == hi). The same values: NaN stays, a bound
  // above the other ends at high, and -0 at low = 0 stays -0 (as
  // std::max(x, lo), PyTorch's kernel, keeps it).
  const Tensor raised = where(lt(xt, lo), lo, xt);
  return where(gt(raised, hi), hi, raised);
}

Tensor one_hot(const Tensor& index, int64_t num_classes, DType dtype) {
  checkTensor("one_hot", index, "index");
  if (!is_integral(index.dtype()))
    fail("one_hot", "index must be an integer tensor, got " + std::string(dtype_name(index.dtype())));
  if (num_classes <= 0) fail("one_hot", "num_classes must be positive, got " + std::to_string(num_classes));
  if (index.rank() + 1 > Shape::kMaxRank) fail("one_hot", "result rank would exceed " + std::to_string(Shape::kMaxRank));
  if (index.is_materialized()) {
    for (int64_t v : index.to_vector<int64_t>())
      if (v < 0 || v >= num_classes)
        fail("one_hot", "class id " + std::to_string(v) + " is outside [0, " + std::to_string(num_classes) + ")");
  }
  // Pending indices outside the range give an all-zero row.
  Tensor classes = arange(0, static_cast<double>(num_classes), 1, DType::i64, index.device());
  return cast(eq(unsqueeze(castTo(index, DType::i64), -1), classes), dtype);
}

Tensor softmax(const Tensor& x, int axis) {
  checkTensor("softmax", x);
  Tensor f = castTo(x, core::floatingResult(x.dtype()));
  int a = 0;
  if (f.rank() > 0) check("softmax", core::normalizeAxis(axis, f.rank(), &a));
  if (f.numel() == 0) return f;  // nothing to normalize (an empty axis has no maximum)
  Tensor e = exp(sub(f, max(f, {a}, true)));
  // One division per row, then a product per element (as PyTorch's kernel
  // and the hand-fused loop): the row sum is in [1, n] or NaN, so this is
  // within an ulp of the quotient, and a vector division per element would
  // cost more than the rest of the row.
  return mul(e, reciprocal(sum(e, {a}, true)));
}

Tensor log_softmax(const Tensor& x, int axis) {
  checkTensor("log_softmax", x);
  Tensor f = castTo(x, core::floatingResult(x.dtype()));
  int a = 0;
  if (f.rank() > 0) check("log_softmax", core::normalizeAxis(axis, f.rank(), &a));
  if (f.numel() == 0) return f;  // nothing to normalize (an empty axis has no maximum)
  Tensor z = sub(f, max(f, {a}, true));
  return sub(z, log(sum(exp(z), {a}, true)));
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  checkTensor("layer_norm", x);
  const int k = weight.defined() ? weight.rank() : 1;
  if (x.rank() < k || x.rank() == 0)
    fail("layer_norm", "input " + x.shape().str() + " has fewer axes than the normalized shape");
  Shape normalized(x.shape().dims().subspan(x.rank() - k));
  for (const Tensor* p : {&weight, &bias}) {
    if (p->defined() && p->shape() != normalized)
      fail("layer_norm", std::string(p == &weight ? "weight" : "bias") + " has shape " + p->shape().str() +
                             " but must match the trailing axes " + normalized.str() + " of input " + x.shape().str());
  }
  std::vector<int> axes;
  for (int d = x.rank() - k; d < x.rank(); ++d) axes.push_back(d);
  const DType out = core::floatingResult(x.dtype());
  Tensor f = castTo(x, statisticsDType(out));
  Tensor d = sub(f, mean(f, axes, true));
  Tensor var = mean(mul(d, d), axes, true);
  Tensor y = castTo(mul(d, rsqrt(add(var, eps))), out);
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  checkTensor("cross_entropy", logits, "logits");
  checkTensor("cross_entropy", targets, "targets");
  if (logits.rank() != 2 || targets.rank() != 1 || logits.shape()[0] != targets.shape()[0])
    fail("cross_entropy", "expects logits [N, C] and targets [N], got " + logits.shape().str() + " and " +
                              targets.shape().str());
  if (!is_integral(targets.dtype()))
    fail("cross_entropy", "targets must hold integer class ids, got " + std::string(dtype_name(targets.dtype())));
  // Materialized targets are checked here, so that the error names this
  // call (gather would name itself); pending ones when the trace runs.
  if (targets.is_materialized()) {
    const int64_t classes = logits.shape()[1];
    for (int64_t t : targets.to_vector<int64_t>())
      if (t < 0 || t >= classes)
        fail("cross_entropy", "target class id " + std::to_string(t) + " is out of range for logits " +
                                  logits.shape().str() + " (" + std::to_string(classes) + " classes: valid ids 0 to " +
                                  std::to_string(classes - 1) + ")");
  }
  Tensor lp = log_softmax(logits, 1);
  Tensor picked = gather(lp, 1, unsqueeze(targets, 1));
  return neg(mean(picked));
}

}  // namespace kiln
