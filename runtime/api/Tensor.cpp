// kiln::Tensor: handle management, reads (which flush) and method sugar.
#include <cstddef>
#include <cstring>
#include <mutex>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops.h"
#include "runtime/api/OpSupport.h"
#include "runtime/autograd/GradInfo.h"
#include "runtime/backends/Hal.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/core/TensorSize.h"
#include "runtime/interp/Kernels.h"
#include "runtime/trace/Recorder.h"

namespace kiln {

namespace {
detail::TensorImpl* checked(const detail::TensorImpl* impl, const char* what) {
  if (!impl)
    throw Error(std::string("Tensor::") + what +
                ": the tensor is undefined (default-constructed); assign the result of an op to it first");
  return const_cast<detail::TensorImpl*>(impl);
}
detail::TensorImpl* materialized(const detail::TensorImpl* impl, const char* what) {
  detail::TensorImpl* i = checked(impl, what);
  trace::Recorder::materialize(i);
  return i;
}
std::mutex gDensifyMutex;

/// A dense row-major copy, in new host memory, of the values of `i` (a CPU
/// tensor).
core::View denseHostCopy(const detail::TensorImpl* i, const char* what) {
  core::View dense = interp::allocDense(hal::hostAllocator(), i->dtype, i->shape, what);
  if (i->shape.numel() > 0)
    interp::copyKernel(interp::argOf(i->view, i->dtype, i->shape), static_cast<char*>(dense.storage->data()));
  return dense;
}

/// A copy of `view` (of `shape` elements of `t`) on `to`: the bytes it spans,
/// elements [lo, hi] relative to its element 0 (core::stridedExtent), with
/// its strides kept (a non-contiguous view stays one). Copies are
/// stream-ordered: into a device after its earlier work, out of a device
/// after the source's device finished what it had queued (then the host
/// waits, so a host result is readable at once).
core::View copyView(const core::View& view, DType t, const Shape& shape, int64_t lo, int64_t hi, Device from,
                    Device to) {
  const auto E = static_cast<int64_t>(dtype_size(t));
  const int64_t count = shape.numel() == 0 ? 0 : hi - lo + 1;
  const auto bytes = static_cast<std::size_t>(count * E);
  core::View out;
  out.storage = core::Storage::allocate(hal::deviceContext(to).allocator(), bytes);
  out.offset = -lo;
  for (int d = 0; d < shape.rank(); ++d) out.strides[d] = view.strides[d];
  if (bytes == 0) return out;
  const char* src = view.bytes(t) + lo * E;
  char* dst = static_cast<char*>(out.storage->data());
  hal::DeviceContext& source = hal::deviceContext(from);
  hal::DeviceContext& target = hal::deviceContext(to);
  if (source.hostAccessible() && target.hostAccessible()) {
    std::memcpy(dst, src, bytes);
  } else if (source.hostAccessible()) {
    // Host to device: the host buffer stays alive until the stream copied it.
    hal::Stream& stream = target.defaultStream();
    stream.copy(dst, src, bytes);
    stream.hostCall([keep = view.storage] {});
  } else if (target.hostAccessible()) {
    hal::Stream& stream = source.defaultStream();
    stream.copy(dst, src, bytes);
    stream.synchronize();
  } else {
    // Between two devices: through the host.
    core::View staged = copyView(view, t, shape, lo, hi, from, Device::cpu());
    return copyView(staged, t, shape, lo, hi, Device::cpu(), to);
  }
  return out;
}
}  // namespace

Tensor::Tensor(const Tensor& o) : impl_(o.impl_) {
  if (impl_) impl_->retain();
}

Tensor& Tensor::operator=(const Tensor& o) {
  if (o.impl_) o.impl_->retain();
  if (impl_) impl_->release();
  impl_ = o.impl_;
  return *this;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    if (impl_) impl_->release();
    impl_ = o.impl_;
    o.impl_ = nullptr;
  }
  return *this;
}

Tensor::~Tensor() {
  if (impl_) impl_->release();
}

DType Tensor::dtype() const { return checked(impl_, "dtype")->dtype; }
const Shape& Tensor::shape() const { return checked(impl_, "shape")->shape; }
Device Tensor::device() const { return checked(impl_, "device")->device; }

