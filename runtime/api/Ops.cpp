// The primitive ops: validation (through the core rules), type promotion and
// recording. Composite ops live in Composites.cpp.
#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/api/OpSupport.h"
#include "runtime/backends/Hal.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/core/TensorSize.h"

namespace kiln {

using core::OpKind;
using trace::NodeSpec;

namespace api {

void checkTensor(const char* op, const Tensor& t, const char* name) {
  if (!t.defined())
    fail(op, std::string(name) + " is an undefined tensor (default-constructed); pass the result of an op");
}

void checkSameDevice(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
    } else if (t->device() != first->device()) {
      fail(op, "operands live on different devices (" + first->device().str() + " and " + t->device().str() +
                   "); move one with to()");
    }
  }
}

Tensor castTo(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return record(NodeSpec{OpKind::Cast, dtype, x.shape()}, {&x});
}

Tensor constant(const Scalar& v, DType dtype, Device device, bool shared) {
  NodeSpec spec{OpKind::Full, dtype, Shape{}};
  spec.device = device;
  spec.f0 = v.to_double();
  spec.i0 = v.to_int();
  // No inputs, so no autograd node: only the recorder sees it.
  return shared ? trace::Recorder::current().recordScalarConstant(spec) : record(spec, {});
}

core::TypedOperand typedOperand(const Operand& o) {
  if (o.is_tensor()) {
    const Tensor& t = o.tensor();
    return {t.dtype(), t.rank() == 0 ? core::OperandPriority::RankZero : core::OperandPriority::Tensor};
  }
  DType d = o.scalar().kind() == Scalar::Kind::Bool       ? DType::boolean
            : o.scalar().kind() == Scalar::Kind::Integral ? DType::i64
                                                          : DType::f64;
  return {d, core::OperandPriority::Scalar};
}

Tensor operandAs(const Operand& o, DType dtype, Device device, bool sharedConstant) {
  return o.is_tensor() ? castTo(o.tensor(), dtype) : constant(o.scalar(), dtype, device, sharedConstant);
}

Device deviceOf(const Operand& a, const Operand& b) {
  return a.is_tensor() ? a.tensor().device() : b.is_tensor() ? b.tensor().device() : default_device();
}

Shape operandShape(const Operand& o) { return o.is_tensor() ? o.tensor().shape() : Shape{}; }

std::string dtypeList(std::initializer_list<DType> ts) {
  std::string s;
  for (DType t : ts) {
    if (!s.empty()) s += ", ";
    s += dtype_name(t);
  }
  return s;
}

}  // namespace api

using namespace api;

