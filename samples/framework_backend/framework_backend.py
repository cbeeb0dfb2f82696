#!/usr/bin/env python3
"""Kiln as a kernel backend for NumPy (and PyTorch, when installed), through
Kiln's C ABI with ctypes and DLPack: no copies in, no copies out.

    python3 framework_backend.py path/to/libkiln.so

It forwards a NumPy computation to Kiln op by op, captures the same
computation as a kiln_function and calls it on new arrays, and checks every
result against NumPy. The PyTorch part runs only when `import torch` works.
"""
import ctypes
import sys

import numpy as np

# ---- DLPack structs (dlpack.h) and Kiln's C ABI (kiln_c.h) ------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DLDeleter)]


class KilnValue(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("reserved", ctypes.c_int32), ("tensor", ctypes.c_void_p),
                ("f", ctypes.c_double), ("i", ctypes.c_int64)]


class KilnAttr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("count", ctypes.c_int32),
                ("i", ctypes.c_int64), ("f", ctypes.c_double), ("ints", ctypes.POINTER(ctypes.c_int64))]


KILN_OK = 0
KILN_VALUE_TENSOR, KILN_VALUE_FLOAT, KILN_VALUE_INT = 1, 2, 3
KILN_ATTR_INT, KILN_ATTR_FLOAT, KILN_ATTR_INTS, KILN_ATTR_DTYPE, KILN_ATTR_BOOL = 1, 2, 3, 4, 5


class KilnError(RuntimeError):
    pass


class Kiln:
    """A thin ctypes binding of the functions this sample uses."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        self.lib = lib
        vp, i32, status = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int
        sigs = {
            "kiln_last_error": (ctypes.c_char_p, []),
            "kiln_abi_version": (i32, []),
            "kiln_tensor_from_dlpack": (status, [vp, ctypes.POINTER(vp)]),
            "kiln_tensor_to_dlpack": (status, [vp, ctypes.POINTER(vp)]),
            "kiln_tensor_release": (status, [vp]),
            "kiln_tensor_data_pointer": (status, [vp, ctypes.POINTER(vp)]),
            "kiln_call_by_name": (status, [ctypes.c_char_p, ctypes.POINTER(KilnValue), i32,
                                           ctypes.POINTER(KilnAttr), i32, ctypes.POINTER(vp)]),
            "kiln_capture_begin": (status, [ctypes.POINTER(vp), i32]),
            "kiln_capture_end": (status, [ctypes.POINTER(vp), i32, ctypes.c_uint32, ctypes.POINTER(vp)]),
            "kiln_function_call_dlpack": (status, [vp, ctypes.POINTER(vp), i32, ctypes.POINTER(vp), i32]),
            "kiln_function_release": (status, [vp]),
            "kiln_stats_json": (status, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args

    def check(self, status, what):
        if status != KILN_OK:
            raise KilnError("%s: %s" % (what, self.lib.kiln_last_error().decode()))

    # -- tensors in and out, through DLPack capsules --

    def from_dlpack(self, capsule):
        """Takes a "dltensor" capsule (from __dlpack__ or torch.utils.dlpack)."""
        ptr = _capsule_pointer(capsule, b"dltensor")
        out = ctypes.c_void_p()
        self.check(self.lib.kiln_tensor_from_dlpack(ptr, ctypes.byref(out)), "kiln_tensor_from_dlpack")
        _PyCapsule_SetName(capsule, b"used_dltensor")  # Kiln owns it now
        return Tensor(self, out.value)

    def from_array(self, array):
        return self.from_dlpack(array.__dlpack__())

    def call(self, op, *inputs, **attrs):
        values = (KilnValue * len(inputs))()
        for v, x in zip(values, inputs):
            if isinstance(x, Tensor):
                v.kind, v.tensor = KILN_VALUE_TENSOR, x.handle
            elif isinstance(x, (int, np.integer)):
                v.kind, v.i = KILN_VALUE_INT, int(x)
            else:
                v.kind, v.f = KILN_VALUE_FLOAT, float(x)
        arr = (KilnAttr * len(attrs))()
        keep = []
        for a, (name, x) in zip(arr, attrs.items()):
            a.name = name.encode()
            if isinstance(x, bool):
                a.kind, a.i = KILN_ATTR_BOOL, int(x)
            elif isinstance(x, int):
                a.kind, a.i = KILN_ATTR_INT, x
            elif isinstance(x, float):
                a.kind, a.f = KILN_ATTR_FLOAT, x
            else:
                ints = (ctypes.c_int64 * len(x))(*x)
                keep.append(ints)
                a.kind, a.count, a.ints = KILN_ATTR_INTS, len(x), ints
        out = ctypes.c_void_p()
        self.check(self.lib.kiln_call_by_name(op.encode(), values, len(inputs), arr, len(attrs), ctypes.byref(out)),
                   "kiln_call_by_name(%s)" % op)
        return Tensor(self, out.value)

    def stats_json(self):
        buf = ctypes.create_string_buffer(4096)
        self.check(self.lib.kiln_stats_json(buf, len(buf), None), "kiln_stats_json")
        return buf.value.decode()


class Tensor:
    def __init__(self, kiln, handle):
        self.kiln, self.handle = kiln, handle

    def data_pointer(self):
        p = ctypes.c_void_p()
        self.kiln.check(self.kiln.lib.kiln_tensor_data_pointer(self.handle, ctypes.byref(p)), "data_pointer")
        return p.value

    def __dlpack__(self, stream=None, **kwargs):
        out = ctypes.c_void_p()
        self.kiln.check(self.kiln.lib.kiln_tensor_to_dlpack(self.handle, ctypes.byref(out)), "kiln_tensor_to_dlpack")
        return _new_capsule(out.value)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def numpy(self):
        """A NumPy view of Kiln's buffer (no copy)."""
        return np.from_dlpack(self)

    def release(self):
        if self.handle:
            self.kiln.check(self.kiln.lib.kiln_tensor_release(self.handle), "kiln_tensor_release")
            self.handle = None

    def __del__(self):
        if self.handle:
            self.kiln.lib.kiln_tensor_release(self.handle)


