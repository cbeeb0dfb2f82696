"""DLPack both ways, without copies: NumPy (>= 2, versioned capsules),
PyTorch and JAX; strides, offsets, dtypes, read-only flags, and memory freed
on one side while the other still holds it."""
import ctypes
import gc

import numpy as np
import pytest
import torch

import kiln


def address(k):
    return np.from_dlpack(k).__array_interface__["data"][0]


def test_numpy_to_kiln_is_zero_copy_and_keeps_the_array_alive():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    ptr = a.__array_interface__["data"][0]
    k = kiln.from_dlpack(a)
    assert k.shape == (3, 4) and k.dtype == kiln.float32
    assert address(k) == ptr
    del a
    gc.collect()
    # Kiln holds the producer's memory: NumPy's array is gone, the data is not.
    assert (k * 2).sum().item() == 132
    assert k.tolist()[2] == [8, 9, 10, 11]


def test_kiln_to_numpy_versioned_is_read_only_and_zero_copy():
    k = kiln.arange(6, dtype=kiln.float32) * 3.0
    cap = k.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    cap_plain = k.__dlpack__()
    assert '"dltensor"' in repr(cap_plain)
    a = np.from_dlpack(k)  # NumPy 2 asks for max_version (1, x)
    assert not a.flags.writeable  # Kiln's values are immutable
    assert a.tolist() == [0, 3, 6, 9, 12, 15]
    b = np.from_dlpack(k)
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    del k
    gc.collect()
    # The array keeps Kiln's buffer alive.
    assert a.sum() == 45
    # copy=True gives a private, writable buffer.
    c = np.from_dlpack(kiln.ones([2]), copy=True)
    c[0] = 5
    assert c.tolist() == [5, 1]


def test_numpy_strides_offsets_and_negative_strides():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = base[1:, ::2]  # offset and a stride of 2 elements
    k = kiln.from_dlpack(view)
    assert k.shape == (3, 3)
    assert k.tolist() == view.tolist()
    t = kiln.from_dlpack(base.T)  # transposed strides
    assert t.strides() == (1, 6)
    assert t.tolist() == base.T.tolist()
    r = kiln.from_dlpack(base[::-1, 1])  # negative stride
    assert r.tolist() == base[::-1, 1].tolist()
    bc = kiln.from_dlpack(np.broadcast_to(np.float32(2.5), (2, 3)))  # zero strides
    assert bc.tolist() == [[2.5] * 3] * 2


@pytest.mark.parametrize("np_dtype,kiln_dtype", [
    (np.float32, kiln.float32), (np.float64, kiln.float64), (np.float16, kiln.float16),
    (np.int64, kiln.int64), (np.int32, kiln.int32), (np.int8, kiln.int8), (np.uint8, kiln.uint8),
    (np.bool_, kiln.bool_)])
def test_dtypes_round_trip(np_dtype, kiln_dtype):
    a = (np.arange(6) % 3).astype(np_dtype).reshape(2, 3)
    k = kiln.from_dlpack(a)
    assert k.dtype == kiln_dtype
    back = np.from_dlpack(k)
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_unsupported_dtype_and_read_only_input():
    with pytest.raises(kiln.Error, match="no Kiln dtype"):
        kiln.from_dlpack(np.zeros(3, dtype=np.complex64))
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False  # exported with the read-only flag; Kiln never writes it
    k = kiln.from_dlpack(a)
    assert (k + 1).tolist() == [1, 2, 3, 4]
    assert a.tolist() == [0, 1, 2, 3]


def test_a_capsule_is_consumed_once():
    cap = np.ones(3, dtype=np.float32).__dlpack__()
    kiln.from_dlpack(cap)
    with pytest.raises(ValueError, match="consumed once"):
        kiln.from_dlpack(cap)
    # An unconsumed capsule frees its tensor when it goes away.
    kiln.ones([3]).__dlpack__(max_version=(1, 0))
    kiln.ones([3]).__dlpack__()
    gc.collect()


def test_torch_to_kiln_zero_copy_with_offset_and_strides():
    t = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    v = t[1:, 1::2]
    k = kiln.from_dlpack(v)
    assert k.shape == (3, 2)
    assert k.tolist() == v.tolist()
    assert address(k) == v.data_ptr()
    kt = kiln.from_dlpack(t.t())
    assert kt.tolist() == t.t().tolist()


def test_torch_tensor_freed_while_kiln_holds_it():
    t = torch.full((1000,), 3.0)
    k = kiln.from_dlpack(t)
    y = k * 2.0  # pending: the trace still needs t's memory
    del t
    gc.collect()
    assert y.sum().item() == 6000.0
    assert k.sum().item() == 3000.0


def test_kiln_to_torch_zero_copy_and_kiln_freed_first():
    k = kiln.arange(8, dtype=kiln.float32).reshape(2, 4).transpose(0, 1)
    t = torch.from_dlpack(k)
    assert t.shape == (4, 2)
    assert t.tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert t.data_ptr() == address(k)
    del k
    gc.collect()
    assert t.sum().item() == 28.0  # the torch tensor keeps Kiln's buffer
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.bool, torch.uint8):
        src = (torch.arange(6) % 2).to(dtype)
        back = torch.from_dlpack(kiln.from_dlpack(src))
        assert back.dtype == dtype and torch.equal(back, src)


def test_jax_arrays_both_ways():
    """JAX (its CPU arrays export plain "dltensor" capsules) into Kiln without
    a copy, and Kiln's results into JAX, for f32, bf16 and i32."""
    import jax
    import jax.numpy as jnp

    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    k = kiln.from_dlpack(x)
    assert k.shape == (3, 4) and k.tolist() == x.tolist()
    assert address(k) == x.unsafe_buffer_pointer()
    y = jax.dlpack.from_dlpack(k * 2.0 + 1.0)
    assert isinstance(y, jax.Array) and y.tolist() == (x * 2.0 + 1.0).tolist()
    for dtype, kiln_dtype in ((jnp.bfloat16, kiln.bfloat16), (jnp.int32, kiln.int32)):
        src = (jnp.arange(6) % 3).astype(dtype)
        kd = kiln.from_dlpack(src)
        assert kd.dtype == kiln_dtype
        back = jax.dlpack.from_dlpack(kd + kd)
        assert back.dtype == dtype and back.tolist() == (src + src).tolist()
    del x
    gc.collect()
    assert k.sum().item() == 66.0  # Kiln keeps JAX's buffer alive


def test_kiln_tensor_read_by_ctypes_address_is_stable():
    k = kiln.tensor([1.5, 2.5], dtype=kiln.float64)
    a = np.from_dlpack(k)
    ptr = a.__array_interface__["data"][0]
    assert ctypes.c_double.from_address(ptr).value == 1.5


def test_device_checks():
    assert kiln.ones([1]).__dlpack_device__() == (1, 0)
    with pytest.raises(ValueError, match="stream"):
        kiln.ones([1]).__dlpack__(stream=5)

    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("not reached")

    with pytest.raises(kiln.Error, match="device type 2"):
        kiln.from_dlpack(OnGpu())