namespace {

void checkOperands(const char* op, const Operand& a, const Operand& b) {
  if (!a.is_tensor() && !b.is_tensor()) fail(op, "at least one operand must be a tensor");
  if (a.is_tensor()) checkTensor(op, a.tensor(), "first operand");
  if (b.is_tensor()) checkTensor(op, b.tensor(), "second operand");
  if (a.is_tensor() && b.is_tensor()) checkSameDevice(op, {&a.tensor(), &b.tensor()});
}

Tensor binary(OpKind kind, const Operand& a, const Operand& b) {
  const char* op = core::opName(kind).data();
  checkOperands(op, a, b);
  const core::TypedOperand ops[2] = {typedOperand(a), typedOperand(b)};
  DType t = core::resultType(ops);
  switch (kind) {
    case OpKind::Div: t = core::floatingResult(t); break;
    case OpKind::LogicalAnd:
    case OpKind::LogicalOr: t = DType::boolean; break;
    default:
      if (!core::acceptsDType(kind, t))
        fail(op, "arithmetic on bool operands is not defined; use logical_and/logical_or, or cast to an integer "
                 "type first");
  }
  Shape shape;
  check(op, core::broadcastShapes(operandShape(a), operandShape(b), &shape));
  const Device device = deviceOf(a, b);
  // A scalar exponent is pow's own node: kernels specialise on it, and a
  // region that shared it with other steps' pows would read it as an input
  // in all steps but the first (Regions.cpp).
  Tensor x = operandAs(a, t, device), y = operandAs(b, t, device, kind != OpKind::Pow);
  return record(NodeSpec{kind, t, shape}, {&x, &y});
}

Tensor compare(OpKind kind, const Operand& a, const Operand& b) {
  const char* op = core::opName(kind).data();
  checkOperands(op, a, b);
  const core::TypedOperand ops[2] = {typedOperand(a), typedOperand(b)};
  DType t = core::resultType(ops);
  Shape shape;
  check(op, core::broadcastShapes(operandShape(a), operandShape(b), &shape));
  const Device device = deviceOf(a, b);
  Tensor x = operandAs(a, t, device), y = operandAs(b, t, device);
  return record(NodeSpec{kind, DType::boolean, shape}, {&x, &y});
}

/// Transcendental ops: integer and bool inputs compute in f32.
Tensor unaryFloat(OpKind kind, const Tensor& x) {
  const char* op = core::opName(kind).data();
  checkTensor(op, x);
  Tensor f = castTo(x, core::floatingResult(x.dtype()));
  return record(NodeSpec{kind, f.dtype(), f.shape()}, {&f});
}

/// Ops defined on numbers of any type except bool.
Tensor unaryNumeric(OpKind kind, const Tensor& x) {
  const char* op = core::opName(kind).data();
  checkTensor(op, x);
  if (!core::acceptsDType(kind, x.dtype()))
    fail(op, "not defined for " + std::string(dtype_name(x.dtype())) + " tensors (it takes " +
                 std::string(core::opTypesDescription(kind)) + "); cast to an integer or floating type first");
  return record(NodeSpec{kind, x.dtype(), x.shape()}, {&x});
}

/// floor/ceil/round: the identity on integers.
Tensor rounding(OpKind kind, const Tensor& x) {
  checkTensor(core::opName(kind).data(), x);
  if (!is_floating(x.dtype())) return x;
  return record(NodeSpec{kind, x.dtype(), x.shape()}, {&x});
}

void checkCreation(const char* op, const Shape& shape, Device device) {
  for (int64_t d : shape)
    if (d < 0) fail(op, "shape " + shape.str() + " has a negative extent");
  core::requireElementCount(op, shape);
  hal::deviceContext(device);  // throws a clear error when there is no driver
}

Tensor reduction(OpKind kind, const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  const char* op = core::opName(kind).data();
  checkTensor(op, x);
  Shape out;
  core::AxisMask mask;
  check(op, core::reduceShape(x.shape(), axes, keepdim, &out, &mask));
  Tensor in = x;
  if (kind == OpKind::ReduceSum || kind == OpKind::ReduceProd) in = castTo(x, core::sumResult(x.dtype()));
  if (kind == OpKind::ReduceMax || kind == OpKind::ReduceMin) {
    for (int d = 0; d < x.rank(); ++d)
      if ((mask & (1u << d)) && x.shape()[d] == 0)
        fail(op, "cannot reduce over axis " + std::to_string(d) + " of extent 0 in " + x.shape().str() +
                     ": an empty set has no " + (kind == OpKind::ReduceMax ? "maximum" : "minimum"));
  }
  int64_t attrs[Shape::kMaxRank];
  int n = 0;
  for (int d = 0; d < x.rank(); ++d)
    if (mask & (1u << d)) attrs[n++] = d;
  NodeSpec spec{kind, in.dtype(), out, std::span<const int64_t>(attrs, n)};
  spec.keepdim = keepdim;
  return record(spec, {&in});
}

Tensor argReduction(OpKind kind, const Tensor& x, int axis, bool keepdim, bool selectLast) {
  const char* op = core::opName(kind).data();
  checkTensor(op, x);
  int a = 0;
  if (x.rank() == 0) {
    if (axis != 0 && axis != -1) fail(op, "axis " + std::to_string(axis) + " is out of range for a rank-0 tensor");
  } else {
    check(op, core::normalizeAxis(axis, x.rank(), &a));
    if (x.shape()[a] == 0)
      fail(op, "axis " + std::to_string(axis) + " of " + x.shape().str() + " is empty; there is no extreme to find");
  }
  Shape out = x.rank() == 0 ? Shape{} : core::reducedShape(x.shape(), 1u << a, keepdim);
  Tensor in = castTo(x, x.dtype() == DType::f16 || x.dtype() == DType::bf16 ? DType::f32 : x.dtype());
  const int64_t last = selectLast ? 1 : 0;
  NodeSpec spec{kind, DType::i64, out, std::span<const int64_t>(&last, 1)};
  spec.i0 = a;
  spec.keepdim = keepdim;
  return record(spec, {&in});
}

/// Reads a materialized integer tensor's values (for eager index checks).
std::vector<int64_t> materializedValues(const Tensor& t) {
  if (!t.is_materialized()) return {};
  return t.to_vector<int64_t>();
}

Tensor indexTensor(const char* op, const Tensor& index) {
  checkTensor(op, index, "index");
  if (!is_integral(index.dtype()))
    fail(op, "index must be an integer tensor, got " + std::string(dtype_name(index.dtype())) +
                 "; cast it with cast(index, DType::i64)");
  return castTo(index, DType::i64);
}

void checkIndexValues(const char* op, const Tensor& index, int axis, int64_t extent) {
  // Materialized indices are checked now, at the call; pending ones when the
  // trace runs (the result tensor then reports the error).
  for (int64_t v : materializedValues(index)) {
    if (v < 0 || v >= extent)
      fail(op, "index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) + " of extent " +
                   std::to_string(extent) + " (valid: 0 to " + std::to_string(extent - 1) + ")");
  }
}

/// An integer tensor of `dtype` holds `value` (truncated toward zero when it
/// is a float): else a clear error, as PyTorch's, rather than a wrapped value
/// (full({1}, 300.0, u8) gave 44, where cast() saturates to 255).
void checkFits(const char* op, const Scalar& value, DType dtype) {
  if (!is_integral(dtype)) return;
  const std::string name(dtype_name(dtype));
  const bool floating = value.kind() == Scalar::Kind::Floating;
  const double v = value.to_double();
  if (floating && !std::isfinite(v)) fail(op, "value " + std::to_string(v) + " cannot be converted to " + name);
  const auto [lo, hi] = *core::integerRange(dtype);
  // [-2^63, 2^63) as doubles: hi + 1.0 is exact where hi itself is not.
  const bool fits = floating ? std::trunc(v) >= static_cast<double>(lo) && std::trunc(v) < static_cast<double>(hi) + 1.0
                             : value.to_int() >= lo && value.to_int() <= hi;
  if (!fits)
    fail(op, "value " + (floating ? std::to_string(v) : std::to_string(value.to_int())) + " does not fit in " + name +
                 " ([" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "]); pick a wider dtype, or cast() a tensor (which saturates)");
}

}  // namespace

