// Kiln's ops. Every op records a node into the calling thread's trace and
// returns at once; bad input throws kiln::Error at the call.
//
// Broadcasting follows NumPy: shapes are aligned at the right, an extent of 1
// stretches, otherwise extents must be equal.
//
// Type promotion follows PyTorch. Operands have three priorities: tensors of
// rank >= 1, rank-0 tensors, and C++ scalars. The result type is the
// promotion (see promote_types in dtype.h) of the highest-priority operands,
// unless a lower-priority operand is of a higher category (bool < integer <
// floating): then a rank-0 tensor contributes its dtype and a C++ scalar the
// default of its category (f32 for floating, i64 for integer). So
// `f16_tensor * 2.5` stays f16, `i32_tensor * 2.5` is f32, `i8_tensor + 300`
// is i8 (wrapping like a cast), `u8_tensor + i64_tensor` is i64.
// Division is true division: integer operands give f32. Comparisons and
// logical ops give bool. Transcendental unary ops (exp, tanh, erf, ...) on
// integer or bool tensors compute in f32. Reductions: sum and prod of bool/integer
// give i64; mean gives a floating type; argmax/argmin give i64.
#pragma once

#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

/// A C++ number used as an operand. Integral and floating values keep their
/// category for type promotion.
class Scalar {
 public:
  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v) {  // NOLINT(google-explicit-constructor): numbers convert implicitly
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = v ? 1 : 0;
      d_ = static_cast<double>(i_);
    } else if constexpr (std::is_floating_point_v<T>) {
      kind_ = Kind::Floating;
      d_ = static_cast<double>(v);
      // Truncated, saturating, NaN as 0: a plain cast of NaN, an infinity or
      // a value beyond int64 is undefined behaviour.
      i_ = d_ != d_ ? 0
           : d_ >= 9223372036854775807.0 ? INT64_MAX
           : d_ <= -9223372036854775808.0 ? INT64_MIN
                                          : static_cast<int64_t>(d_);
    } else {
      kind_ = Kind::Integral;
      i_ = static_cast<int64_t>(v);
      d_ = static_cast<double>(v);
    }
  }
  enum class Kind : uint8_t { Bool, Integral, Floating };
  Kind kind() const { return kind_; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }

 private:
  Kind kind_ = Kind::Floating;
  double d_ = 0;
  int64_t i_ = 0;
};

/// A tensor or a C++ number: what binary ops accept on either side.
class Operand {
 public:
  Operand(const Tensor& t) : tensor_(t), isTensor_(true), scalar_(0) {}  // NOLINT
  template <class T>
    requires std::is_arithmetic_v<T>
  Operand(T v) : scalar_(v) {}  // NOLINT
  bool is_tensor() const { return isTensor_; }
  const Tensor& tensor() const { return tensor_; }
  const Scalar& scalar() const { return scalar_; }

 private:
  Tensor tensor_;
  bool isTensor_ = false;
  Scalar scalar_;
};

// ---- creation --------------------------------------------------------------
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = default_device());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = default_device());
Tensor full(const Shape& shape, Scalar value, DType dtype = DType::f32, Device device = default_device());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
/// Rank-0 tensor holding one value.
Tensor scalar_tensor(Scalar value, DType dtype = DType::f32, Device device = default_device());
/// [start, start+step, ...) while < end (> end for negative step), like NumPy.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::f32, Device device = default_device());
Tensor arange(int64_t n, DType dtype = DType::i64, Device device = default_device());
/// Copies host data into a new materialized tensor. shape.numel() must equal
/// values.size(). bool values are stored as 0/1 bytes.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = default_device());
/// Wraps caller-owned memory without copying (dense row-major unless strides
/// are given, in elements). `deleter(data)` runs once, when the last tensor
/// or trace using the memory is gone. The memory must stay unchanged.
Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device,
                 std::function<void(void*)> deleter, std::vector<int64_t> strides = {});
/// Uniform [low, high) and standard normal (scaled by stddev, shifted by mean)
/// random values from a counter-based generator: element i depends only on
/// (seed, i), so every tier and thread count gives the same bits.
Tensor rand(const Shape& shape, uint64_t seed, DType dtype = DType::f32, double low = 0, double high = 1,
            Device device = default_device());
Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::f32, double mean = 0, double stddev = 1,
             Device device = default_device());

