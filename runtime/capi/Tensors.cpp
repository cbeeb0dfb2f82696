// C ABI: errors, handles, tensors and DLPack interop.
#include <dlpack/dlpack.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <limits>

#include "kiln/ops.h"
#include "runtime/capi/CApiSupport.h"
#include "runtime/capi/DLPackInterop.h"
#include "runtime/capi/DLPackVersioned.h"
#include "runtime/backends/Hal.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/core/TensorSize.h"
#include "runtime/interp/Kernels.h"
#include "runtime/trace/Recorder.h"

namespace kiln::capi {

// ---- errors --------------------------------------------------------------------

namespace {
thread_local std::string tLastError;
}  // namespace

kiln_status setError(kiln_status status, const char* function, const char* message) noexcept {
  try {
    tLastError.assign(function);
    tLastError += ": ";
    tLastError += message;
  } catch (...) {
    tLastError.clear();  // clear() never allocates; the status still tells what happened
  }
  return status;
}

void clearError() noexcept { tLastError.clear(); }

// ---- handles and conversions ------------------------------------------------

HandleTable<Tensor>& tensorHandles() {
  static auto* t = new HandleTable<Tensor>(HandleKind::Tensor, "kiln_tensor");  // never destroyed: used at exit
  return *t;
}

HandleTable<std::shared_ptr<const Function>>& functionHandles() {
  static auto* t = new HandleTable<std::shared_ptr<const Function>>(HandleKind::Function, "kiln_function");
  return *t;
}

DType dtypeOf(int64_t dtype, const char* what) {
  if (dtype < 0 || dtype >= kNumDTypes)
    fail(KILN_ERROR_DTYPE, std::string(what) + ": " + std::to_string(dtype) + " is not a kiln_dtype (0 to " +
                               std::to_string(kNumDTypes - 1) + ")");
  return static_cast<DType>(dtype);
}

Shape shapeOf(const int64_t* dims, int64_t rank, const char* what, bool allowInferred) {
  if (rank < 0 || rank > Shape::kMaxRank)
    fail(KILN_ERROR_SHAPE, std::string(what) + ": rank " + std::to_string(rank) + " is outside 0 to " +
                               std::to_string(Shape::kMaxRank));
  if (rank > 0 && !dims) fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + ": the extents pointer is NULL");
  for (int64_t i = 0; i < rank; ++i) {
    if (dims[i] < 0 && !(allowInferred && dims[i] == -1))
      fail(KILN_ERROR_SHAPE, std::string(what) + ": extent " + std::to_string(i) + " is negative (" +
                                 std::to_string(dims[i]) + ")");
  }
  Shape s(std::span<const int64_t>(dims, static_cast<size_t>(rank)));
  Shape counted = s;  // an inferred extent (-1) counts as 1
  for (int i = 0; i < counted.rank(); ++i)
    if (counted[i] < 0) counted[i] = 1;
  if (std::string e = core::checkElementCount(counted); !e.empty()) fail(KILN_ERROR_SHAPE, std::string(what) + ": " + e);
  return s;
}

size_t denseBytes(const Shape& shape, DType dtype, const char* what) {
  int64_t bytes = 0;
  if (std::string e = core::denseByteSize(shape, dtype, &bytes); !e.empty())
    fail(KILN_ERROR_SHAPE, std::string(what) + ": " + e);
  return static_cast<size_t>(bytes);
}

void writeText(const std::string& text, char* buffer, size_t capacity, size_t* length) {
  if (length) *length = text.size();
  if (capacity < text.size() + 1)
    fail(KILN_ERROR_BUFFER_TOO_SMALL, "needs " + std::to_string(text.size() + 1) + " bytes, capacity is " +
                                          std::to_string(capacity));
  required(buffer, "buffer");
  std::memcpy(buffer, text.c_str(), text.size() + 1);
}

