// The `kiln._kiln` extension module: Kiln's C++ API for Python (nanobind).
// kiln/__init__.py re-exports it with the Python-only parts (from_dlpack's
// protocol handling, the PyTorch backend).
#include <nanobind/stl/string.h>

#include <string>

#include "python/src/Convert.h"
#include "runtime/capi/CApiSupport.h"

namespace kiln::python {

Operand toOperand(nb::handle h, const char* what) {
  if (nb::isinstance<Tensor>(h)) return Operand(nb::cast<const Tensor&>(h));
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return Operand(o == Py_True);
  if (PyLong_Check(o)) return Operand(nb::cast<int64_t>(h));
  if (PyFloat_Check(o)) return Operand(PyFloat_AsDouble(o));
  // NumPy and PyTorch scalars: integers have __index__, the rest __float__.
  if (PyIndex_Check(o)) {
    nb::object i = nb::steal(PyNumber_Index(o));
    if (i.is_valid()) return Operand(nb::cast<int64_t>(i));
    PyErr_Clear();
  }
  if (nb::hasattr(h, "__float__")) {
    double d = PyFloat_AsDouble(o);
    if (!(d == -1.0 && PyErr_Occurred())) return Operand(d);
    PyErr_Clear();
  }
  throw nb::type_error((std::string(what) + ": expected a kiln.Tensor or a number, got " +
                        Py_TYPE(h.ptr())->tp_name)
                           .c_str());
}

Tensor toTensor(nb::handle h, const char* what) {
  Operand op = toOperand(h, what);
  if (op.is_tensor()) return op.tensor();
  const Scalar& s = op.scalar();
  switch (s.kind()) {
    case Scalar::Kind::Bool: return scalar_tensor(s, DType::boolean);
    case Scalar::Kind::Integral: return scalar_tensor(s, DType::i64);
    case Scalar::Kind::Floating: break;
  }
  return scalar_tensor(s, DType::f32);
}

Device toDevice(nb::handle h) {
  if (h.is_none()) return default_device();
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (nb::isinstance<nb::str>(h)) return Device::parse(nb::cast<std::string>(h));
  throw nb::type_error("device: expected a kiln.Device, a string such as \"cpu\" or \"test:0\", or None");
}

Shape toShape(nb::handle h, const char* what) {
  if (PyLong_Check(h.ptr())) return Shape{nb::cast<int64_t>(h)};
  if (!PySequence_Check(h.ptr()))
    throw nb::type_error((std::string(what) + ": expected a sequence of ints").c_str());
  std::vector<int64_t> dims;
  for (nb::handle d : h) dims.push_back(nb::cast<int64_t>(d));
  return Shape(std::span<const int64_t>(dims));
}

std::vector<int> toAxes(nb::handle h) {
  if (h.is_none()) return {};
  if (PyLong_Check(h.ptr())) return {nb::cast<int>(h)};
  std::vector<int> axes;
  for (nb::handle a : h) axes.push_back(nb::cast<int>(a));
  return axes;
}

}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "Kiln: a tensor JIT runtime with tiered compilation (C++ core)";
  // kiln.Error carries Kiln's message (the op, the shapes, the fix).
  nb::exception<kiln::Error> error(m, "Error", PyExc_RuntimeError);
  // Errors of the DLPack layer (shared with the C ABI) are kiln.Error too.
  nb::register_exception_translator(
      [](const std::exception_ptr& p, void* payload) {
        try {
          std::rethrow_exception(p);
        } catch (const kiln::capi::StatusError& e) {
          PyErr_SetString(static_cast<PyObject*>(payload), e.what());
        }
      },
      error.ptr());
  bindRuntime(m);
  bindDLPackExchange(m);
  bindTensor(m);
  bindOps(m);
}