// ---- elementwise -----------------------------------------------------------
// One function per Unary, Binary and Compare row of the op table
// (kiln/op_table.def: its public column names the function, its summary
// says what it computes, its types column which dtypes it takes):
//   unary:      Tensor f(const Tensor& x), e.g. exp, erf, floor. Float ops
//               compute integer and bool inputs in f32; floor, ceil and round
//               (half to even, like NumPy) keep integers as they are;
//               numeric ops refuse bool.
//   binary:     Tensor f(const Operand& a, const Operand& b), e.g. add, fmod
//               (C's: a's sign), remainder (Python's %: b's sign), maximum
//               (NaN propagates); operands broadcast and promote.
//   comparison: Tensor f(const Operand& a, const Operand& b), e.g. eq, lt;
//               a bool result.
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) \
  KILN_DECLARE_##Category(public_name)
#define KILN_DECLARE_Unary(f) Tensor f(const Tensor& x);
#define KILN_DECLARE_Binary(f) Tensor f(const Operand& a, const Operand& b);
#define KILN_DECLARE_Compare(f) Tensor f(const Operand& a, const Operand& b);
#define KILN_DECLARE_Leaf(f)
#define KILN_DECLARE_Select(f)
#define KILN_DECLARE_Cast(f)
#define KILN_DECLARE_Reduce(f)
#define KILN_DECLARE_ArgReduce(f)
#define KILN_DECLARE_Scan(f)
#define KILN_DECLARE_Matmul(f)
#define KILN_DECLARE_Conv(f)
#define KILN_DECLARE_Shape(f)
#define KILN_DECLARE_Index(f)
#define KILN_DECLARE_Collective(f)
#include "kiln/op_table.def"
#undef KILN_DECLARE_Unary
#undef KILN_DECLARE_Binary
#undef KILN_DECLARE_Compare
#undef KILN_DECLARE_Leaf
#undef KILN_DECLARE_Select
#undef KILN_DECLARE_Cast
#undef KILN_DECLARE_Reduce
#undef KILN_DECLARE_ArgReduce
#undef KILN_DECLARE_Scan
#undef KILN_DECLARE_Matmul
#undef KILN_DECLARE_Conv
#undef KILN_DECLARE_Shape
#undef KILN_DECLARE_Index
#undef KILN_DECLARE_Collective

// Composites: formulas over the primitives above.
/// tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x);
/// Exact GELU through erf: 0.5 x (1 + erf(x / sqrt(2))) (PyTorch's
/// gelu(approximate='none')).
Tensor gelu_exact(const Tensor& x);
/// x where x > 0, negative_slope * x elsewhere (NaN stays NaN); integer and
/// bool inputs compute in f32.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// bool: true where x is NaN (never for integer and bool tensors).
Tensor isnan(const Tensor& x);
/// bool: true where x is +inf or -inf (never for integer and bool tensors).
Tensor isinf(const Tensor& x);

/// cond is cast to bool; a and b are promoted together.
Tensor where(const Tensor& cond, const Operand& a, const Operand& b);
/// min(max(x, low), high); NaN stays NaN. The gradient reaches x wherever
/// low <= x <= high, bounds included (as PyTorch's clamp).
Tensor clamp(const Tensor& x, const Operand& low, const Operand& high);
Tensor cast(const Tensor& x, DType dtype);

// ---- reductions (empty axes = all axes; negative axes count from the end) ---
Tensor sum(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false);
/// PyTorch's cumsum: out[.., i, ..] = x[.., 0, ..] + ... + x[.., i, ..]
/// along `axis`, added in order: f32 and f64 in their own type (PyTorch's
/// CPU kernel keeps an f32 running sum in f64), f16 and bf16 in f32 with
/// each result rounded (as PyTorch), integers and bool in i64 (as sum()).
/// The same bits on every tier and device. Gradient: the reversed running
/// sums of g.
Tensor cumsum(const Tensor& x, int axis);
/// Index of the first maximum along `axis` (i64); of the last one with
/// select_last_index (ONNX's attribute). A NaN is the maximum (and minimum).
Tensor argmax(const Tensor& x, int axis, bool keepdim = false, bool select_last_index = false);
Tensor argmin(const Tensor& x, int axis, bool keepdim = false, bool select_last_index = false);