namespace {

/// The tensor computed, with a stable copy of its view.
core::View materializedView(const Tensor& t) {
  trace::Recorder::materialize(t.impl());
  return t.impl()->view;
}

// ---- DLPack ---------------------------------------------------------------------

constexpr uint8_t kDLBoolCode = 6;  // kDLBool since DLPack 0.8 (the 0.6 header lacks it)

DType dtypeFromDL(DLDataType t) {
  if (t.lanes != 1)
    fail(KILN_ERROR_DTYPE, "vector dtypes (lanes = " + std::to_string(t.lanes) + ") are not supported");
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 32) return DType::f32;
      if (t.bits == 64) return DType::f64;
      if (t.bits == 16) return DType::f16;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::bf16;
      break;
    case kDLInt:
      if (t.bits == 64) return DType::i64;
      if (t.bits == 32) return DType::i32;
      if (t.bits == 8) return DType::i8;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::u8;
      break;
    case kDLBoolCode:
      if (t.bits == 8) return DType::boolean;
      break;
    default: break;
  }
  fail(KILN_ERROR_DTYPE, "DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                             " bits) has no Kiln dtype; Kiln takes float16/32/64, bfloat16, int8/32/64, uint8 "
                             "and bool; cast it first");
}

DLDataType dlFromDType(DType t) {
  DLDataType d;
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(dtype_size(t) * 8);
  switch (t) {
    case DType::f32:
    case DType::f64:
    case DType::f16: d.code = kDLFloat; break;
    case DType::bf16: d.code = kDLBfloat; break;
    case DType::i64:
    case DType::i32:
    case DType::i8: d.code = kDLInt; break;
    case DType::u8: d.code = kDLUInt; break;
    case DType::boolean: d.code = kDLBoolCode; break;
  }
  return d;
}

const char* deviceTypeName(int t) {
  switch (t) {
    case kDLCUDA: return "CUDA";
    case kDLCUDAHost: return "CUDA host (pinned)";
    case kDLOpenCL: return "OpenCL";
    case kDLVulkan: return "Vulkan";
    case kDLMetal: return "Metal";
    case kDLROCM: return "ROCm";
    case kDLCUDAManaged: return "CUDA managed";
    case kiln::capi::kDLOneAPIDevice: return "oneAPI";
    default: return "a non-CPU device";
  }
}

/// What an exported DLManagedTensor (or DLManagedTensorVersioned) owns.
template <class Managed>
struct ExportContext {
  Managed managed{};
  std::shared_ptr<core::Storage> storage;  // keeps Kiln's buffer alive
  int64_t shape[Shape::kMaxRank] = {};
  int64_t strides[Shape::kMaxRank] = {};
};

template <class Managed>
void deleteExport(Managed* m) {
  delete static_cast<ExportContext<Managed>*>(m->manager_ctx);
}

/// Fills ctx's DLTensor with the computed view of `t` and takes a reference
/// to its buffer.
template <class Managed>
std::unique_ptr<ExportContext<Managed>> exportContext(const Tensor& t) {
  core::View view = materializedView(t);
  const Device device = t.device();
  if (device.kind != Device::CPU && device.kind != Device::CUDA && device.kind != Device::LevelZero)
    fail(KILN_ERROR_DEVICE, "the tensor lives on " + device.str() +
                                "; only CPU, CUDA and Level Zero tensors can be exported (copy it with "
                                "kiln_tensor_to_device)");
  // The consumer reads the memory at once, on a stream of its own: Kiln's
  // work on it is finished first.
  if (device.kind == Device::CUDA || device.kind == Device::LevelZero) hal::deviceContext(device).synchronize();
  auto ctx = std::make_unique<ExportContext<Managed>>();
  const Shape& s = t.shape();
  for (int d = 0; d < s.rank(); ++d) {
    ctx->shape[d] = s[d];
    ctx->strides[d] = view.strides[d];
  }
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = view.storage ? view.bytes(t.dtype()) : nullptr;
  dl.device = device.kind == Device::CUDA        ? DLDevice{kDLCUDA, device.index}
              : device.kind == Device::LevelZero ? DLDevice{kiln::capi::kDLOneAPIDevice, device.index}
                                                 : DLDevice{kDLCPU, 0};
  dl.ndim = s.rank();
  dl.dtype = dlFromDType(t.dtype());
  dl.shape = ctx->shape;
  dl.strides = ctx->strides;
  dl.byte_offset = 0;
  ctx->storage = std::move(view.storage);
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = &deleteExport<Managed>;
  return ctx;
}

}  // namespace

