// DLPack for Python: kiln.Tensor.__dlpack__ / __dlpack_device__ and
// kiln._from_capsule, both capsule kinds ("dltensor" and DLPack 1.x's
// "dltensor_versioned"), zero-copy both ways. The checks and the
// ownership rules are the C ABI's (runtime/capi/DLPackInterop.h).
#include <string>

#include "python/src/Convert.h"
#include "runtime/capi/DLPackInterop.h"

namespace kiln::python {

namespace {

constexpr const char* kCapsule = "dltensor";
constexpr const char* kUsedCapsule = "used_dltensor";
constexpr const char* kVersionedCapsule = "dltensor_versioned";
constexpr const char* kUsedVersionedCapsule = "used_dltensor_versioned";

/// A capsule that nobody consumed still owns its tensor (the DLPack
/// protocol): free it. A consumer renames the capsule, and then owns it.
void capsuleDestructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsule)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsule));
    if (m && m->deleter) m->deleter(m);
  }
}

void versionedCapsuleDestructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kVersionedCapsule)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedCapsule));
    if (m && m->deleter) m->deleter(m);
  }
}

/// A dense copy of `t` in a new buffer (for __dlpack__(copy=True)).
Tensor freshCopy(const Tensor& t) {
  Tensor dense = t.contiguous();
  return detail::fromHost(dense.data(), static_cast<size_t>(dense.numel()), dense.dtype(), dense.shape(),
                          Device::cpu());
}

nb::object exportCapsule(const Tensor& t, nb::handle stream, nb::handle maxVersion, nb::handle dlDevice,
                         nb::handle copy) {
  if (!stream.is_none() && !(PyLong_Check(stream.ptr()) && nb::cast<int64_t>(stream) == -1))
    throw nb::value_error("__dlpack__: Kiln tensors live on the CPU here; stream must be None");
  if (!dlDevice.is_none() && !(nb::cast<int>(dlDevice[0]) == kDLCPU))
    throw nb::buffer_error("__dlpack__: Kiln exports CPU tensors only (dl_device must be (1, 0) or None)");
  const bool versioned = !maxVersion.is_none() && nb::cast<int>(maxVersion[0]) >= 1;
  const bool wantCopy = !copy.is_none() && nb::cast<bool>(copy);
  // copy=False (never copy) is what Kiln does anyway.
  Tensor source = t;
  if (wantCopy) {
    nb::gil_scoped_release release;
    source = freshCopy(t);
  }
  if (versioned) {
    DLManagedTensorVersioned* m;
    {
      nb::gil_scoped_release release;  // computes a pending tensor
      m = capi::exportDLPackVersioned(source);
    }
    if (wantCopy) m->flags = DLPACK_FLAG_BITMASK_IS_COPIED;  // a private buffer: the consumer may write it
    PyObject* c = PyCapsule_New(m, kVersionedCapsule, &versionedCapsuleDestructor);
    if (!c) {
      m->deleter(m);
      throw nb::python_error();
    }
    return nb::steal(c);
  }
  DLManagedTensor* m;
  {
    nb::gil_scoped_release release;
    m = capi::exportDLPack(source);
  }
  PyObject* c = PyCapsule_New(m, kCapsule, &capsuleDestructor);
  if (!c) {
    m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(c);
}

/// Takes the tensor out of a DLPack capsule (either kind) without copying;
/// the capsule is marked used, and Kiln calls the producer's deleter once,
/// after the last use of the memory.
Tensor fromCapsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kVersionedCapsule)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersionedCapsule));
    capi::DLPackView v = capi::inspectDLPack(m, "the DLPack tensor");
    Tensor t = capi::adoptDLPack(m, v);
    PyCapsule_SetName(c, kUsedVersionedCapsule);
    return t;
  }
  if (PyCapsule_IsValid(c, kCapsule)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kCapsule));
    capi::DLPackView v = capi::inspectDLPack(m, "the DLPack tensor");
    Tensor t = capi::adoptDLPack(m, v);
    PyCapsule_SetName(c, kUsedCapsule);
    return t;
  }
  if (PyCapsule_CheckExact(c))
    throw nb::value_error(("from_dlpack: the capsule is named \"" + std::string(PyCapsule_GetName(c) ? PyCapsule_GetName(c) : "") +
                           "\"; expected an unused \"dltensor\" or \"dltensor_versioned\" capsule (a DLPack "
                           "capsule can be consumed once)")
                              .c_str());
  throw nb::type_error("from_dlpack: expected a DLPack capsule");
}

}  // namespace

void bindDLPack(nb::module_& m, nb::class_<Tensor>& cls) {
  cls.def(
      "__dlpack__",
      [](const Tensor& t, nb::handle stream, nb::handle maxVersion, nb::handle dlDevice, nb::handle copy) {
        return exportCapsule(t, stream, maxVersion, dlDevice, copy);
      },
      nb::arg("stream") = nb::none(), nb::kw_only(), nb::arg("max_version") = nb::none(),
      nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none(),
      "A DLPack capsule of this tensor (computed first), without copying: \"dltensor_versioned\" (DLPack 1.0, "
      "read-only) when max_version >= (1, 0), else \"dltensor\".");
  cls.def("__dlpack_device__", [](const Tensor& t) {
    if (t.device().kind != Device::CPU)
      throw Error("__dlpack_device__: the tensor lives on " + t.device().str() + "; only CPU tensors can be exported");
    return nb::make_tuple(static_cast<int>(kDLCPU), 0);
  });
  m.def("_from_capsule", &fromCapsule, nb::arg("capsule"));
}

}  // namespace kiln::python
