// kiln.Tensor: properties, reading values, method forms of ops, operators
// and autograd.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <sstream>
#include <string>

#include "python/src/Convert.h"

namespace kiln::python {

namespace {

nb::tuple shapeTuple(const Shape& s) {
  nb::list l;
  for (int64_t d : s.dims()) l.append(d);
  return nb::tuple(l);
}

/// The values of `t`, nested like its shape, as Python numbers.
nb::object nest(const Tensor& t) {
  const Shape& s = t.shape();
  std::vector<double> f;
  std::vector<int64_t> i;
  const bool floating = is_floating(t.dtype());
  const bool boolean = t.dtype() == DType::boolean;
  {
    nb::gil_scoped_release release;
    if (floating) f = t.to_vector<double>();
    else i = t.to_vector<int64_t>();
  }
  size_t next = 0;
  auto element = [&]() -> nb::object {
    size_t k = next++;
    if (floating) return nb::float_(f[k]);
    if (boolean) return nb::bool_(i[k] != 0);
    return nb::int_(i[k]);
  };
  auto build = [&](auto&& self, int axis) -> nb::object {
    if (axis == s.rank()) return element();
    nb::list l;
    for (int64_t k = 0; k < s[axis]; ++k) l.append(self(self, axis + 1));
    return l;
  };
  return build(build, 0);
}

nb::object item(const Tensor& t) {
  if (t.numel() != 1)
    throw Error("item: the tensor has " + std::to_string(t.numel()) + " elements " + t.shape().str() +
                "; item() needs exactly one");
  if (is_floating(t.dtype())) {
    double v;
    {
      nb::gil_scoped_release release;
      v = t.item<double>();
    }
    return nb::float_(v);
  }
  int64_t v;
  {
    nb::gil_scoped_release release;
    v = t.item<int64_t>();
  }
  if (t.dtype() == DType::boolean) return nb::bool_(v != 0);
  return nb::int_(v);
}

std::string repr(const Tensor& t) {
  if (!t.defined()) return "kiln.Tensor(undefined)";
  std::ostringstream os;
  os << "kiln.Tensor(shape=" << t.shape().str() << ", dtype=" << dtype_name(t.dtype())
     << ", device=" << t.device().str();
  if (!t.is_materialized()) os << ", pending";
  os << ")";
  return os.str();
}

/// reshape(2, 3), reshape((2, 3)) and reshape([2, 3]).
Shape shapeArgs(const nb::args& args, const char* what) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return toShape(args[0], what);
  return toShape(args, what);
}

std::vector<int> permArgs(const nb::args& args) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return toAxes(args[0]);
  return toAxes(args);
}

}  // namespace