// ---- creation --------------------------------------------------------------

Tensor full(const Shape& shape, Scalar value, DType dtype, Device device) {
  checkCreation("full", shape, device);
  checkFits("full", value, dtype);
  NodeSpec spec{OpKind::Full, dtype, shape};
  spec.device = device;
  spec.f0 = value.to_double();
  spec.i0 = value.to_int();
  return record(spec, {});
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1, dtype, device); }
Tensor zeros_like(const Tensor& t) {
  checkTensor("zeros_like", t);
  return zeros(t.shape(), t.dtype(), t.device());
}
Tensor ones_like(const Tensor& t) {
  checkTensor("ones_like", t);
  return ones(t.shape(), t.dtype(), t.device());
}
Tensor scalar_tensor(Scalar value, DType dtype, Device device) { return full(Shape{}, value, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  if (step == 0 || step != step) fail("arange", "step must be non-zero");
  if (start != start || end != end) fail("arange", "start and end must not be NaN");
  double n = std::ceil((end - start) / step);
  if (!(n < 0x1p63)) {  // also infinite: converting would overflow
    char range[128];
    std::snprintf(range, sizeof range, "[%g, %g) by %g would hold about %g elements", start, end, step, n);
    fail("arange", std::string(range) + ", more than fits in int64 (at most " + std::to_string(INT64_MAX) +
                       "); use a larger step or a shorter range");
  }
  int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  checkCreation("arange", Shape{count}, device);
  NodeSpec spec{OpKind::Arange, dtype, Shape{count}};
  spec.device = device;
  spec.f0 = start;
  spec.f1 = step;
  return record(spec, {});
}
Tensor arange(int64_t n, DType dtype, Device device) { return arange(0, static_cast<double>(n), 1, dtype, device); }

namespace detail {
Tensor fromHost(const void* data, std::size_t count, DType dtype, const Shape& shape, Device device) {
  checkCreation("from_vector", shape, device);
  if (static_cast<int64_t>(count) != shape.numel())
    fail("from_vector", std::to_string(count) + " values do not fill shape " + shape.str() + " (" +
                            std::to_string(shape.numel()) + " elements)");
  const size_t bytes = core::requireDenseBytes("from_vector", shape, dtype);
  // Another device gets a copy of a host tensor, made on its stream.
  if (device.kind != Device::CPU) return fromHost(data, count, dtype, shape, Device::cpu()).to(device);
  TensorImpl* impl = TensorImpl::create(dtype, shape, device);
  impl->view.storage = core::Storage::allocate(hal::hostAllocator(), bytes);
  if (bytes) std::memcpy(impl->view.storage->data(), data, bytes);
  core::contiguousStrides(shape, impl->view.strides);
  return Tensor(impl);
}
}  // namespace detail

Tensor api::zerosNow(const Shape& shape, DType dtype, Device device) {
  checkCreation("zeros", shape, device);
  if (device.kind != Device::CPU) return zerosNow(shape, dtype, Device::cpu()).to(device);
  const size_t bytes = core::requireDenseBytes("zeros", shape, dtype);
  detail::TensorImpl* impl = detail::TensorImpl::create(dtype, shape, device);
  impl->view.storage = core::Storage::allocate(hal::hostAllocator(), bytes);
  if (bytes) std::memset(impl->view.storage->data(), 0, bytes);
  core::contiguousStrides(shape, impl->view.strides);
  return Tensor(impl);
}

Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device, std::function<void(void*)> deleter,
                 std::vector<int64_t> strides) {
  checkCreation("from_blob", shape, device);
  if (!data && shape.numel() > 0) fail("from_blob", "data is null for a non-empty shape " + shape.str());
  if (!strides.empty() && static_cast<int>(strides.size()) != shape.rank())
    fail("from_blob", std::to_string(strides.size()) + " strides given for rank " + std::to_string(shape.rank()));
  int64_t viewStrides[Shape::kMaxRank] = {};
  if (strides.empty()) core::contiguousStrides(shape, viewStrides);
  else
    for (int d = 0; d < shape.rank(); ++d) viewStrides[d] = strides[d];
  int64_t lo = 0, hi = 0;  // element offsets spanned by the view
  check("from_blob", core::stridedExtent(shape, viewStrides, dtype, &lo, &hi));
  const int64_t extent = shape.numel() == 0 ? 0 : hi - lo + 1;
  detail::TensorImpl* impl = detail::TensorImpl::create(dtype, shape, device);
  for (int d = 0; d < shape.rank(); ++d) impl->view.strides[d] = viewStrides[d];
  impl->view.storage = core::Storage::wrap(data, static_cast<size_t>(extent) * dtype_size(dtype), device,
                                           std::move(deleter));
  return Tensor(impl);
}

