#include "runtime/capi/OpCall.h"

#include <climits>
#include <cstring>
#include <iterator>
#include <optional>

#include "kiln/ops.h"
#include "runtime/capi/CApiSupport.h"

namespace kiln::capi {

namespace {

using UnaryFn = Tensor (*)(const Tensor&);
using BinaryFn = Tensor (*)(const Operand&, const Operand&);
using ReduceFn = Tensor (*)(const Tensor&, const std::vector<int>&, bool);

/// One C-ABI op: its name and, for the elementwise families the op table
/// drives, the public function that dispatch calls.
struct OpEntry {
  kiln_op op;
  const char* name;
  UnaryFn unary = nullptr;
  BinaryFn binary = nullptr;
};

/// A primitive the C ABI does not name (Param): left out of the lookups.
constexpr kiln_op NoCAbi = static_cast<kiln_op>(0);

// Entries per op-table row (include/kiln/op_table.def), by category: unary
// and binary elementwise ops and comparisons dispatch to their public
// function; the others have a name here and a case in dispatch().
#define KILN_CAPI_Leaf(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Unary(fn, c_abi) {c_abi, #fn, &kiln::fn, nullptr},
#define KILN_CAPI_Binary(fn, c_abi) {c_abi, #fn, nullptr, &kiln::fn},
#define KILN_CAPI_Compare(fn, c_abi) {c_abi, #fn, nullptr, &kiln::fn},
#define KILN_CAPI_Select(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Cast(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Reduce(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_ArgReduce(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Scan(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Matmul(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Conv(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Shape(fn, c_abi) {c_abi, #fn},
#define KILN_CAPI_Index(fn, c_abi) {c_abi, #fn},
// Collectives (include/kiln/dist.h) are not in the C ABI yet: no entry.
#define KILN_CAPI_Collective(fn, c_abi)
#define CAbi(name, value) KILN_OP_##name

constexpr OpEntry kOps[] = {
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) \
  KILN_CAPI_##Category(public_name, c_abi)
#include "kiln/op_table.def"
    // Public ops that record other primitives (composites and conveniences).
    {KILN_OP_ZEROS, "zeros"},
    {KILN_OP_ONES, "ones"},
    {KILN_OP_ZEROS_LIKE, "zeros_like"},
    {KILN_OP_ONES_LIKE, "ones_like"},
    {KILN_OP_SCALAR_TENSOR, "scalar_tensor"},
    {KILN_OP_GELU, "gelu"},
    {KILN_OP_ISNAN, "isnan", &kiln::isnan},
    {KILN_OP_ISINF, "isinf", &kiln::isinf},
    {KILN_OP_LEAKY_RELU, "leaky_relu"},
    {KILN_OP_CLAMP, "clamp"},
    {KILN_OP_MEAN, "mean"},
    {KILN_OP_TRANSPOSE, "transpose"},
    {KILN_OP_SQUEEZE, "squeeze"},
    {KILN_OP_UNSQUEEZE, "unsqueeze"},
    {KILN_OP_ONE_HOT, "one_hot"},
    {KILN_OP_CONTIGUOUS, "contiguous"},
    {KILN_OP_SOFTMAX, "softmax"},
    {KILN_OP_LOG_SOFTMAX, "log_softmax"},
    {KILN_OP_LAYER_NORM, "layer_norm"},
    {KILN_OP_CROSS_ENTROPY, "cross_entropy"},
    {KILN_OP_MAX_POOL2D, "max_pool2d"},
    {KILN_OP_AVG_POOL2D, "avg_pool2d"},
    {KILN_OP_ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d"},
    {KILN_OP_BATCH_NORM, "batch_norm"},
};

#undef CAbi
#undef KILN_CAPI_Leaf
#undef KILN_CAPI_Collective
#undef KILN_CAPI_Unary
#undef KILN_CAPI_Binary
#undef KILN_CAPI_Compare
#undef KILN_CAPI_Select
#undef KILN_CAPI_Cast
#undef KILN_CAPI_Reduce
#undef KILN_CAPI_ArgReduce
#undef KILN_CAPI_Scan
#undef KILN_CAPI_Matmul
#undef KILN_CAPI_Conv
#undef KILN_CAPI_Shape
#undef KILN_CAPI_Index

/// Two ops with one number would make kiln_op_name ambiguous (C accepts
/// duplicate enumerator values, so the table's CAbi column alone would not).
constexpr bool numbersDistinct() {
  for (size_t i = 0; i < std::size(kOps); ++i)
    for (size_t j = i + 1; j < std::size(kOps); ++j)
      if (kOps[i].op != NoCAbi && kOps[i].op == kOps[j].op) return false;
  return true;
}
static_assert(numbersDistinct(), "two kiln_op values are equal: see the CAbi column of kiln/op_table.def");

const OpEntry* entryOf(kiln_op op) {
  if (op == NoCAbi) return nullptr;
  for (const OpEntry& e : kOps)
    if (e.op == op) return &e;
  return nullptr;
}

const char* valueKindName(int32_t k) {
  switch (k) {
    case KILN_VALUE_NONE: return "none";
    case KILN_VALUE_TENSOR: return "tensor";
    case KILN_VALUE_FLOAT: return "float";
    case KILN_VALUE_INT: return "int";
    case KILN_VALUE_BOOL: return "bool";
    default: return "invalid";
  }
}

const char* attrKindName(int32_t k) {
  switch (k) {
    case KILN_ATTR_INT: return "INT";
    case KILN_ATTR_FLOAT: return "FLOAT";
    case KILN_ATTR_INTS: return "INTS";
    case KILN_ATTR_DTYPE: return "DTYPE";
    case KILN_ATTR_BOOL: return "BOOL";
    default: return "invalid";
  }
}

int toInt(int64_t v, const std::string& what) {
  if (v < INT_MIN || v > INT_MAX) fail(KILN_ERROR_INVALID_ARGUMENT, what + " = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

/// The inputs of one call, checked by position and role.
class InputReader {
 public:
  InputReader(const char* op, std::span<const Value> v) : op_(op), v_(v) {}

  void expectCount(size_t min, size_t max) const {
    if (v_.size() >= min && v_.size() <= max) return;
    std::string want = min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max);
    fail(KILN_ERROR_INVALID_ARGUMENT,
         std::string(op_) + " takes " + want + " input(s), got " + std::to_string(v_.size()));
  }
  const Tensor& tensor(size_t i, const char* role) const {
    if (v_[i].kind != KILN_VALUE_TENSOR)
      fail(KILN_ERROR_INVALID_ARGUMENT, std::string(op_) + ": input " + std::to_string(i) + " (" + role +
                                            ") must be a tensor, got a " + valueKindName(v_[i].kind) + " value");
    return v_[i].tensor;
  }
  Operand operand(size_t i, const char* role) const {
    const Value& v = v_[i];
    switch (v.kind) {
      case KILN_VALUE_TENSOR: return Operand(v.tensor);
      case KILN_VALUE_FLOAT: return Operand(v.f);
      case KILN_VALUE_INT: return Operand(v.i);
      case KILN_VALUE_BOOL: return Operand(v.i != 0);
      default:
        fail(KILN_ERROR_INVALID_ARGUMENT,
             std::string(op_) + ": input " + std::to_string(i) + " (" + role + ") must be a tensor or a number");
    }
  }
  Tensor optionalTensor(size_t i, const char* role) const {
    if (i >= v_.size() || v_[i].kind == KILN_VALUE_NONE) return Tensor();
    return tensor(i, role);
  }
  size_t size() const { return v_.size(); }

 private:
  const char* op_;
  std::span<const Value> v_;
};

/// The attributes of one call: each read marks one as used; finish() rejects
/// the rest, naming what the op accepts.
class AttrReader {
 public:
  AttrReader(const char* op, std::span<const Attr> a) : op_(op), a_(a), used_(a.size(), false) {}

  int64_t integer(const char* name, std::optional<int64_t> fallback) {
    const Attr* a = find(name, fallback.has_value());
    if (!a) return *fallback;
    expectKind(*a, {KILN_ATTR_INT, KILN_ATTR_BOOL});
    return a->i;
  }
  int intAttr(const char* name, std::optional<int64_t> fallback) {
    return toInt(integer(name, fallback), std::string(op_) + ": attribute '" + name + "'");
  }
  double number(const char* name, std::optional<double> fallback) {
    const Attr* a = find(name, fallback.has_value());
    if (!a) return *fallback;
    expectKind(*a, {KILN_ATTR_FLOAT, KILN_ATTR_INT, KILN_ATTR_BOOL});
    return a->kind == KILN_ATTR_FLOAT ? a->f : static_cast<double>(a->i);
  }
  bool flag(const char* name, bool fallback) {
    const Attr* a = find(name, true);
    if (!a) return fallback;
    expectKind(*a, {KILN_ATTR_BOOL, KILN_ATTR_INT});
    return a->i != 0;
  }
  DType dtype(const char* name, std::optional<DType> fallback) {
    const Attr* a = find(name, fallback.has_value());
    if (!a) return *fallback;
    expectKind(*a, {KILN_ATTR_DTYPE});
    return dtypeOf(a->i, (std::string(op_) + ": attribute '" + name + "'").c_str());
  }
  std::vector<int64_t> ints(const char* name, bool optional) {
    const Attr* a = find(name, optional);
    if (!a) return {};
    expectKind(*a, {KILN_ATTR_INTS, KILN_ATTR_INT});
    if (a->kind == KILN_ATTR_INT) return {a->i};
    return a->ints;
  }
  std::vector<int> axes(const char* name) {
    std::vector<int> out;
    for (int64_t v : ints(name, true)) out.push_back(toInt(v, std::string(op_) + ": attribute '" + name + "'"));
    return out;
  }
  Shape shape(const char* name, bool allowInferred) {
    std::vector<int64_t> dims = ints(name, false);
    return shapeOf(dims.data(), static_cast<int64_t>(dims.size()),
                   (std::string(op_) + ": attribute '" + name + "'").c_str(), allowInferred);
  }
  Scalar scalar(const char* name) {
    const Attr* a = find(name, false);
    expectKind(*a, {KILN_ATTR_FLOAT, KILN_ATTR_INT, KILN_ATTR_BOOL});
    if (a->kind == KILN_ATTR_FLOAT) return Scalar(a->f);
    if (a->kind == KILN_ATTR_BOOL) return Scalar(a->i != 0);
    return Scalar(a->i);
  }

  void finish() const {
    for (size_t i = 0; i < a_.size(); ++i) {
      if (used_[i]) continue;
      fail(KILN_ERROR_INVALID_ARGUMENT, std::string(op_) + ": unknown attribute '" + a_[i].name + "' (" + op_ +
                                            " takes " + (accepted_.empty() ? "no attributes" : accepted_) + ")");
    }
  }

 private:
  const Attr* find(const char* name, bool optional) {
    if (!accepted_.empty()) accepted_ += ", ";
    accepted_ += name;
    for (size_t i = 0; i < a_.size(); ++i) {
      if (a_[i].name == name) {
        used_[i] = true;
        return &a_[i];
      }
    }
    if (!optional)
      fail(KILN_ERROR_INVALID_ARGUMENT, std::string(op_) + ": missing required attribute '" + name + "'");
    return nullptr;
  }
  void expectKind(const Attr& a, std::initializer_list<int32_t> kinds) const {
    for (int32_t k : kinds)
      if (a.kind == k) return;
    std::string want;
    for (int32_t k : kinds) want += std::string(want.empty() ? "" : " or ") + attrKindName(k);
    fail(KILN_ERROR_INVALID_ARGUMENT, std::string(op_) + ": attribute '" + a.name + "' must be " + want + ", got " +
                                          attrKindName(a.kind));
  }

  const char* op_;
  std::span<const Attr> a_;
  std::vector<bool> used_;
  std::string accepted_;
};

AutoPad autoPadOf(const char* op, int64_t v) {
  switch (v) {
    case 0: return AutoPad::NotSet;
    case 1: return AutoPad::Valid;
    case 2: return AutoPad::SameUpper;
    case 3: return AutoPad::SameLower;
    default:
      fail(KILN_ERROR_INVALID_ARGUMENT, std::string(op) + ": auto_pad = " + std::to_string(v) +
                                            " (expected 0 NOTSET, 1 VALID, 2 SAME_UPPER or 3 SAME_LOWER)");
  }
}

/// ints(name) or `fallback` when the attribute is absent.
std::vector<int64_t> intsOr(AttrReader& at, const char* name, std::vector<int64_t> fallback) {
  std::vector<int64_t> v = at.ints(name, true);
  return v.empty() ? fallback : v;
}

Pool2dOptions poolOptions(const char* op, AttrReader& at, bool average) {
  Pool2dOptions o;
  o.kernel = at.ints("kernel_shape", false);
  o.stride = intsOr(at, "strides", {1, 1});
  o.padding = intsOr(at, "pads", {0, 0});
  o.dilation = intsOr(at, "dilations", {1, 1});
  o.ceil_mode = at.flag("ceil_mode", false);
  if (average) o.count_include_pad = at.flag("count_include_pad", false);
  o.auto_pad = autoPadOf(op, at.integer("auto_pad", 0));
  o.layout = at.flag("channels_last", false) ? Layout::NHWC : Layout::NCHW;
  return o;
}

ReduceFn reduceOf(kiln_op op) {
  switch (op) {
    case KILN_OP_SUM: return &kiln::sum;
    case KILN_OP_MEAN: return &kiln::mean;
    case KILN_OP_MAX: return &kiln::max;
    case KILN_OP_MIN: return &kiln::min;
    case KILN_OP_PROD: return &kiln::prod;
    default: return nullptr;
  }
}

}  // namespace

const char* opName(int64_t op) {
  for (const OpEntry& e : kOps)
    if (e.op != NoCAbi && e.op == op) return e.name;
  return nullptr;
}

bool opFromName(const char* name, kiln_op* out) {
  for (const OpEntry& e : kOps) {
    if (e.op != NoCAbi && std::strcmp(e.name, name) == 0) {
      *out = e.op;
      return true;
    }
  }
  return false;
}

std::vector<Value> readValues(const kiln_value* inputs, int32_t count) {
  if (count < 0) fail(KILN_ERROR_INVALID_ARGUMENT, "num_inputs is negative (" + std::to_string(count) + ")");
  if (count > 0 && !inputs) fail(KILN_ERROR_INVALID_ARGUMENT, "inputs is NULL but num_inputs is " + std::to_string(count));
  std::vector<Value> out(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    const kiln_value& in = inputs[i];
    Value& v = out[i];
    v.kind = in.kind;
    switch (in.kind) {
      case KILN_VALUE_NONE: break;
      case KILN_VALUE_TENSOR: v.tensor = tensorOf(in.tensor, ("input " + std::to_string(i)).c_str()); break;
      case KILN_VALUE_FLOAT: v.f = in.f; break;
      case KILN_VALUE_INT: v.i = in.i; break;
      case KILN_VALUE_BOOL: v.i = in.i != 0; break;
      default:
        fail(KILN_ERROR_INVALID_ARGUMENT,
             "input " + std::to_string(i) + " has an invalid kind " + std::to_string(in.kind) + " (see kiln_value_kind)");
    }
  }
  return out;
}

std::vector<Attr> readAttrs(const kiln_attr* attrs, int32_t count) {
  if (count < 0) fail(KILN_ERROR_INVALID_ARGUMENT, "num_attrs is negative (" + std::to_string(count) + ")");
  if (count > 0 && !attrs) fail(KILN_ERROR_INVALID_ARGUMENT, "attrs is NULL but num_attrs is " + std::to_string(count));
  constexpr int32_t kMaxInts = 64;
  std::vector<Attr> out(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    const kiln_attr& in = attrs[i];
    Attr& a = out[i];
    const std::string where = "attribute " + std::to_string(i);
    if (!in.name) fail(KILN_ERROR_INVALID_ARGUMENT, where + " has a NULL name");
    a.name = in.name;
    for (int32_t j = 0; j < i; ++j)
      if (out[j].name == a.name) fail(KILN_ERROR_INVALID_ARGUMENT, "attribute '" + a.name + "' is given twice");
    a.kind = in.kind;
    switch (in.kind) {
      case KILN_ATTR_INT:
      case KILN_ATTR_DTYPE: a.i = in.i; break;
      case KILN_ATTR_BOOL: a.i = in.i != 0; break;
      case KILN_ATTR_FLOAT: a.f = in.f; break;
      case KILN_ATTR_INTS:
        if (in.count < 0 || in.count > kMaxInts)
          fail(KILN_ERROR_INVALID_ARGUMENT, "attribute '" + a.name + "' has count " + std::to_string(in.count) +
                                                " (expected 0 to " + std::to_string(kMaxInts) + ")");
        if (in.count > 0 && !in.ints) fail(KILN_ERROR_INVALID_ARGUMENT, "attribute '" + a.name + "' has NULL ints");
        a.ints.assign(in.ints, in.ints + in.count);
        break;
      default:
        fail(KILN_ERROR_INVALID_ARGUMENT, "attribute '" + a.name + "' has an invalid kind " + std::to_string(in.kind) +
                                              " (see kiln_attr_kind)");
    }
  }
  return out;
}

Tensor dispatch(kiln_op op, std::span<const Value> values, std::span<const Attr> attrs) {
  const OpEntry* entry = entryOf(op);
  if (!entry) fail(KILN_ERROR_INVALID_ARGUMENT, "unknown op " + std::to_string(static_cast<int64_t>(op)) + " (see kiln_op)");
  const char* name = entry->name;
  InputReader in(name, values);
  AttrReader at(name, attrs);

  if (UnaryFn f = entry->unary) {
    in.expectCount(1, 1);
    at.finish();
    return f(in.tensor(0, "x"));
  }
  if (BinaryFn f = entry->binary) {
    in.expectCount(2, 2);
    at.finish();
    return f(in.operand(0, "a"), in.operand(1, "b"));
  }
  if (ReduceFn f = reduceOf(op)) {
    in.expectCount(1, 1);
    std::vector<int> axes = at.axes("axes");
    bool keepdim = at.flag("keepdim", false);
    at.finish();
    return f(in.tensor(0, "x"), axes, keepdim);
  }

  switch (op) {
    case KILN_OP_ZEROS:
    case KILN_OP_ONES: {
      in.expectCount(0, 0);
      Shape s = at.shape("shape", false);
      DType t = at.dtype("dtype", DType::f32);
      at.finish();
      return op == KILN_OP_ZEROS ? zeros(s, t) : ones(s, t);
    }
    case KILN_OP_FULL: {
      in.expectCount(0, 0);
      Shape s = at.shape("shape", false);
      Scalar v = at.scalar("value");
      DType t = at.dtype("dtype", DType::f32);
      at.finish();
      return full(s, v, t);
    }
    case KILN_OP_ZEROS_LIKE:
    case KILN_OP_ONES_LIKE:
      in.expectCount(1, 1);
      at.finish();
      return op == KILN_OP_ZEROS_LIKE ? zeros_like(in.tensor(0, "x")) : ones_like(in.tensor(0, "x"));
    case KILN_OP_SCALAR_TENSOR: {
      in.expectCount(0, 0);
      Scalar v = at.scalar("value");
      DType t = at.dtype("dtype", DType::f32);
      at.finish();
      return scalar_tensor(v, t);
    }
    case KILN_OP_ARANGE: {
      in.expectCount(0, 0);
      double start = at.number("start", 0.0);
      double end = at.number("end", std::nullopt);
      double step = at.number("step", 1.0);
      DType t = at.dtype("dtype", DType::f32);
      at.finish();
      return arange(start, end, step, t);
    }
    case KILN_OP_RAND:
    case KILN_OP_RANDN: {
      in.expectCount(0, 0);
      Shape s = at.shape("shape", false);
      auto seed = static_cast<uint64_t>(at.integer("seed", 0));
      DType t = at.dtype("dtype", DType::f32);
      if (op == KILN_OP_RAND) {
        double low = at.number("low", 0.0), high = at.number("high", 1.0);
        at.finish();
        return rand(s, seed, t, low, high);
      }
      double mu = at.number("mean", 0.0), sd = at.number("stddev", 1.0);
      at.finish();
      return randn(s, seed, t, mu, sd);
    }
    case KILN_OP_GELU: {
      in.expectCount(1, 1);
      bool exact = at.flag("exact", false);
      at.finish();
      return exact ? gelu_exact(in.tensor(0, "x")) : gelu(in.tensor(0, "x"));
    }
    case KILN_OP_LEAKY_RELU: {
      in.expectCount(1, 1);
      double slope = at.number("negative_slope", 0.01);
      at.finish();
      return leaky_relu(in.tensor(0, "x"), slope);
    }
    case KILN_OP_WHERE:
      in.expectCount(3, 3);
      at.finish();
      return where(in.tensor(0, "cond"), in.operand(1, "a"), in.operand(2, "b"));
    case KILN_OP_CLAMP:
      in.expectCount(3, 3);
      at.finish();
      return clamp(in.tensor(0, "x"), in.operand(1, "low"), in.operand(2, "high"));
    case KILN_OP_CAST: {
      in.expectCount(1, 1);
      DType t = at.dtype("dtype", std::nullopt);
      at.finish();
      return cast(in.tensor(0, "x"), t);
    }
    case KILN_OP_ARGMAX:
    case KILN_OP_ARGMIN: {
      in.expectCount(1, 1);
      int axis = at.intAttr("axis", std::nullopt);
      bool keepdim = at.flag("keepdim", false);
      bool last = at.flag("select_last_index", false);
      at.finish();
      return op == KILN_OP_ARGMAX ? argmax(in.tensor(0, "x"), axis, keepdim, last)
                                  : argmin(in.tensor(0, "x"), axis, keepdim, last);
    }
    case KILN_OP_MATMUL:
      in.expectCount(2, 2);
      at.finish();
      return matmul(in.tensor(0, "a"), in.tensor(1, "b"));
    case KILN_OP_RESHAPE: {
      in.expectCount(1, 1);
      Shape s = at.shape("shape", true);
      at.finish();
      return reshape(in.tensor(0, "x"), s);
    }
    case KILN_OP_TRANSPOSE: {
      in.expectCount(1, 1);
      int a = at.intAttr("axis0", -2), b = at.intAttr("axis1", -1);
      at.finish();
      return transpose(in.tensor(0, "x"), a, b);
    }
    case KILN_OP_PERMUTE: {
      in.expectCount(1, 1);
      std::vector<int64_t> p = at.ints("perm", false);
      at.finish();
      std::vector<int> perm;
      for (int64_t v : p) perm.push_back(toInt(v, "permute: attribute 'perm'"));
      return permute(in.tensor(0, "x"), perm);
    }
    case KILN_OP_BROADCAST_TO: {
      in.expectCount(1, 1);
      Shape s = at.shape("shape", false);
      at.finish();
      return broadcast_to(in.tensor(0, "x"), s);
    }
    case KILN_OP_SQUEEZE: {
      in.expectCount(1, 1);
      std::vector<int> axes = at.axes("axes");
      at.finish();
      return squeeze(in.tensor(0, "x"), axes);
    }
    case KILN_OP_UNSQUEEZE: {
      in.expectCount(1, 1);
      int axis = at.intAttr("axis", std::nullopt);
      at.finish();
      return unsqueeze(in.tensor(0, "x"), axis);
    }
    case KILN_OP_SLICE: {
      in.expectCount(1, 1);
      int axis = at.intAttr("axis", std::nullopt);
      const int64_t step = at.integer("step", 1);
      // Python's defaults: a negative step runs from the end to the start.
      int64_t start = at.integer("start", step < 0 ? INT64_MAX : 0);
      int64_t stop = at.integer("stop", step < 0 ? INT64_MIN : INT64_MAX);
      at.finish();
      return slice(in.tensor(0, "x"), axis, start, stop, step);
    }
    case KILN_OP_CONCAT: {
      in.expectCount(1, 1 << 16);
      int axis = at.intAttr("axis", 0);
      at.finish();
      std::vector<Tensor> xs;
      for (size_t i = 0; i < in.size(); ++i) xs.push_back(in.tensor(i, "x"));
      return concat(xs, axis);
    }
    case KILN_OP_INDEX_SELECT:
    case KILN_OP_GATHER: {
      in.expectCount(2, 2);
      int axis = at.intAttr("axis", std::nullopt);
      at.finish();
      return op == KILN_OP_GATHER ? gather(in.tensor(0, "x"), axis, in.tensor(1, "index"))
                                  : index_select(in.tensor(0, "x"), axis, in.tensor(1, "index"));
    }
    case KILN_OP_INDEX_ADD: {
      in.expectCount(3, 3);
      int axis = at.intAttr("axis", std::nullopt);
      at.finish();
      return index_add(in.tensor(0, "x"), axis, in.tensor(1, "index"), in.tensor(2, "source"));
    }
    case KILN_OP_CUMSUM: {
      in.expectCount(1, 1);
      int axis = at.intAttr("axis", std::nullopt);
      at.finish();
      return cumsum(in.tensor(0, "x"), axis);
    }
    case KILN_OP_SCATTER_ADD: {
      in.expectCount(3, 3);
      int axis = at.intAttr("axis", std::nullopt);
      at.finish();
      return scatter_add(in.tensor(0, "x"), axis, in.tensor(1, "index"), in.tensor(2, "source"));
    }
    case KILN_OP_ONE_HOT: {
      in.expectCount(1, 1);
      int64_t n = at.integer("num_classes", std::nullopt);
      DType t = at.dtype("dtype", DType::f32);
      at.finish();
      return one_hot(in.tensor(0, "index"), n, t);
    }
    case KILN_OP_CONTIGUOUS:
      in.expectCount(1, 1);
      at.finish();
      return in.tensor(0, "x").contiguous();
    case KILN_OP_SOFTMAX:
    case KILN_OP_LOG_SOFTMAX: {
      in.expectCount(1, 1);
      int axis = at.intAttr("axis", -1);
      at.finish();
      return op == KILN_OP_SOFTMAX ? softmax(in.tensor(0, "x"), axis) : log_softmax(in.tensor(0, "x"), axis);
    }
    case KILN_OP_LAYER_NORM: {
      in.expectCount(1, 3);
      double eps = at.number("eps", 1e-5);
      at.finish();
      return layer_norm(in.tensor(0, "x"), in.optionalTensor(1, "weight"), in.optionalTensor(2, "bias"), eps);
    }
    case KILN_OP_CONV2D: {
      in.expectCount(2, 3);
      Conv2dOptions o;
      o.stride = intsOr(at, "strides", {1, 1});
      o.padding = intsOr(at, "pads", {0, 0});
      o.dilation = intsOr(at, "dilations", {1, 1});
      o.groups = at.integer("group", 1);
      o.auto_pad = autoPadOf("conv2d", at.integer("auto_pad", 0));
      o.layout = at.flag("channels_last", false) ? Layout::NHWC : Layout::NCHW;
      at.finish();
      return conv2d(in.tensor(0, "x"), in.tensor(1, "weight"), in.optionalTensor(2, "bias"), o);
    }
    case KILN_OP_MAX_POOL2D:
    case KILN_OP_AVG_POOL2D: {
      in.expectCount(1, 1);
      const bool average = op == KILN_OP_AVG_POOL2D;
      Pool2dOptions o = poolOptions(average ? "avg_pool2d" : "max_pool2d", at, average);
      at.finish();
      return average ? avg_pool2d(in.tensor(0, "x"), o) : max_pool2d(in.tensor(0, "x"), o);
    }
    case KILN_OP_ADAPTIVE_AVG_POOL2D: {
      in.expectCount(1, 1);
      std::vector<int64_t> size = at.ints("output_size", false);
      const Layout layout = at.flag("channels_last", false) ? Layout::NHWC : Layout::NCHW;
      at.finish();
      if (size.size() != 1 && size.size() != 2)
        fail(KILN_ERROR_INVALID_ARGUMENT, "adaptive_avg_pool2d: output_size needs 1 or 2 values, got " +
                                              std::to_string(size.size()));
      return adaptive_avg_pool2d(in.tensor(0, "x"), size[0], size.back(), layout);
    }
    case KILN_OP_BATCH_NORM: {
      in.expectCount(1, 5);
      const bool training = at.flag("training_mode", false);
      const double momentum = at.number("momentum", 0.9), eps = at.number("epsilon", 1e-5);
      const Layout layout = at.flag("channels_last", false) ? Layout::NHWC : Layout::NCHW;
      at.finish();
      return batch_norm(in.tensor(0, "x"), in.optionalTensor(1, "weight"), in.optionalTensor(2, "bias"),
                        in.optionalTensor(3, "running_mean"), in.optionalTensor(4, "running_var"), training, momentum,
                        eps, layout)
          .y;
    }
    case KILN_OP_CROSS_ENTROPY:
      in.expectCount(2, 2);
      at.finish();
      return cross_entropy(in.tensor(0, "logits"), in.tensor(1, "targets"));
    default: break;
  }
  fail(KILN_ERROR_INTERNAL, std::string("op '") + name + "' has no dispatch entry");
}

Tensor invoke(kiln_op op, std::span<const Value> inputs, std::span<const Attr> attrs) {
  Tensor result = dispatch(op, inputs, attrs);
  if (captureActive()) captureOp(op, inputs, attrs, result);
  return result;
}

}  // namespace kiln::capi