// ---- linear algebra -----------------------------------------------------------
/// [..., M, K] @ [..., K, N] -> [..., M, N], batch dims broadcast. A 1-D
/// operand is treated as a row (left) or column (right) vector and that axis
/// is dropped from the result, as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- shape ------------------------------------------------------------------
/// One extent may be -1 (inferred). A view when the input is contiguous.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int a = -2, int b = -1);
Tensor permute(const Tensor& x, const std::vector<int>& perm);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// Drops the given extent-1 axes (all extent-1 axes when empty).
Tensor squeeze(const Tensor& x, const std::vector<int>& axes = {});
Tensor unsqueeze(const Tensor& x, int axis);
/// Elements start, start+step, ... < stop along `axis` (step > 0), or
/// start, start+step, ... > stop (step < 0, in reverse order: x[start:stop:step]
/// in Python). start and stop are clamped to the extent like Python slices;
/// negative ones count from the end. With step < 0, stop = INT64_MIN runs to
/// the first element (Python's omitted stop): slice(x, 0, -1, INT64_MIN, -1)
/// reverses axis 0. step 0 is an error.
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t stop, int64_t step = 1);
/// Reverses the elements along each of `axes`.
Tensor flip(const Tensor& x, const std::vector<int>& axes);
Tensor concat(const std::vector<Tensor>& xs, int axis);
/// out = x with `axis` replaced by the elements at `index` (an integer tensor
/// of any shape): out.shape = x.shape[:axis] + index.shape + x.shape[axis+1:].
Tensor index_select(const Tensor& x, int axis, const Tensor& index);
/// PyTorch's gather / NumPy's take_along_axis: index has x's rank and
/// out[i..., j, k...] = x[i..., index[i..., j, k...], k...] along `axis`.
Tensor gather(const Tensor& x, int axis, const Tensor& index);
/// PyTorch's index_add: x with source's slices added along `axis` at the
/// rows `index` names: out[.., index[i], ..] += source[.., i, ..], for i in
/// order (a row named twice gets both, each addition rounded in x's dtype;
/// the same bits on every tier and device). index is a 1-D integer tensor of
/// values in [0, x.shape[axis]); source has x's shape but index.numel() along
/// `axis`, and x's dtype. Gradients: out's to x, its rows at index to source
/// (index_select). It is index_select's gradient: its cost follows the
/// selected rows, not the table (an embedding of a 50k vocabulary).
Tensor index_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source);
/// PyTorch's scatter_add, gather's reverse: x with each element of source
/// added at the position its index names along `axis`:
/// out[i.., index[i.., j, k..], k..] += source[i.., j, k..], in row-major
/// order of index (a position named twice gets both, each addition rounded
/// in x's dtype; the same bits on every tier and device). index has x's
/// rank, extents at most x's off the axis and values in [0, x.shape[axis])
/// (ONNX ScatterElements' negative indices are refused); source has
/// index's shape and x's dtype. Gradients: out's to x, gather(g, axis,
/// index) to source. On the CPU its cost follows the index (it is gather's
/// gradient when a row gathers many elements); on GPUs tier 0 adds them in
/// order in one thread of one launch (f16/bf16: launches per element), and
/// a compiled kernel reads every index for each element of x.
Tensor scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source);
/// [..] integer class ids -> [.., num_classes] of dtype.
Tensor one_hot(const Tensor& index, int64_t num_classes, DType dtype = DType::f32);

// ---- nn (recorded as their primitives) ----------------------------------------
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
/// Normalises over the trailing axes that `weight` covers (or the last axis
/// when weight is undefined): (x - mean) / sqrt(var + eps) * weight + bias.
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
/// Mean cross entropy of logits [N, C] against integer targets [N].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

// ---- convolution and pooling (ONNX attribute semantics) -----------------------
/// Layout of the input and result of conv2d and the pools: NCHW (channels
/// first) or NHWC (channels last). conv2d's weight is [C_out, C/groups, kH,
/// kW] in both.
enum class Layout : uint8_t { NCHW, NHWC };
/// ONNX auto_pad. NotSet uses the explicit padding; Valid pads nothing;
/// SameUpper / SameLower pad so that each output extent is
/// ceil(input extent / stride), an odd padding's extra element at the end
/// (SameUpper) or at the start (SameLower).
enum class AutoPad : uint8_t { NotSet, Valid, SameUpper, SameLower };