Tensor rand(const Shape& shape, uint64_t seed, DType dtype, double low, double high, Device device) {
  checkCreation("rand", shape, device);
  if (!is_floating(dtype)) fail("rand", "dtype must be floating, got " + std::string(dtype_name(dtype)));
  NodeSpec spec{OpKind::RandUniform, dtype, shape};
  spec.device = device;
  spec.i0 = static_cast<int64_t>(seed);
  Tensor u = record(spec, {});
  if (low == 0 && high == 1) return u;
  return add(mul(u, high - low), low);
}

Tensor randn(const Shape& shape, uint64_t seed, DType dtype, double mean, double stddev, Device device) {
  checkCreation("randn", shape, device);
  if (!is_floating(dtype)) fail("randn", "dtype must be floating, got " + std::string(dtype_name(dtype)));
  NodeSpec spec{OpKind::RandNormal, dtype, shape};
  spec.device = device;
  spec.i0 = static_cast<int64_t>(seed);
  Tensor z = record(spec, {});
  if (mean == 0 && stddev == 1) return z;
  return add(mul(z, stddev), mean);
}

// ---- elementwise -------------------------------------------------------------

/// A unary row's public function: the table's dtype rule decides (bool ops
/// cast to bool, Float ops compute integers in f32, Numeric ops refuse
/// bool); floor, ceil and round are the identity on integers.
static Tensor unaryOp(OpKind kind, const Tensor& x) {
  switch (kind) {
    case OpKind::LogicalNot: {
      checkTensor("logical_not", x);
      Tensor b = castTo(x, DType::boolean);
      return record(NodeSpec{OpKind::LogicalNot, DType::boolean, x.shape()}, {&b});
    }
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Round:
      return rounding(kind, x);
    default:
      return core::opTypes(kind) == core::OpTypes::Float ? unaryFloat(kind, x) : unaryNumeric(kind, x);
  }
}

