// kiln::Tensor: a value-semantic handle to a lazily computed n-d array.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln {

namespace detail {
class TensorImpl;
}  // namespace detail

/// A tensor is either materialized (it owns or views a buffer) or pending (it
/// names a value in the calling thread's trace that has not run yet). Ops on
/// tensors record and return at once; reading data (item, to_vector, data)
/// flushes the trace that computes it.
///
/// Copies are cheap and share the value. Tensors are immutable values: the
/// compound assignments (`a += b`) rebind `a` to a new value and leave other
/// handles to the old value unchanged.
class Tensor {
 public:
  Tensor() = default;  ///< an undefined tensor; most calls on it throw
  Tensor(const Tensor& o);
  Tensor(Tensor&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
  Tensor& operator=(const Tensor& o);
  Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor();

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const;
  const Shape& shape() const;
  int rank() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  /// Extent of one axis; negative axes count from the end.
  int64_t size(int axis) const;
  Device device() const;

  /// False while the tensor is a pending value of a trace.
  bool is_materialized() const;
  /// Element strides of the materialized buffer view (flushes if pending).
  std::vector<int64_t> strides() const;
  /// True when the materialized view is dense row-major (flushes if pending).
  bool is_contiguous() const;

  /// Flushes, then copies the elements out in row-major order, converted to T
  /// (any arithmetic type; bool maps to 0/1).
  template <class T>
  std::vector<T> to_vector() const;
  /// Flushes; the tensor must hold exactly one element.
  template <class T>
  T item() const;
  /// Flushes; pointer to the tensor's elements in dense row-major order:
  /// its buffer where its view is dense, else a dense copy made at the first
  /// call (the view, which strides() describes, stays as it was). Host
  /// tensors only. Valid while this tensor (or a copy) lives.
  const void* data() const;

  /// A copy on another device (same device: returns *this).
  Tensor to(Device d) const;
  /// A dense row-major copy, or *this if it already is.
  Tensor contiguous() const;

  // Method forms of common ops (see ops.h for the rules).
  Tensor reshape(const Shape& s) const;
  Tensor transpose(int a = -2, int b = -1) const;
  Tensor permute(const std::vector<int>& perm) const;
  Tensor sum(const std::vector<int>& axes = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int>& axes = {}, bool keepdim = false) const;
  Tensor cast(DType t) const;

  // Autograd (see autograd.h).
  /// Marks this tensor as a leaf whose gradient backward() fills in (true;
  /// no effect on a result already computed from such leaves), or drops its
  /// gradient and graph (false). Floating tensors only. Shared by all
  /// handles of this value. Returns *this.
  Tensor& requires_grad(bool on = true);
  /// True for leaves marked with requires_grad() and for results computed
  /// from them while grad mode was on.
  bool requires_grad_enabled() const;
  /// The gradient backward() accumulated into this leaf (undefined before
  /// the first backward() and after set_grad({})).
  Tensor grad() const;
  /// Replaces the accumulated gradient (an undefined tensor clears it).
  void set_grad(const Tensor& g);
  /// Computes the gradients of this one-element tensor (or, with
  /// grad_output, of sum(grad_output * this)) and adds them to the .grad()
  /// of every leaf it depends on.
  void backward() const;
  /// create_graph: the accumulated gradients carry a graph of their own
  /// (see grad() in autograd.h).
  void backward(const Tensor& grad_output, bool retain_graph = false, bool create_graph = false) const;
  /// The same value without autograd history.
  Tensor detach() const;

  Tensor& operator+=(const Tensor& o);
  Tensor& operator-=(const Tensor& o);
  Tensor& operator*=(const Tensor& o);
  Tensor& operator/=(const Tensor& o);

  /// Internal: adopts one reference of impl.
  explicit Tensor(detail::TensorImpl* impl) : impl_(impl) {}
  detail::TensorImpl* impl() const { return impl_; }

 private:
  void copyOut(void* dst, DType dstType) const;
  /// Throws kiln::Error when numel() elements of `elementSize` bytes are more
  /// than fits in the address space.
  void checkHostCopy(std::size_t elementSize) const;
  void checkSingleElement() const;
  detail::TensorImpl* impl_ = nullptr;
};

/// The DType that corresponds to a C++ element type.
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::i8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::u8;
  else if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  else static_assert(sizeof(T) == 0, "no kiln::DType for this C++ type");
}

template <class T>
inline constexpr bool kHasDType =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>;

template <class T>
std::vector<T> Tensor::to_vector() const {
  static_assert(std::is_arithmetic_v<T>, "to_vector<T>: T must be arithmetic");
  checkHostCopy(kHasDType<T> ? sizeof(T) : sizeof(int64_t));
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (kHasDType<T>) {
    copyOut(out.data(), dtype_of<T>());
  } else {
    // vector<bool> is not contiguous, and other C++ types have no DType.
    using Wide = std::conditional_t<std::is_floating_point_v<T>, double,
                                    std::conditional_t<std::is_same_v<T, bool>, uint8_t, int64_t>>;
    std::vector<Wide> tmp(out.size());
    copyOut(tmp.data(), std::is_same_v<T, bool> ? DType::boolean : dtype_of<Wide>());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(tmp[i]);
  }
  return out;
}

template <class T>
T Tensor::item() const {
  static_assert(std::is_arithmetic_v<T>, "item<T>: T must be arithmetic");
  checkSingleElement();
  return to_vector<T>()[0];
}

}  // namespace kiln