int64_t Tensor::size(int axis) const {
  const Shape& s = shape();
  int a = axis < 0 ? axis + s.rank() : axis;
  if (a < 0 || a >= s.rank())
    throw Error("Tensor::size: axis " + std::to_string(axis) + " is out of range for shape " + s.str());
  return s[a];
}

bool Tensor::is_materialized() const {
  return checked(impl_, "is_materialized")->owner.load(std::memory_order_acquire) == nullptr;
}

std::vector<int64_t> Tensor::strides() const {
  detail::TensorImpl* i = materialized(impl_, "strides");
  return {i->view.strides, i->view.strides + i->shape.rank()};
}

bool Tensor::is_contiguous() const {
  detail::TensorImpl* i = materialized(impl_, "is_contiguous");
  return core::isContiguous(i->shape, i->view.strides);
}

void Tensor::checkSingleElement() const {
  const Shape& s = shape();
  if (s.numel() != 1)
    throw Error("Tensor::item: the tensor has shape " + s.str() + " (" + std::to_string(s.numel()) +
                " elements); item() needs exactly one element (use to_vector() or index it first)");
}

void Tensor::checkHostCopy(std::size_t elementSize) const {
  const Shape& s = shape();
  int64_t bytes = 0;
  if (__builtin_mul_overflow(s.numel(), static_cast<int64_t>(elementSize), &bytes))
    throw Error("Tensor::to_vector: " + s.str() + " holds " + std::to_string(s.numel()) + " elements of " +
                std::to_string(elementSize) + " bytes, more than fits in the address space; slice or reduce it first");
}

void Tensor::copyOut(void* dst, DType dstType) const {
  detail::TensorImpl* i = materialized(impl_, "to_vector");
  if (i->shape.numel() == 0) return;
  if (i->device.kind != Device::CPU) {
    to(Device::cpu()).copyOut(dst, dstType);
    return;
  }
  interp::Arg a = interp::argOf(i->view, i->dtype, i->shape);
  if (dstType == i->dtype) interp::copyKernel(a, static_cast<char*>(dst));
  else interp::castKernel(a, dstType, static_cast<char*>(dst));
}

const void* Tensor::data() const {
  detail::TensorImpl* i = materialized(impl_, "data");
  if (i->device.kind != Device::CPU)
    throw Error("Tensor::data: the tensor lives on " + i->device.str() + "; copy it with to(Device::cpu()) first");
  if (core::isContiguous(i->shape, i->view.strides)) return i->view.bytes(i->dtype);
  // data() promises a dense row-major buffer: a dense copy of the values,
  // kept beside the strided view (replacing the view raced with threads
  // reading it, a recorder or an interpreter reading this tensor).
  std::lock_guard<std::mutex> lock(gDensifyMutex);
  if (!i->denseData) i->denseData = denseHostCopy(i, "Tensor::data").storage;
  return i->denseData->data();
}

namespace {
/// A dense copy of materialized tensor `t`'s values on its device (a device
/// tensor through a dense host copy, which fromHost puts back on it).
core::View denseCopy(const Tensor& t, const char* what) {
  const detail::TensorImpl* i = t.impl();
  if (i->device.kind == Device::CPU) return denseHostCopy(i, what);
  const Tensor host = t.to(Device::cpu());
  const core::View values = denseHostCopy(host.impl(), what);
  return detail::fromHost(values.storage->data(), static_cast<std::size_t>(i->shape.numel()), i->dtype, i->shape,
                          i->device)
      .impl()
      ->view;
}
}  // namespace

std::vector<bool> api::sharedMemory(std::span<const Tensor> tensors) {
  std::vector<bool> shared;
  shared.reserve(tensors.size());
  std::unordered_set<const core::Storage*> seen;
  for (const Tensor& t : tensors) {
    const detail::TensorImpl* i = materialized(t.impl(), "sharedMemory");
    const std::shared_ptr<core::Storage>& s = i->view.storage;
    shared.push_back(i->shape.numel() > 0 &&
                     (!s || !s->ownedByKiln() || s.use_count() > 1 || !seen.insert(s.get()).second));
  }
  return shared;
}

const void* api::storageOf(const Tensor& t) { return materialized(t.impl(), "storageOf")->view.storage.get(); }