/// Checks a DLPack tensor and describes the Kiln view of it (nothing is owned
/// yet). Shared by kiln_tensor_from_dlpack and kiln_function_call_dlpack.
DLPackView inspectDLPack(const DLManagedTensor* m, const char* what) {
  if (!m) fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  return inspectDLTensor(m->dl_tensor, what);
}

DLPackView inspectDLPack(const DLManagedTensorVersioned* m, const char* what) {
  if (!m) fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  if (m->version.major != kDLPackMajor)
    fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + " is a DLPack " + std::to_string(m->version.major) + "." +
                                          std::to_string(m->version.minor) + " tensor; Kiln reads DLPack 1.x");
  // Read-only memory is fine: Kiln never writes memory it did not allocate.
  return inspectDLTensor(m->dl_tensor, what);
}

DLPackView inspectDLTensor(const DLTensor& t, const char* what) {
  DLPackView v;
  if (t.device.device_type == kDLCUDA) {
    const int count = device_count(Device::CUDA);
    if (t.device.device_id < 0 || t.device.device_id >= count)
      fail(KILN_ERROR_DEVICE, std::string(what) + " lives on CUDA device " + std::to_string(t.device.device_id) +
                                  "; this process has " + std::to_string(count) + " CUDA device(s)" +
                                  (count == 0 ? " (" + hal::unavailableReason(Device::CUDA) + ")" : std::string()));
    v.device = Device::cuda(t.device.device_id);
  } else if (t.device.device_type == kiln::capi::kDLOneAPIDevice) {
    // oneAPI USM memory: Kiln's level_zero:i is the loader's i-th device.
    const int count = device_count(Device::LevelZero);
    if (t.device.device_id < 0 || t.device.device_id >= count)
      fail(KILN_ERROR_DEVICE, std::string(what) + " lives on oneAPI device " + std::to_string(t.device.device_id) +
                                  "; this process has " + std::to_string(count) + " Level Zero device(s)" +
                                  (count == 0 ? " (" + hal::unavailableReason(Device::LevelZero) + ")"
                                              : std::string()));
    v.device = Device::level_zero(t.device.device_id);
  } else if (t.device.device_type != kDLCPU) {
    fail(KILN_ERROR_DEVICE, std::string(what) + " lives on " + deviceTypeName(t.device.device_type) +
                                " (DLPack device type " + std::to_string(t.device.device_type) +
                                "); Kiln takes CPU, CUDA and oneAPI (Level Zero) device memory only; copy it to one "
                                "of them first");
  }
  v.dtype = dtypeFromDL(t.dtype);
  v.shape = shapeOf(t.shape, t.ndim, what);
  const int64_t esize = static_cast<int64_t>(dtype_size(v.dtype));
  const int rank = v.shape.rank();
  if (t.strides) {
    for (int d = 0; d < rank; ++d) v.strides[d] = t.strides[d];
  } else {
    core::contiguousStrides(v.shape, v.strides);
  }
  // Element offsets of the lowest and highest element, relative to element 0.
  int64_t lo = 0, hi = 0;
  const bool empty = v.shape.numel() == 0;
  if (std::string e = core::stridedExtent(v.shape, v.strides, v.dtype, &lo, &hi); !e.empty())
    fail(KILN_ERROR_SHAPE, std::string(what) + ": " + e);
  if (!t.data && !empty) fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + " has a NULL data pointer");
  // The addresses touched, data + byte_offset + [lo, hi] elements, must not
  // wrap around the address space.
  const auto data = reinterpret_cast<uintptr_t>(t.data);
  uintptr_t firstAddr = 0, lowAddr = 0, highAddr = 0;
  if (__builtin_add_overflow(data, t.byte_offset, &firstAddr) ||
      (!empty && (__builtin_sub_overflow(firstAddr, static_cast<uintptr_t>(-lo) * esize, &lowAddr) ||
                  __builtin_add_overflow(firstAddr, static_cast<uintptr_t>(hi + 1) * esize - 1, &highAddr))))
    fail(KILN_ERROR_SHAPE, std::string(what) + ": data + byte_offset (" + std::to_string(t.byte_offset) +
                               " bytes) and the strides reach outside the address space");
  char* first = reinterpret_cast<char*>(firstAddr);
  if (firstAddr % static_cast<uintptr_t>(esize) != 0)
    fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + ": data + byte_offset is not aligned to the " +
                                          std::to_string(esize) + "-byte element size");
  v.base = empty ? first : first + lo * esize;
  v.offset = empty ? 0 : -lo;
  v.bytes = empty ? 0 : static_cast<size_t>((hi - lo + 1) * esize);
  return v;
}