// One public function per Unary, Binary and Compare row of the op table.
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) \
  KILN_PUBLIC_##Category(Name, public_name)
#define KILN_PUBLIC_Unary(Name, f) \
  Tensor f(const Tensor& x) { return unaryOp(OpKind::Name, x); }
#define KILN_PUBLIC_Binary(Name, f) \
  Tensor f(const Operand& a, const Operand& b) { return binary(OpKind::Name, a, b); }
#define KILN_PUBLIC_Compare(Name, f) \
  Tensor f(const Operand& a, const Operand& b) { return compare(OpKind::Name, a, b); }
#define KILN_PUBLIC_Leaf(Name, f)
#define KILN_PUBLIC_Select(Name, f)
#define KILN_PUBLIC_Cast(Name, f)
#define KILN_PUBLIC_Reduce(Name, f)
#define KILN_PUBLIC_ArgReduce(Name, f)
#define KILN_PUBLIC_Scan(Name, f)
#define KILN_PUBLIC_Matmul(Name, f)
#define KILN_PUBLIC_Conv(Name, f)
#define KILN_PUBLIC_Shape(Name, f)
#define KILN_PUBLIC_Index(Name, f)
#define KILN_PUBLIC_Collective(Name, f)
#include "kiln/op_table.def"
#undef KILN_PUBLIC_Unary
#undef KILN_PUBLIC_Binary
#undef KILN_PUBLIC_Compare

Tensor where(const Tensor& cond, const Operand& a, const Operand& b) {
  checkTensor("where", cond, "condition");
  // Both branches may be C++ scalars: the condition gives the shape.
  if (a.is_tensor()) checkTensor("where", a.tensor(), "first branch");
  if (b.is_tensor()) checkTensor("where", b.tensor(), "second branch");
  for (const Operand* o : {&a, &b})
    if (o->is_tensor()) checkSameDevice("where", {&cond, &o->tensor()});
  const core::TypedOperand ops[2] = {typedOperand(a), typedOperand(b)};
  DType t = core::resultType(ops);
  Shape ab, shape;
  check("where", core::broadcastShapes(operandShape(a), operandShape(b), &ab));
  check("where", core::broadcastShapes(cond.shape(), ab, &shape));
  Tensor c = castTo(cond, DType::boolean), x = operandAs(a, t, cond.device()), y = operandAs(b, t, cond.device());
  return record(NodeSpec{OpKind::Where, t, shape}, {&c, &x, &y});
}

Tensor cast(const Tensor& x, DType dtype) {
  checkTensor("cast", x);
  return castTo(x, dtype);
}

// ---- reductions ------------------------------------------------------------

Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return reduction(OpKind::ReduceSum, x, axes, keepdim);
}
Tensor prod(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return reduction(OpKind::ReduceProd, x, axes, keepdim);
}
Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return reduction(OpKind::ReduceMax, x, axes, keepdim);
}
Tensor min(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return reduction(OpKind::ReduceMin, x, axes, keepdim);
}
Tensor cumsum(const Tensor& x, int axis) {
  checkTensor("cumsum", x);
  if (x.rank() == 0) {  // one element: its own running sum (as PyTorch's)
    if (axis != 0 && axis != -1) fail("cumsum", "axis " + std::to_string(axis) + " is out of range for a rank-0 tensor");
    return reshape(cumsum(reshape(x, Shape{1}), 0), Shape{});
  }
  int a = 0;
  check("cumsum", core::normalizeAxis(axis, x.rank(), &a));
  // Halves keep an f32 running sum and round each result (as PyTorch).
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16) return cast(cumsum(cast(x, DType::f32), a), x.dtype());
  // Sums' dtype rule: integers and bool add up in i64.
  Tensor in = castTo(x, core::sumResult(x.dtype()));
  NodeSpec spec{OpKind::Cumsum, in.dtype(), in.shape()};
  spec.i0 = a;
  return record(spec, {&in});
}
Tensor argmax(const Tensor& x, int axis, bool keepdim, bool select_last_index) {
  return argReduction(OpKind::ArgMax, x, axis, keepdim, select_last_index);
}
Tensor argmin(const Tensor& x, int axis, bool keepdim, bool select_last_index) {
  return argReduction(OpKind::ArgMin, x, axis, keepdim, select_last_index);
}

