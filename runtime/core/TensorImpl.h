// TensorImpl: the shared state behind kiln::Tensor handles.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"
#include "runtime/core/Storage.h"
#include "runtime/core/TensorSize.h"

namespace kiln::trace {
class Recorder;
}  // namespace kiln::trace

namespace kiln::autograd {
struct GradInfo;
}  // namespace kiln::autograd

namespace kiln::core {

/// A strided view of a storage: what a materialized tensor (and every value
/// inside the interpreter) is. Offset and strides count elements.
struct View {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  int64_t strides[Shape::kMaxRank] = {};

  char* bytes(DType t) const { return static_cast<char*>(storage->data()) + offset * elementBytes(t); }
};

/// Dense row-major strides of a shape.
void contiguousStrides(const Shape& shape, int64_t* strides);
/// Is the view dense row-major (extent-1 axes may have any stride)?
bool isContiguous(const Shape& shape, const int64_t* strides);

}  // namespace kiln::core

namespace kiln::detail {

/// Reference-counted, pooled (recording a node allocates nothing from the
/// heap in steady state). A tensor is pending while `owner` is set: it is
/// value `value` of that recorder's trace. All state changes happen under the
/// owner's mutex; `owner` is published last, so a reader that sees it null
/// sees the materialized view.
class TensorImpl {
 public:
  static TensorImpl* create(DType dtype, const Shape& shape, Device device);

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  /// retain() unless the last handle is already gone (another thread is in
  /// release(), about to delete it): false then, and nothing changed.
  bool tryRetain() {
    for (int n = refs_.load(std::memory_order_relaxed); n > 0;)
      if (refs_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
    return false;
  }
  void release();
  /// Handles (kiln::Tensor) holding this tensor now.
  int refCount() const { return refs_.load(std::memory_order_acquire); }

  DType dtype;
  Shape shape;
  Device device;

  // Materialized state.
  core::View view;
  /// Tensor::data()'s dense row-major copy of a strided view, made at its
  /// first call (under a lock) and then only read by it; the view itself
  /// stays, as other threads may be reading it.
  std::shared_ptr<core::Storage> denseData;
  /// Set when the computation producing this tensor failed; reading throws.
  std::shared_ptr<const std::string> error;

  // Pending state.
  std::atomic<trace::Recorder*> owner{nullptr};
  uint32_t value = 0;
  /// Caches this tensor's parameter slot in the current trace:
  /// (trace epoch << 32) | node index.
  std::atomic<uint64_t> paramTag{0};

  /// Autograd state (runtime/autograd): null unless this tensor is a leaf
  /// that requires grad or was computed from one.
  std::shared_ptr<autograd::GradInfo> autograd;

  static void* operator new(std::size_t size);
  static void operator delete(void* p);

 private:
  TensorImpl(DType d, const Shape& s, Device dev) : dtype(d), shape(s), device(dev) {}
  std::atomic<int> refs_{1};
};

}  // namespace kiln::detail