Tensor adoptDLPack(DLManagedTensor* m, const DLPackView& v) {
  return adoptView(v, [m] {
    if (m->deleter) m->deleter(m);
  });
}

Tensor adoptDLPack(DLManagedTensorVersioned* m, const DLPackView& v) {
  return adoptView(v, [m] {
    if (m->deleter) m->deleter(m);
  });
}

namespace {
/// Whether every byte of host memory [p, p + n) is 0 or 1.
bool bytesAreZeroOrOne(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint8_t above = 0;
  for (size_t i = 0; i < n; ++i) above |= static_cast<uint8_t>(b[i] & 0xFE);
  return above == 0;
}
}  // namespace

Tensor adoptView(const DLPackView& v, std::function<void()> release) {
  // Kiln's bools are one byte holding 0 or 1, which kernels read as C++
  // bool; a producer's may hold any byte (a uint8 array viewed as bool): not
  // 2 was 3, still true. Such bytes (or any device memory, which the host
  // cannot scan) are read as u8 and normalised into a new tensor, != 0.
  const bool normalise = v.dtype == DType::boolean && v.bytes > 0 &&
                         (v.device != Device::cpu() || !bytesAreZeroOrOne(v.base, v.bytes));
  detail::TensorImpl* impl = detail::TensorImpl::create(normalise ? DType::u8 : v.dtype, v.shape, v.device);
  Tensor t(impl);
  impl->view.offset = v.offset;
  for (int d = 0; d < v.shape.rank(); ++d) impl->view.strides[d] = v.strides[d];
  // The producer's deleter runs when the last view of this storage is gone:
  // handles, trace parameters, exported DLPack tensors and views alike.
  // Armed once the tensor is made: if normalising throws (recording can),
  // the caller still owns the memory and must be the only one to free it.
  auto armed = std::make_shared<std::atomic<bool>>(!normalise);
  impl->view.storage = core::Storage::wrap(v.base, v.bytes, v.device,
                                           [release = std::move(release), armed](void*) {
                                             if (armed->load()) release();
                                           });
  if (!normalise) return t;
  Tensor normalised = ne(t, 0);
  armed->store(true);
  return normalised;
}

DLManagedTensor* exportDLPack(const Tensor& t) {
  return &exportContext<DLManagedTensor>(t).release()->managed;
}

DLManagedTensorVersioned* exportDLPackVersioned(const Tensor& t) {
  auto ctx = exportContext<DLManagedTensorVersioned>(t);
  ctx->managed.version = DLPackVersion{kDLPackMajor, kDLPackMinor};
  // Kiln's values are immutable: the consumer must not write them.
  ctx->managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  return &ctx.release()->managed;
}