// ---- matmul --------------------------------------------------------------------

Tensor matmul(const Tensor& a, const Tensor& b) {
  checkTensor("matmul", a, "first operand");
  checkTensor("matmul", b, "second operand");
  checkSameDevice("matmul", {&a, &b});
  if (a.rank() == 0 || b.rank() == 0)
    fail("matmul", "operands must have rank >= 1, got " + a.shape().str() + " and " + b.shape().str() +
                       "; use mul for scalars");
  if (a.rank() == 1 || b.rank() == 1) {
    // NumPy semantics: a vector is a row (left) or column (right) and its
    // axis is dropped from the result.
    Tensor a2 = a.rank() == 1 ? unsqueeze(a, 0) : a;
    Tensor b2 = b.rank() == 1 ? unsqueeze(b, 1) : b;
    Tensor r = matmul(a2, b2);
    if (b.rank() == 1) r = squeeze(r, {-1});
    if (a.rank() == 1) r = squeeze(r, {-2 + (b.rank() == 1 ? 1 : 0)});
    return r;
  }
  const core::TypedOperand ops[2] = {{a.dtype(), core::OperandPriority::Tensor}, {b.dtype(), core::OperandPriority::Tensor}};
  DType t = core::resultType(ops);
  if (t == DType::boolean) fail("matmul", "bool operands are not supported; cast to a number type first");
  Shape out;
  check("matmul", core::matmulShape(a.shape(), b.shape(), &out));
  Tensor x = castTo(a, t), y = castTo(b, t);
  return record(NodeSpec{OpKind::Matmul, t, out}, {&x, &y});
}

// ---- shape -----------------------------------------------------------------------

Tensor reshape(const Tensor& x, const Shape& shape) {
  checkTensor("reshape", x);
  Shape out;
  check("reshape", core::reshapeShape(x.shape(), shape, &out));
  if (out == x.shape()) return x;
  return record(NodeSpec{OpKind::Reshape, x.dtype(), out}, {&x});
}

Tensor permute(const Tensor& x, const std::vector<int>& perm) {
  checkTensor("permute", x);
  int64_t p[Shape::kMaxRank];
  for (size_t i = 0; i < perm.size() && i < Shape::kMaxRank; ++i) p[i] = perm[i];
  Shape out;
  check("permute", core::permuteShape(x.shape(), std::span<const int64_t>(p, std::min<size_t>(perm.size(), Shape::kMaxRank)), &out));
  bool identity = true;
  for (int i = 0; i < x.rank(); ++i) {
    if (p[i] < 0) p[i] += x.rank();
    identity = identity && p[i] == i;
  }
  if (identity) return x;
  return record(NodeSpec{OpKind::Permute, x.dtype(), out, std::span<const int64_t>(p, x.rank())}, {&x});
}

Tensor transpose(const Tensor& x, int a, int b) {
  checkTensor("transpose", x);
  int na, nb;
  check("transpose", core::normalizeAxis(a, x.rank(), &na));
  check("transpose", core::normalizeAxis(b, x.rank(), &nb));
  std::vector<int> perm(x.rank());
  for (int i = 0; i < x.rank(); ++i) perm[i] = i;
  std::swap(perm[na], perm[nb]);
  return permute(x, perm);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  checkTensor("broadcast_to", x);
  check("broadcast_to", core::checkBroadcastTo(x.shape(), shape));
  if (shape == x.shape()) return x;
  return record(NodeSpec{OpKind::BroadcastTo, x.dtype(), shape}, {&x});
}