/// Spatial attributes of conv2d. Each list holds {h, w} or one value for
/// both; padding is {h, w} on both sides or {top, left, bottom, right} (ONNX's
/// pads order: all begins, then all ends).
struct Conv2dOptions {
  std::vector<int64_t> stride = {1, 1};
  std::vector<int64_t> padding = {0, 0};
  std::vector<int64_t> dilation = {1, 1};
  int64_t groups = 1;
  AutoPad auto_pad = AutoPad::NotSet;
  Layout layout = Layout::NCHW;
};
/// 2-D convolution (cross-correlation, as ONNX Conv and torch conv2d):
/// x [N, C, H, W] (NHWC: [N, H, W, C]), weight [C_out, C/groups, kH, kW],
/// optional bias [C_out]. Floating operands (promoted to one dtype); the
/// result has C_out channels and extents (H + pads - ((kH-1)*dilation+1)) /
/// stride + 1 (floor).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Conv2dOptions& options = {});

/// Attributes of max_pool2d and avg_pool2d (ONNX MaxPool / AveragePool):
/// `kernel` is required; stride defaults to 1 as in ONNX (torch defaults it
/// to the kernel); with ceil_mode the output extents round up, but a window
/// that would start in the end padding is dropped. avg_pool2d divides by the
/// window's elements inside the input, or with count_include_pad by those
/// inside the padded input.
struct Pool2dOptions {
  std::vector<int64_t> kernel;
  std::vector<int64_t> stride = {1, 1};
  std::vector<int64_t> padding = {0, 0};
  std::vector<int64_t> dilation = {1, 1};
  bool ceil_mode = false;
  bool count_include_pad = false;
  AutoPad auto_pad = AutoPad::NotSet;
  Layout layout = Layout::NCHW;
};
/// Maximum over each window; padding never wins (it acts as -inf) and NaN
/// propagates. Recorded as strided slices and selects (the compiler fuses
/// them into one loop); on a tie the window's first maximum (row-major)
/// takes the whole gradient, as in PyTorch.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
/// Mean over each window (see Pool2dOptions for the divisor).
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options);
/// Mean over adaptive windows: output cell (i, j) averages input rows
/// floor(i*H/out_h) to ceil((i+1)*H/out_h) and the same for columns (torch's
/// AdaptiveAvgPool2d; ONNX GlobalAveragePool for 1x1).
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w, Layout layout = Layout::NCHW);

/// batch_norm's results: y, and in training mode the updated running
/// statistics (undefined when none were given).
struct BatchNormResult {
  Tensor y, running_mean, running_var;
};
/// ONNX BatchNormalization over the channel axis (1 for NCHW, last for
/// NHWC) of a rank >= 2 input: y = (x - mean) / sqrt(var + eps) * weight +
/// bias, weight and bias [C] (undefined: 1 and 0). Inference (training =
/// false) uses running_mean and running_var; training uses the batch's mean
/// and biased variance and returns running = running * momentum + batch *
/// (1 - momentum) (ONNX's momentum: 0.9 keeps 90% of the old value; torch's
/// momentum 0.1 is ONNX's 0.9).
BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum = 0.9, double eps = 1e-5,
                           Layout layout = Layout::NCHW);

// ---- operators -------------------------------------------------------------
inline Tensor operator+(const Tensor& a, const Operand& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Operand& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Operand& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Operand& b) { return div(a, b); }
inline Tensor operator==(const Tensor& a, const Operand& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Operand& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Operand& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Operand& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Operand& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Operand& b) { return ge(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
template <class S>
  requires std::is_arithmetic_v<S>
Tensor operator+(S a, const Tensor& b) { return add(a, b); }
template <class S>
  requires std::is_arithmetic_v<S>
Tensor operator-(S a, const Tensor& b) { return sub(a, b); }
template <class S>
  requires std::is_arithmetic_v<S>
Tensor operator*(S a, const Tensor& b) { return mul(a, b); }
template <class S>
  requires std::is_arithmetic_v<S>
Tensor operator/(S a, const Tensor& b) { return div(a, b); }

// ---- from_vector ---------------------------------------------------------------
namespace detail {
Tensor fromHost(const void* data, std::size_t count, DType dtype, const Shape& shape, Device device);
}  // namespace detail

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return detail::fromHost(bytes.data(), bytes.size(), DType::boolean, shape, device);
  } else {
    return detail::fromHost(values.data(), values.size(), dtype_of<T>(), shape, device);
  }
}

}  // namespace kiln