# ---- PyCapsule helpers (Python's C API through ctypes) ------------------------

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype, _api.PyCapsule_GetPointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                                          ctypes.c_char_p]
_PyCapsule_SetName = _api.PyCapsule_SetName
_PyCapsule_SetName.restype, _PyCapsule_SetName.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype, _api.PyCapsule_New.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                                             _CapsuleDestructor]
# Raw-pointer variants for the destructor (the capsule is being destroyed).
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))


def _capsule_pointer(capsule, name):
    return _api.PyCapsule_GetPointer(capsule, name)


@_CapsuleDestructor
def _capsule_destructor(capsule):
    # Still named "dltensor": nobody consumed it, so its owner frees it here.
    if _IsValid(capsule, b"dltensor"):
        m = ctypes.cast(_GetPointerRaw(capsule, b"dltensor"), ctypes.POINTER(DLManagedTensor))
        m.contents.deleter(m)


def _new_capsule(managed_ptr):
    return _api.PyCapsule_New(managed_ptr, b"dltensor", _capsule_destructor)


# ---- the computation ------------------------------------------------------------


def numpy_layer(x, w, b):
    h = np.tanh(x @ w + b) * 2.0
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def kiln_layer(kiln, x, w, b):
    """The same computation, forwarded to Kiln op by op."""
    h = kiln.call("mul", kiln.call("tanh", kiln.call("add", kiln.call("matmul", x, w), b)), 2.0)
    return kiln.call("softmax", h, axis=-1)