void bindTensor(nb::module_& m) {
  using T = Tensor;
  auto bin = [](Tensor (*f)(const Operand&, const Operand&), const char* name) {
    return [f, name](const T& a, nb::handle b) { return f(a, toOperand(b, name)); };
  };
  auto rbin = [](Tensor (*f)(const Operand&, const Operand&), const char* name) {
    return [f, name](const T& a, nb::handle b) { return f(toOperand(b, name), a); };
  };
  nb::class_<Tensor> cls(m, "Tensor",
                     "An immutable n-d array whose value is computed lazily: ops record into this thread's "
                     "trace; reading values (item, tolist, numpy, DLPack) runs it.");
  cls.def_prop_ro("shape", [](const T& t) { return shapeTuple(t.shape()); })
      .def_prop_ro("dtype", &T::dtype)
      .def_prop_ro("device", &T::device)
      .def_prop_ro("ndim", &T::rank)
      .def("numel", &T::numel)
      .def("size", [](const T& t, nb::handle axis) -> nb::object {
             if (axis.is_none()) return shapeTuple(t.shape());
             return nb::int_(t.size(nb::cast<int>(axis)));
           }, nb::arg("axis") = nb::none())
      .def_prop_ro("is_materialized", &T::is_materialized)
      .def("strides", [](const T& t) { return nb::tuple(nb::cast(t.strides())); },
           "Element strides of the computed buffer (computes a pending tensor).")
      .def("is_contiguous", &T::is_contiguous)
      .def("item", &item)
      .def("tolist", &nest)
      .def("to", [](const T& t, nb::handle d) { return t.to(toDevice(d)); }, nb::arg("device"))
      .def("contiguous", &T::contiguous)
      .def("reshape", [](const T& t, nb::args a) { return t.reshape(shapeArgs(a, "reshape")); })
      .def("view", [](const T& t, nb::args a) { return t.reshape(shapeArgs(a, "view")); })
      .def("transpose", &T::transpose, nb::arg("a") = -2, nb::arg("b") = -1)
      .def("permute", [](const T& t, nb::args a) { return t.permute(permArgs(a)); })
      .def_prop_ro("T", [](const T& t) {
        std::vector<int> perm;
        for (int d = t.rank() - 1; d >= 0; --d) perm.push_back(d);
        return t.permute(perm);
      })
      .def("sum", [](const T& t, nb::handle axis, bool keepdim) { return sum(t, toAxes(axis), keepdim); },
           nb::arg("axis") = nb::none(), nb::arg("keepdim") = false)
      .def("mean", [](const T& t, nb::handle axis, bool keepdim) { return mean(t, toAxes(axis), keepdim); },
           nb::arg("axis") = nb::none(), nb::arg("keepdim") = false)
      .def("max", [](const T& t, nb::handle axis, bool keepdim) { return max(t, toAxes(axis), keepdim); },
           nb::arg("axis") = nb::none(), nb::arg("keepdim") = false)
      .def("min", [](const T& t, nb::handle axis, bool keepdim) { return min(t, toAxes(axis), keepdim); },
           nb::arg("axis") = nb::none(), nb::arg("keepdim") = false)
      .def("cast", &T::cast, nb::arg("dtype"))
      .def("astype", &T::cast, nb::arg("dtype"))
      // Autograd.
      .def_prop_rw(
          "requires_grad", [](const T& t) { return t.requires_grad_enabled(); },
          [](T& t, bool on) { t.requires_grad(on); })
      .def(
          "requires_grad_",
          [](nb::handle self, bool on) {
            nb::cast<T&>(self).requires_grad(on);
            return nb::borrow(self);
          },
          nb::arg("on") = true)
      .def_prop_rw(
          "grad",
          [](const T& t) -> nb::object {
            Tensor g = t.grad();
            if (!g.defined()) return nb::none();
            return nb::cast(g);
          },
          [](T& t, nb::handle g) { t.set_grad(g.is_none() ? Tensor() : nb::cast<const Tensor&>(g)); },
          nb::for_setter(nb::arg("grad").none()))
      .def(
          "backward",
          [](const T& t, nb::handle gradOutput, bool retainGraph, bool createGraph) {
            t.backward(gradOutput.is_none() ? Tensor() : toTensor(gradOutput, "backward"), retainGraph,
                       createGraph);
          },
          nb::arg("grad_output") = nb::none(), nb::arg("retain_graph") = false, nb::arg("create_graph") = false)
      .def("detach", &T::detach)
      // Operators (Python numbers take part in type promotion like C++ scalars).
      .def("__add__", bin(&add, "+"))
      .def("__radd__", rbin(&add, "+"))
      .def("__sub__", bin(&sub, "-"))
      .def("__rsub__", rbin(&sub, "-"))
      .def("__mul__", bin(&mul, "*"))
      .def("__rmul__", rbin(&mul, "*"))
      .def("__truediv__", bin(&div, "/"))
      .def("__rtruediv__", rbin(&div, "/"))
      .def("__pow__", bin(&pow, "**"))
      .def("__rpow__", rbin(&pow, "**"))
      .def("__mod__", bin(&remainder, "%"))
      .def("__rmod__", rbin(&remainder, "%"))
      .def("__eq__", bin(&eq, "=="))
      .def("__ne__", bin(&ne, "!="))
      .def("__lt__", bin(&lt, "<"))
      .def("__le__", bin(&le, "<="))
      .def("__gt__", bin(&gt, ">"))
      .def("__ge__", bin(&ge, ">="))
      .def("__and__", bin(&logical_and, "&"))
      .def("__or__", bin(&logical_or, "|"))
      .def("__invert__", [](const T& t) { return logical_not(t); })
      .def("__matmul__", [](const T& a, const T& b) { return matmul(a, b); })
      .def("__neg__", [](const T& t) { return neg(t); })
      .def("__abs__", [](const T& t) { return abs(t); })
      .def("__len__", [](const T& t) -> int64_t {
        if (t.rank() == 0) throw nb::type_error("len() of a rank-0 kiln.Tensor");
        return t.size(0);
      })
      .def("__float__", [](const T& t) { return nb::cast<double>(item(t)); })
      .def("__int__", [](const T& t) { return nb::cast<int64_t>(item(cast(t, DType::i64))); })
      .def("__bool__", [](const T& t) { return nb::cast<bool>(item(cast(t, DType::boolean))); })
      .def("__repr__", &repr)
      .def("__hash__", [](nb::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); });
  bindDLPack(m, cls);
}

}  // namespace kiln::python