namespace {
/// kiln_tensor_from_dlpack for either managed-tensor kind.
template <class Managed>
void adoptIntoHandle(Managed* src, kiln_tensor* out) {
  required(out, "out");
  DLPackView v = inspectDLPack(src, "src");
  // Reserve the handle first: after adoptDLPack nothing may fail, or the
  // caller and Kiln would both own src.
  kiln_tensor h = newTensorHandle(Tensor());
  try {
    Tensor t = adoptDLPack(src, v);
    tensorHandles().set(bits(h), std::move(t));
  } catch (...) {
    tensorHandles().release(bits(h), "out");
    throw;
  }
  *out = h;
}
}  // namespace
}  // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

const char* kiln_last_error(void) { return tLastError.c_str(); }

kiln_status kiln_tensor_from_host(const void* data, size_t data_bytes, kiln_dtype dtype, const int64_t* shape,
                                  int32_t rank, kiln_tensor* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    DType t = dtypeOf(dtype, "dtype");
    Shape s = shapeOf(shape, rank, "shape");
    const size_t want = denseBytes(s, t, "shape");
    if (data_bytes != want)
      fail(KILN_ERROR_SHAPE, std::to_string(data_bytes) + " bytes given, but shape " + s.str() + " of " +
                                 std::string(dtype_name(t)) + " needs " + std::to_string(want));
    if (want > 0) required(data, "data");
    std::vector<uint8_t> normalized;
    if (t == DType::boolean) {  // Kiln's bools are 0 or 1
      normalized.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + want);
      for (uint8_t& b : normalized) b = b != 0;
      data = normalized.data();
    }
    Tensor x = detail::fromHost(data, static_cast<size_t>(s.numel()), t, s, Device::cpu());
    *out = newTensorHandle(std::move(x));
  });
}

kiln_status kiln_tensor_from_dlpack(DLManagedTensor* src, kiln_tensor* out) {
  return guarded(__func__, [&] { adoptIntoHandle(src, out); });
}

kiln_status kiln_tensor_from_dlpack_versioned(DLManagedTensorVersioned* src, kiln_tensor* out) {
  return guarded(__func__, [&] { adoptIntoHandle(src, out); });
}

kiln_status kiln_tensor_to_dlpack(kiln_tensor tensor, DLManagedTensor** out) {
  return guarded(__func__, [&] {
    required(out, "out");
    Tensor t = tensorOf(tensor, "tensor");
    *out = exportDLPack(t);
  });
}

kiln_status kiln_tensor_to_dlpack_versioned(kiln_tensor tensor, DLManagedTensorVersioned** out) {
  return guarded(__func__, [&] {
    required(out, "out");
    Tensor t = tensorOf(tensor, "tensor");
    *out = exportDLPackVersioned(t);
  });
}

kiln_status kiln_tensor_retain(kiln_tensor tensor) {
  return guarded(__func__, [&] { tensorHandles().retain(bits(tensor), "tensor"); });
}

kiln_status kiln_tensor_release(kiln_tensor tensor) {
  return guarded(__func__, [&] { tensorHandles().release(bits(tensor), "tensor"); });
}

kiln_status kiln_tensor_dtype(kiln_tensor tensor, kiln_dtype* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = cDType(tensorOf(tensor, "tensor").dtype());
  });
}

kiln_status kiln_tensor_rank(kiln_tensor tensor, int32_t* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = tensorOf(tensor, "tensor").rank();
  });
}

kiln_status kiln_tensor_shape(kiln_tensor tensor, int64_t* dims, int32_t capacity) {
  return guarded(__func__, [&] {
    Tensor t = tensorOf(tensor, "tensor");
    if (capacity < t.rank())
      fail(KILN_ERROR_BUFFER_TOO_SMALL, "capacity " + std::to_string(capacity) + " is below the rank " +
                                            std::to_string(t.rank()));
    if (t.rank() > 0) required(dims, "dims");
    for (int d = 0; d < t.rank(); ++d) dims[d] = t.shape()[d];
  });
}