int api::giveExclusiveBuffers(std::span<Tensor> tensors) {
  const std::vector<bool> shared = sharedMemory(tensors);
  std::unordered_map<const detail::TensorImpl*, int> listed;
  for (const Tensor& t : tensors) ++listed[t.impl()];
  int copied = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    Tensor& t = tensors[k];
    const detail::TensorImpl* i = t.impl();
    if (i->shape.numel() == 0) continue;  // no memory to write
    // Another handle holds the tensor itself: a template constant.
    if (!shared[k] && i->refCount() == listed[i]) continue;
    detail::TensorImpl* own = detail::TensorImpl::create(i->dtype, i->shape, i->device);
    Tensor copy(own);
    own->view = denseCopy(t, "a graph output");
    t = std::move(copy);
    ++copied;
  }
  return copied;
}

void api::giveOwnDenseBuffers(std::span<Tensor* const> tensors) {
  std::unordered_set<const core::Storage*> seen;
  for (Tensor* t : tensors) {
    detail::TensorImpl* i = materialized(t->impl(), "giveOwnDenseBuffers");
    const bool shared = !seen.insert(i->view.storage.get()).second;
    if (!shared && core::isContiguous(i->shape, i->view.strides)) continue;
    core::View dense = denseCopy(*t, "optimizer parameter");
    {
      std::lock_guard<std::mutex> lock(gDensifyMutex);
      i->view = dense;
    }
    seen.insert(i->view.storage.get());
  }
}

Tensor Tensor::to(Device d) const {
  detail::TensorImpl* i = checked(impl_, "to");
  if (i->device == d) return *this;
  hal::deviceContext(d);  // throws naming the missing driver or index
  materialized(impl_, "to");
  int64_t lo = 0, hi = 0;
  if (!core::stridedExtent(i->shape, i->view.strides, i->dtype, &lo, &hi).empty() ||
      hi - lo + 1 > 2 * i->shape.numel() + 64) {
    // A sparse view (a few rows of a large buffer): copy only its elements.
    return contiguous().to(d);
  }
  detail::TensorImpl* out = detail::TensorImpl::create(i->dtype, i->shape, d);
  Tensor result(out);
  out->view = copyView(i->view, i->dtype, i->shape, lo, hi, i->device, d);
  // Differentiable: in the graph as a same-shape reshape, whose VJP moves
  // the gradient back to this tensor's device (the copy left the graph, and
  // the gradient of whatever it fed was silently zero).
  const Tensor* ins[] = {this};
  autograd::onRecorded(result, trace::NodeSpec{core::OpKind::Reshape, i->dtype, i->shape}, ins);
  return result;
}

Tensor Tensor::contiguous() const {
  detail::TensorImpl* i = checked(impl_, "contiguous");
  if (i->owner.load(std::memory_order_acquire) == nullptr && core::isContiguous(i->shape, i->view.strides))
    return *this;
  // A reshape to the same shape copies exactly when its input is strided.
  trace::NodeSpec spec{core::OpKind::Reshape, i->dtype, i->shape};
  const Tensor* ins[] = {this};
  Tensor out = trace::Recorder::current().record(spec, ins);
  autograd::onRecorded(out, spec, ins);
  return out;
}

Tensor Tensor::reshape(const Shape& s) const { return kiln::reshape(*this, s); }
Tensor Tensor::transpose(int a, int b) const { return kiln::transpose(*this, a, b); }
Tensor Tensor::permute(const std::vector<int>& perm) const { return kiln::permute(*this, perm); }
Tensor Tensor::sum(const std::vector<int>& axes, bool keepdim) const { return kiln::sum(*this, axes, keepdim); }
Tensor Tensor::mean(const std::vector<int>& axes, bool keepdim) const { return kiln::mean(*this, axes, keepdim); }
Tensor Tensor::cast(DType t) const { return kiln::cast(*this, t); }

Tensor& Tensor::operator+=(const Tensor& o) { return *this = add(*this, o); }
Tensor& Tensor::operator-=(const Tensor& o) { return *this = sub(*this, o); }
Tensor& Tensor::operator*=(const Tensor& o) { return *this = mul(*this, o); }
Tensor& Tensor::operator/=(const Tensor& o) { return *this = div(*this, o); }

}  // namespace kiln