Tensor squeeze(const Tensor& x, const std::vector<int>& axes) {
  checkTensor("squeeze", x);
  core::AxisMask mask = 0;
  if (axes.empty()) {
    for (int d = 0; d < x.rank(); ++d)
      if (x.shape()[d] == 1) mask |= 1u << d;
  }
  for (int a : axes) {
    int n;
    check("squeeze", core::normalizeAxis(a, x.rank(), &n));
    if (x.shape()[n] != 1)
      fail("squeeze", "axis " + std::to_string(a) + " of " + x.shape().str() + " has extent " +
                          std::to_string(x.shape()[n]) + ", not 1");
    mask |= 1u << n;
  }
  return reshape(x, core::reducedShape(x.shape(), mask, false));
}

Tensor unsqueeze(const Tensor& x, int axis) {
  checkTensor("unsqueeze", x);
  int a;
  check("unsqueeze", core::normalizeAxis(axis, x.rank() + 1, &a));
  Shape out;
  for (int d = 0; d < a; ++d) out.push_back(x.shape()[d]);
  out.push_back(1);
  for (int d = a; d < x.rank(); ++d) out.push_back(x.shape()[d]);
  return reshape(x, out);
}

namespace {

/// A negative-step slice: the elements start, start+step, ... > stop (Python
/// semantics), recorded as the ascending slice of the same elements read in
/// reverse through index_select with a materialized index, so it compiles
/// like any index_select and its gradient comes from the primitives'.
Tensor reversedSlice(const Tensor& x, int a, int64_t start, int64_t stop, int64_t step) {
  if (step == INT64_MIN) fail("slice", "step " + std::to_string(step) + " is out of range");
  const int64_t n = x.shape()[a];
  auto clampIndex = [n](int64_t v) {
    if (v < 0) v += n;  // no overflow: v < 0 <= n
    return std::clamp<int64_t>(v, -1, n - 1);  // -1: before the first element
  };
  const int64_t s = clampIndex(start), e = clampIndex(stop);
  const int64_t count = s > e ? (s - e - 1) / -step + 1 : 0;
  if (count == 0) return slice(x, a, 0, 0);
  const int64_t lowest = s + (count - 1) * step;
  Tensor ascending = slice(x, a, lowest, s + 1, -step);
  if (count == 1) return ascending;
  std::vector<int64_t> reversed(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) reversed[static_cast<size_t>(i)] = count - 1 - i;
  return index_select(ascending, a, from_vector<int64_t>(reversed, Shape{count}, x.device()));
}

}  // namespace

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t stop, int64_t step) {
  checkTensor("slice", x);
  int a;
  check("slice", core::normalizeAxis(axis, x.rank(), &a));
  if (step < 0) return reversedSlice(x, a, start, stop, step);
  int64_t s, extent;
  check("slice", core::normalizeSlice(x.shape()[a], start, stop, step, &s, &extent));
  if (extent == 0) s = 0;  // an empty slice reads nothing; start it at 0 so every lowering accepts it
  if (s == 0 && extent == x.shape()[a] && (step == 1 || extent <= 1)) return x;
  int64_t attrs[2 * Shape::kMaxRank];
  const int r = x.rank();
  for (int d = 0; d < r; ++d) {
    attrs[d] = d == a ? s : 0;
    attrs[r + d] = d == a ? step : 1;
  }
  Shape out = x.shape();
  out[a] = extent;
  return record(NodeSpec{OpKind::Slice, x.dtype(), out, std::span<const int64_t>(attrs, 2 * r)}, {&x});
}