kiln_status kiln_tensor_numel(kiln_tensor tensor, int64_t* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = tensorOf(tensor, "tensor").numel();
  });
}

kiln_status kiln_tensor_device(kiln_tensor tensor, kiln_device* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    Device d = tensorOf(tensor, "tensor").device();
    out->kind = static_cast<int32_t>(d.kind);
    out->index = d.index;
  });
}

kiln_status kiln_tensor_to_device(kiln_tensor tensor, kiln_device device, kiln_tensor* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    if (device.kind < KILN_DEVICE_CPU || device.kind > KILN_DEVICE_TEST || device.index < 0)
      fail(KILN_ERROR_INVALID_ARGUMENT, "device {kind " + std::to_string(device.kind) + ", index " +
                                            std::to_string(device.index) + "} is not a kiln_device");
    Tensor t = tensorOf(tensor, "tensor");
    *out = newTensorHandle(t.to(Device{static_cast<Device::Kind>(device.kind), device.index}));
  });
}

kiln_status kiln_tensor_is_materialized(kiln_tensor tensor, int32_t* out) {
  return guarded(__func__, [&] {
    required(out, "out");
    *out = tensorOf(tensor, "tensor").is_materialized() ? 1 : 0;
  });
}

kiln_status kiln_tensor_strides(kiln_tensor tensor, int64_t* strides, int32_t capacity) {
  return guarded(__func__, [&] {
    Tensor t = tensorOf(tensor, "tensor");
    if (capacity < t.rank())
      fail(KILN_ERROR_BUFFER_TOO_SMALL, "capacity " + std::to_string(capacity) + " is below the rank " +
                                            std::to_string(t.rank()));
    if (t.rank() > 0) required(strides, "strides");
    core::View v = materializedView(t);
    for (int d = 0; d < t.rank(); ++d) strides[d] = v.strides[d];
  });
}

kiln_status kiln_tensor_data_pointer(kiln_tensor tensor, const void** out) {
  return guarded(__func__, [&] {
    required(out, "out");
    Tensor t = tensorOf(tensor, "tensor");
    core::View v = materializedView(t);
    if (t.device().kind != Device::CPU)
      fail(KILN_ERROR_DEVICE, "the tensor lives on " + t.device().str() + ", not on the host");
    *out = v.storage ? v.bytes(t.dtype()) : nullptr;
  });
}

kiln_status kiln_tensor_copy_to_host(kiln_tensor tensor, void* dst, size_t dst_bytes, kiln_dtype dtype) {
  return guarded(__func__, [&] {
    Tensor t = tensorOf(tensor, "tensor");
    DType to = dtypeOf(dtype, "dtype");
    const size_t want = denseBytes(t.shape(), to, "tensor");
    if (dst_bytes < want)
      fail(KILN_ERROR_BUFFER_TOO_SMALL, "dst has " + std::to_string(dst_bytes) + " bytes; " + t.shape().str() +
                                            " as " + std::string(dtype_name(to)) + " needs " + std::to_string(want));
    if (want > 0) required(dst, "dst");
    if (t.device().kind != Device::CPU) t = t.to(Device::cpu());  // through the device's stream
    core::View v = materializedView(t);
    if (t.numel() == 0) return;
    interp::Arg a;
    a.data = v.bytes(t.dtype());
    a.dtype = t.dtype();
    a.shape = t.shape();
    for (int d = 0; d < t.rank(); ++d) a.strides[d] = v.strides[d];
    if (to == t.dtype()) interp::copyKernel(a, static_cast<char*>(dst));
    else interp::castKernel(a, to, static_cast<char*>(dst));
  });
}

}  // extern "C"
