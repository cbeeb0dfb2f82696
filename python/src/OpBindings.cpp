// Kiln's op set as module functions (kiln.add, kiln.matmul, kiln.softmax, ...),
// with the C++ API's names, rules and defaults (include/kiln/ops.h).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <limits>
#include <string>

#include "python/src/Convert.h"

namespace kiln::python {

namespace {

using UnaryOp = Tensor (*)(const Tensor&);
using BinaryOp = Tensor (*)(const Operand&, const Operand&);

/// Flattens nested Python lists of numbers; fills `shape` from the nesting.
void flatten(nb::handle h, int depth, std::vector<int64_t>& shape, std::vector<Scalar>& values, bool& anyFloat,
             bool& allBool) {
  if (PySequence_Check(h.ptr()) && !nb::isinstance<nb::str>(h)) {
    const auto n = static_cast<int64_t>(nb::len(h));
    if (static_cast<int>(shape.size()) == depth) shape.push_back(n);
    else if (shape[depth] != n)
      throw Error("tensor: ragged nested sequence (length " + std::to_string(n) + " where " +
                  std::to_string(shape[depth]) + " was seen at depth " + std::to_string(depth) + ")");
    for (nb::handle e : h) flatten(e, depth + 1, shape, values, anyFloat, allBool);
    return;
  }
  if (static_cast<int>(shape.size()) != depth)
    throw Error("tensor: ragged nested sequence (a number where a sequence was expected)");
  Operand op = toOperand(h, "tensor");
  if (op.is_tensor()) throw Error("tensor: nested kiln.Tensors are not supported; use kiln.concat or kiln.stack");
  const Scalar& s = op.scalar();
  anyFloat = anyFloat || s.kind() == Scalar::Kind::Floating;
  allBool = allBool && s.kind() == Scalar::Kind::Bool;
  values.push_back(s);
}

/// kiln.tensor(data, dtype=None, device=None): a copy of nested numbers.
Tensor tensorFromData(nb::handle data, nb::handle dtype, nb::handle device) {
  std::vector<int64_t> dims;
  std::vector<Scalar> values;
  bool anyFloat = false, allBool = true;
  flatten(data, 0, dims, values, anyFloat, allBool);
  DType t = dtype.is_none() ? (anyFloat ? DType::f32 : (allBool && !values.empty() ? DType::boolean : DType::i64))
                            : nb::cast<DType>(dtype);
  Shape shape{std::span<const int64_t>(dims)};
  Device d = toDevice(device);
  if (is_floating(t)) {
    std::vector<double> reals;
    reals.reserve(values.size());
    for (const Scalar& v : values) reals.push_back(v.to_double());
    return cast(from_vector(reals, shape, d), t);
  }
  // Integers exactly (through double, 2^53 + 1 lost its last bit and
  // 2^63 - 1 overflowed); numbers given as floats truncated, saturating.
  std::vector<int64_t> ints;
  ints.reserve(values.size());
  for (const Scalar& v : values) ints.push_back(v.to_int());
  return cast(from_vector(ints, shape, d), t);
}

std::vector<int64_t> pair(nb::handle h) {
  if (PyLong_Check(h.ptr())) {
    auto v = nb::cast<int64_t>(h);
    return {v, v};
  }
  return nb::cast<std::vector<int64_t>>(h);
}

}  // namespace

void bindOps(nb::module_& m) {
  // ---- creation ----
  m.def("tensor", &tensorFromData, nb::arg("data"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
        "A tensor holding a copy of nested Python numbers (dtype inferred: bool, i64 or f32).");
  m.def("zeros", [](nb::handle s, DType t, nb::handle d) { return zeros(toShape(s, "zeros"), t, toDevice(d)); },
        nb::arg("shape"), nb::arg("dtype") = DType::f32, nb::arg("device") = nb::none());
  m.def("ones", [](nb::handle s, DType t, nb::handle d) { return ones(toShape(s, "ones"), t, toDevice(d)); },
        nb::arg("shape"), nb::arg("dtype") = DType::f32, nb::arg("device") = nb::none());
  m.def(
      "full",
      [](nb::handle s, nb::handle v, DType t, nb::handle d) {
        Operand op = toOperand(v, "full");
        if (op.is_tensor()) throw nb::type_error("full: the value must be a number");
        return full(toShape(s, "full"), op.scalar(), t, toDevice(d));
      },
      nb::arg("shape"), nb::arg("value"), nb::arg("dtype") = DType::f32, nb::arg("device") = nb::none());
  m.def("zeros_like", &zeros_like);
  m.def("ones_like", &ones_like);
  m.def(
      "arange",
      [](double start, nb::handle end, double step, nb::handle dtype, nb::handle d) {
        if (end.is_none()) {
          DType t = dtype.is_none() ? DType::i64 : nb::cast<DType>(dtype);
          return arange(0, start, 1, t, toDevice(d));
        }
        DType t = dtype.is_none() ? DType::f32 : nb::cast<DType>(dtype);
        return arange(start, nb::cast<double>(end), step, t, toDevice(d));
      },
      nb::arg("start"), nb::arg("end") = nb::none(), nb::arg("step") = 1.0, nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none(), "arange(n) gives i64 0..n-1; arange(start, end, step) gives f32 by default.");
  m.def(
      "rand",
      [](nb::handle s, uint64_t seed, DType t, double lo, double hi, nb::handle d) {
        return rand(toShape(s, "rand"), seed, t, lo, hi, toDevice(d));
      },
      nb::arg("shape"), nb::arg("seed"), nb::arg("dtype") = DType::f32, nb::arg("low") = 0.0, nb::arg("high") = 1.0,
      nb::arg("device") = nb::none());
  m.def(
      "randn",
      [](nb::handle s, uint64_t seed, DType t, double mean, double std, nb::handle d) {
        return randn(toShape(s, "randn"), seed, t, mean, std, toDevice(d));
      },
      nb::arg("shape"), nb::arg("seed"), nb::arg("dtype") = DType::f32, nb::arg("mean") = 0.0, nb::arg("std") = 1.0,
      nb::arg("device") = nb::none());
  m.def(
      "scalar_tensor",
      [](nb::handle v, DType t, nb::handle d) { return scalar_tensor(toOperand(v, "scalar_tensor").scalar(), t, toDevice(d)); },
      nb::arg("value"), nb::arg("dtype") = DType::f32, nb::arg("device") = nb::none());

  // ---- elementwise ----
  // The op table's unary, binary and comparison rows (include/kiln/op_table.def),
  // then the composites of the same shapes.
  std::vector<std::pair<const char*, BinaryOp>> binary;
  std::vector<std::pair<const char*, UnaryOp>> unary;
#define KILN_PY_Unary(f) unary.emplace_back(#f, &f);
#define KILN_PY_Binary(f) binary.emplace_back(#f, &f);
#define KILN_PY_Compare(f) binary.emplace_back(#f, &f);
#define KILN_PY_Leaf(f)
#define KILN_PY_Select(f)
#define KILN_PY_Cast(f)
#define KILN_PY_Reduce(f)
#define KILN_PY_ArgReduce(f)
#define KILN_PY_Scan(f)
#define KILN_PY_Matmul(f)
#define KILN_PY_Conv(f)
#define KILN_PY_Shape(f)
#define KILN_PY_Index(f)
#define KILN_PY_Collective(f)
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) \
  KILN_PY_##Category(public_name)
#include "kiln/op_table.def"
  for (auto c : {std::pair<const char*, UnaryOp>{"gelu", &gelu}, {"gelu_exact", &gelu_exact}, {"isnan", &isnan},
                 {"isinf", &isinf}})
    unary.push_back(c);
  for (auto [name, f] : binary)
    m.def(name, [f, name](nb::handle a, nb::handle b) { return f(toOperand(a, name), toOperand(b, name)); },
          nb::arg("a"), nb::arg("b"));
  for (auto [name, f] : unary) m.def(name, f, nb::arg("x"));
  m.def("leaky_relu", &leaky_relu, nb::arg("x"), nb::arg("negative_slope") = 0.01);
  m.def(
      "where",
      [](nb::handle c, nb::handle a, nb::handle b) {
        return where(toTensor(c, "where"), toOperand(a, "where"), toOperand(b, "where"));
      },
      nb::arg("cond"), nb::arg("a"), nb::arg("b"));
  m.def(
      "clamp",
      [](const Tensor& x, nb::handle lo, nb::handle hi) {
        // A missing bound is infinite (cast to x's dtype by clamp's promotion).
        constexpr double inf = std::numeric_limits<double>::infinity();
        Operand low = lo.is_none() ? Operand(-inf) : toOperand(lo, "clamp");
        Operand high = hi.is_none() ? Operand(inf) : toOperand(hi, "clamp");
        if (!is_floating(x.dtype()) && (lo.is_none() || hi.is_none()))
          throw Error("clamp: give both bounds for integer tensors");
        return clamp(x, low, high);
      },
      nb::arg("x"), nb::arg("min") = nb::none(), nb::arg("max") = nb::none());
  m.def("cast", &cast, nb::arg("x"), nb::arg("dtype"));

  // ---- reductions ----
  using Reduce = Tensor (*)(const Tensor&, const std::vector<int>&, bool);
  const std::pair<const char*, Reduce> reductions[] = {
      {"sum", &sum}, {"mean", &mean}, {"max", &max}, {"min", &min}, {"prod", &prod}};
  for (auto [name, f] : reductions)
    m.def(name, [f](const Tensor& x, nb::handle axis, bool keepdim) { return f(x, toAxes(axis), keepdim); },
          nb::arg("x"), nb::arg("axis") = nb::none(), nb::arg("keepdim") = false);
  m.def("argmax", &argmax, nb::arg("x"), nb::arg("axis"), nb::arg("keepdim") = false,
        nb::arg("select_last_index") = false);
  m.def("argmin", &argmin, nb::arg("x"), nb::arg("axis"), nb::arg("keepdim") = false,
        nb::arg("select_last_index") = false);

  // ---- linear algebra and shape ----
  m.def("matmul", &matmul, nb::arg("a"), nb::arg("b"));
  m.def("reshape", [](const Tensor& x, nb::handle s) { return reshape(x, toShape(s, "reshape")); }, nb::arg("x"),
        nb::arg("shape"));
  m.def("transpose", &transpose, nb::arg("x"), nb::arg("a") = -2, nb::arg("b") = -1);
  m.def("permute", &permute, nb::arg("x"), nb::arg("perm"));
  m.def("broadcast_to", [](const Tensor& x, nb::handle s) { return broadcast_to(x, toShape(s, "broadcast_to")); },
        nb::arg("x"), nb::arg("shape"));
  m.def("squeeze", [](const Tensor& x, nb::handle axes) { return squeeze(x, toAxes(axes)); }, nb::arg("x"),
        nb::arg("axis") = nb::none());
  m.def("unsqueeze", &unsqueeze, nb::arg("x"), nb::arg("axis"));
  m.def(
      "slice",
      [](const Tensor& x, int axis, nb::handle start, nb::handle stop, int64_t step) {
        constexpr int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
        int64_t b = start.is_none() ? (step > 0 ? 0 : -1) : nb::cast<int64_t>(start);
        int64_t e = stop.is_none() ? (step > 0 ? big : small) : nb::cast<int64_t>(stop);
        return slice(x, axis, b, e, step);
      },
      nb::arg("x"), nb::arg("axis"), nb::arg("start") = nb::none(), nb::arg("stop") = nb::none(),
      nb::arg("step") = 1, "x[start:stop:step] along `axis` (Python slice rules).");
  m.def("flip", [](const Tensor& x, nb::handle axes) { return flip(x, toAxes(axes)); }, nb::arg("x"),
        nb::arg("axis"));
  m.def("concat", &concat, nb::arg("xs"), nb::arg("axis") = 0);
  m.def("index_select", &index_select, nb::arg("x"), nb::arg("axis"), nb::arg("index"));
  m.def("gather", &gather, nb::arg("x"), nb::arg("axis"), nb::arg("index"));
  m.def("index_add", &index_add, nb::arg("x"), nb::arg("axis"), nb::arg("index"), nb::arg("source"));
  m.def("cumsum", &cumsum, nb::arg("x"), nb::arg("axis"));
  m.def("scatter_add", &scatter_add, nb::arg("x"), nb::arg("axis"), nb::arg("index"), nb::arg("source"));
  m.def("one_hot", &one_hot, nb::arg("index"), nb::arg("num_classes"), nb::arg("dtype") = DType::f32);

  // ---- nn ----
  m.def("softmax", &softmax, nb::arg("x"), nb::arg("axis") = -1);
  m.def("log_softmax", &log_softmax, nb::arg("x"), nb::arg("axis") = -1);
  m.def(
      "layer_norm",
      [](const Tensor& x, nb::handle w, nb::handle b, double eps) {
        Tensor weight = w.is_none() ? Tensor() : nb::cast<Tensor>(w);
        Tensor bias = b.is_none() ? Tensor() : nb::cast<Tensor>(b);
        return layer_norm(x, weight, bias, eps);
      },
      nb::arg("x"), nb::arg("weight") = nb::none(), nb::arg("bias") = nb::none(), nb::arg("eps") = 1e-5);
  m.def("cross_entropy", &cross_entropy, nb::arg("logits"), nb::arg("targets"));

  nb::enum_<Layout>(m, "Layout").value("NCHW", Layout::NCHW).value("NHWC", Layout::NHWC);
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, nb::handle b, nb::handle stride, nb::handle padding, nb::handle dilation,
         int64_t groups, Layout layout) {
        Conv2dOptions o;
        o.stride = pair(stride);
        o.padding = pair(padding);
        o.dilation = pair(dilation);
        o.groups = groups;
        o.layout = layout;
        return conv2d(x, w, b.is_none() ? Tensor() : nb::cast<Tensor>(b), o);
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1,
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("groups") = 1, nb::arg("layout") = Layout::NCHW);
  auto pool = [](Tensor (*f)(const Tensor&, const Pool2dOptions&)) {
    return [f](const Tensor& x, nb::handle kernel, nb::handle stride, nb::handle padding, bool ceilMode,
               bool countIncludePad, Layout layout) {
      Pool2dOptions o;
      o.kernel = pair(kernel);
      o.stride = stride.is_none() ? o.kernel : pair(stride);  // torch's default: the kernel
      o.padding = pair(padding);
      o.ceil_mode = ceilMode;
      o.count_include_pad = countIncludePad;
      o.layout = layout;
      return f(x, o);
    };
  };
  m.def("max_pool2d", pool(&max_pool2d), nb::arg("x"), nb::arg("kernel"), nb::arg("stride") = nb::none(),
        nb::arg("padding") = 0, nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = false,
        nb::arg("layout") = Layout::NCHW);
  m.def("avg_pool2d", pool(&avg_pool2d), nb::arg("x"), nb::arg("kernel"), nb::arg("stride") = nb::none(),
        nb::arg("padding") = 0, nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = false,
        nb::arg("layout") = Layout::NCHW);
  m.def("adaptive_avg_pool2d", &adaptive_avg_pool2d, nb::arg("x"), nb::arg("out_h"), nb::arg("out_w"),
        nb::arg("layout") = Layout::NCHW);
}

}  // namespace kiln::python