Tensor flip(const Tensor& x, const std::vector<int>& axes) {
  checkTensor("flip", x);
  Tensor r = x;
  core::AxisMask seen = 0;
  for (int axis : axes) {
    int a;
    check("flip", core::normalizeAxis(axis, x.rank(), &a));
    if (seen & (1u << a)) fail("flip", "axis " + std::to_string(axis) + " is given twice");
    seen |= 1u << a;
    r = slice(r, a, -1, INT64_MIN, -1);
  }
  return r;
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) fail("concat", "needs at least one tensor");
  std::vector<const Shape*> shapes;
  DType t = DType::boolean;
  for (size_t i = 0; i < xs.size(); ++i) {
    checkTensor("concat", xs[i]);
    if (xs[i].device() != xs[0].device()) fail("concat", "tensors live on different devices");
    shapes.push_back(&xs[i].shape());
    t = i == 0 ? xs[0].dtype() : promote_types(t, xs[i].dtype());
  }
  Shape out;
  check("concat", core::concatShape(shapes, axis, &out));
  int a;
  check("concat", core::normalizeAxis(axis, xs[0].rank(), &a));
  std::vector<Tensor> cast(xs.size());
  std::vector<const Tensor*> ins(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    cast[i] = castTo(xs[i], t);
    ins[i] = &cast[i];
  }
  NodeSpec spec{OpKind::Concat, t, out};
  spec.i0 = a;
  return record(spec, ins);
}

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
  checkTensor("index_select", x);
  Tensor idx = indexTensor("index_select", index);
  checkSameDevice("index_select", {&x, &index});
  Shape out;
  check("index_select", core::indexSelectShape(x.shape(), axis, index.shape(), &out));
  int a;
  core::normalizeAxis(axis, x.rank(), &a);
  checkIndexValues("index_select", index, a, x.shape()[a]);
  NodeSpec spec{OpKind::IndexSelect, x.dtype(), out};
  spec.i0 = a;
  return record(spec, {&x, &idx});
}

Tensor index_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source) {
  checkTensor("index_add", x);
  checkTensor("index_add", source, "source");
  Tensor idx = indexTensor("index_add", index);
  checkSameDevice("index_add", {&x, &index, &source});
  if (!core::acceptsDType(OpKind::IndexAdd, x.dtype()))
    fail("index_add", "x has dtype " + std::string(dtype_name(x.dtype())) + "; it adds numbers (not bool)");
  if (source.dtype() != x.dtype())
    fail("index_add", "source has dtype " + std::string(dtype_name(source.dtype())) + " but x has " +
                          std::string(dtype_name(x.dtype())) + "; cast source to x's dtype");
  check("index_add", core::indexAddShape(x.shape(), axis, index.shape(), source.shape()));
  int a;
  core::normalizeAxis(axis, x.rank(), &a);
  checkIndexValues("index_add", index, a, x.shape()[a]);
  NodeSpec spec{OpKind::IndexAdd, x.dtype(), x.shape()};
  spec.i0 = a;
  return record(spec, {&x, &idx, &source});
}

Tensor scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source) {
  checkTensor("scatter_add", x);
  checkTensor("scatter_add", source, "source");
  Tensor idx = indexTensor("scatter_add", index);
  checkSameDevice("scatter_add", {&x, &index, &source});
  if (!core::acceptsDType(OpKind::ScatterAdd, x.dtype()))
    fail("scatter_add", "x has dtype " + std::string(dtype_name(x.dtype())) + "; it adds numbers (not bool)");
  if (source.dtype() != x.dtype())
    fail("scatter_add", "source has dtype " + std::string(dtype_name(source.dtype())) + " but x has " +
                            std::string(dtype_name(x.dtype())) + "; cast source to x's dtype");
  check("scatter_add", core::scatterAddShape(x.shape(), axis, index.shape(), source.shape()));
  int a;
  core::normalizeAxis(axis, x.rank(), &a);
  checkIndexValues("scatter_add", index, a, x.shape()[a]);
  NodeSpec spec{OpKind::ScatterAdd, x.dtype(), x.shape()};
  spec.i0 = a;
  return record(spec, {&x, &idx, &source});
}

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  checkTensor("gather", x);
  Tensor idx = indexTensor("gather", index);
  checkSameDevice("gather", {&x, &index});
  Shape out;
  check("gather", core::gatherShape(x.shape(), axis, index.shape(), &out));
  int a;
  core::normalizeAxis(axis, x.rank(), &a);
  checkIndexValues("gather", index, a, x.shape()[a]);
  NodeSpec spec{OpKind::Gather, x.dtype(), out};
  spec.i0 = a;
  return record(spec, {&x, &idx});
}

}  // namespace kiln