def run_numpy(kiln):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32), dtype=np.float32)
    w = rng.standard_normal((32, 16), dtype=np.float32) * 0.3
    b = rng.standard_normal(16, dtype=np.float32)

    # Zero-copy in: Kiln reads NumPy's buffer.
    kx, kw, kb = kiln.from_array(x), kiln.from_array(w), kiln.from_array(b)
    assert kx.data_pointer() == x.ctypes.data, "import copied the data"
    # Zero-copy round trip: NumPy sees the same buffer again.
    assert kx.numpy().ctypes.data == x.ctypes.data, "export copied the data"

    # Op by op, as a framework forwarding its calls.
    ky = kiln_layer(kiln, kx, kw, kb)
    y = ky.numpy()  # zero-copy out: a view of Kiln's result buffer
    assert y.ctypes.data == ky.data_pointer(), "export copied the result"
    np.testing.assert_allclose(y, numpy_layer(x, w, b), rtol=1e-5, atol=1e-6)

    # Strided and offset inputs: a transposed slice of a bigger array.
    big = rng.standard_normal((40, 70), dtype=np.float32)
    xs = big[3:35, 2:66].T  # (64, 32), not contiguous, starts at an offset
    kxs = kiln.from_array(xs)
    assert kxs.data_pointer() == xs.ctypes.data
    np.testing.assert_allclose(kiln_layer(kiln, kxs, kw, kb).numpy(), numpy_layer(xs, w, b), rtol=1e-5, atol=1e-6)

    # Explicit capture: one kiln_function, called on new arrays through DLPack.
    inputs = (ctypes.c_void_p * 3)(kx.handle, kw.handle, kb.handle)
    kiln.check(kiln.lib.kiln_capture_begin(inputs, 3), "kiln_capture_begin")
    kout = kiln_layer(kiln, kx, kw, kb)
    fn = ctypes.c_void_p()
    outs = (ctypes.c_void_p * 1)(kout.handle)
    kiln.check(kiln.lib.kiln_capture_end(outs, 1, 0, ctypes.byref(fn)), "kiln_capture_end")
    for step in range(4):
        x2 = rng.standard_normal((64, 32), dtype=np.float32)
        caps = [x2.__dlpack__(), w.__dlpack__(), b.__dlpack__()]
        ptrs = (ctypes.c_void_p * 3)(*[_capsule_pointer(c, b"dltensor") for c in caps])
        out = (ctypes.c_void_p * 1)()
        kiln.check(kiln.lib.kiln_function_call_dlpack(fn, ptrs, 3, out, 1), "kiln_function_call_dlpack")
        for c in caps:
            _PyCapsule_SetName(c, b"used_dltensor")  # consumed by Kiln
        y2 = np.from_dlpack(_CapsuleHolder(_new_capsule(out[0])))
        np.testing.assert_allclose(y2, numpy_layer(x2, w, b), rtol=1e-5, atol=1e-6)
    kiln.check(kiln.lib.kiln_function_release(fn), "kiln_function_release")

    # Lifetimes: Kiln keeps NumPy's buffer alive after NumPy drops its array.
    keep = kiln.from_array(np.arange(6, dtype=np.float32) * 3)
    total = kiln.call("sum", keep)
    keep.release()
    assert float(total.numpy()) == 45.0
    print("numpy: OK (zero-copy in and out, strided input, captured function x4)")


class _CapsuleHolder:
    """Gives np.from_dlpack the __dlpack__ protocol around a ready capsule."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def run_torch(kiln):
    try:
        import torch
        import torch.utils.dlpack as tdl
    except Exception as e:  # not installed, or broken
        print("skip: torch is not available (%s); the torch.utils.dlpack part was skipped" % e.__class__.__name__)
        return
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 32, generator=g)
    w = torch.randn(32, 16, generator=g) * 0.3
    b = torch.randn(16, generator=g)
    kx, kw, kb = (kiln.from_dlpack(tdl.to_dlpack(t)) for t in (x, w, b))
    assert kx.data_pointer() == x.data_ptr(), "import from torch copied the data"
    ky = kiln_layer(kiln, kx, kw, kb)
    y = tdl.from_dlpack(ky.__dlpack__())
    assert y.data_ptr() == ky.data_pointer(), "export to torch copied the data"
    want = torch.softmax(torch.tanh(x @ w + b) * 2.0, dim=-1)
    assert torch.allclose(y, want, rtol=1e-5, atol=1e-6), (y - want).abs().max()
    print("torch: OK (zero-copy through torch.utils.dlpack)")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: framework_backend.py path/to/libkiln.so")
    kiln = Kiln(sys.argv[1])
    print("kiln ABI version %d, numpy %s" % (kiln.lib.kiln_abi_version(), np.__version__))
    run_numpy(kiln)
    run_torch(kiln)
    print("stats: " + kiln.stats_json())
    print("framework_backend.py: OK")


if __name__ == "__main__":
    main()
