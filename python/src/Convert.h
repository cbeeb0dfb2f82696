// Conversions between Python values and Kiln's C++ API types, shared by the
// binding files of the `kiln._kiln` extension module.
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

#include "kiln/kiln.h"

namespace kiln::python {

namespace nb = nanobind;

/// A kiln.Tensor, a Python bool, int or float (or anything with __index__ or
/// __float__, such as NumPy scalars). Throws TypeError otherwise.
Operand toOperand(nb::handle h, const char* what);
/// A kiln.Tensor, or a number made into a rank-0 tensor of the default
/// dtype of its category.
Tensor toTensor(nb::handle h, const char* what);
/// None: the default device; "cpu", "test:0": parsed; a kiln.Device.
Device toDevice(nb::handle h);
/// A sequence of ints, or ints given as separate arguments (reshape(2, 3)).
Shape toShape(nb::handle h, const char* what);
/// None: all axes (empty); an int; a sequence of ints.
std::vector<int> toAxes(nb::handle h);

/// Binding groups, one per file.
void bindTensor(nb::module_& m);
void bindOps(nb::module_& m);
void bindRuntime(nb::module_& m);
/// __dlpack__ and __dlpack_device__ of kiln.Tensor, and kiln._from_capsule.
void bindDLPack(nb::module_& m, nb::class_<Tensor>& cls);
/// kiln._run_exchange: a TraceTemplate run on another framework's tensors
/// through its DLPack C exchange API.
void bindDLPackExchange(nb::module_& m);

}  // namespace kiln::python
