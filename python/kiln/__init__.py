"""Kiln: a tensor JIT runtime with tiered compilation.

Ops on :class:`kiln.Tensor` record lazily into the calling thread's trace;
reading a value (``item``, ``tolist``, ``numpy``, DLPack) runs it. A trace that
repeats (one training step per :func:`kiln.step`) is compiled in the
background and then runs as fused native kernels.

Zero-copy exchange with NumPy, PyTorch and other DLPack producers:
:func:`kiln.from_dlpack` and ``Tensor.__dlpack__``. PyTorch users switch on the
backend with ``torch.compile(model, backend="kiln")`` (see
:mod:`kiln.torch_backend`).
"""

import builtins as _builtins

from kiln import _kiln
from kiln._kiln import (  # noqa: F401  (the public API)
    Device,
    DType,
    Error,
    Layout,
    Settings,
    Stats,
    Tensor,
    TraceTemplate,
    abs,
    adaptive_avg_pool2d,
    add,
    arange,
    argmax,
    argmin,
    avg_pool2d,
    broadcast_to,
    cast,
    ceil,
    clamp,
    concat,
    cumsum,
    conv2d,
    cos,
    cross_entropy,
    default_device,
    device_count,
    div,
    dtype_name,
    dtype_size,
    empty_cache,
    eq,
    erf,
    exp,
    expm1,
    flip,
    floor,
    fmod,
    full,
    gather,
    ge,
    gelu,
    gelu_exact,
    grad,
    grad_mode_enabled,
    gt,
    index_add,
    index_select,
    is_floating,
    isinf,
    isnan,
    layer_norm,
    le,
    leaky_relu,
    log,
    log1p,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    lt,
    matmul,
    max,
    max_pool2d,
    maximum,
    mean,
    min,
    minimum,
    mul,
    ne,
    neg,
    no_grad,
    one_hot,
    ones,
    ones_like,
    optim,
    permute,
    pow,
    prod,
    promote_types,
    rand,
    randn,
    reciprocal,
    relu,
    remainder,
    reset_stats,
    reshape,
    round,
    rsqrt,
    scalar_tensor,
    scatter_add,
    set_default_device,
    set_settings,
    settings,
    sigmoid,
    sign,
    sin,
    slice,
    softmax,
    sqrt,
    square,
    squeeze,
    stats,
    step,
    sub,
    sum,
    sync,
    tanh,
    tensor,
    transpose,
    unsqueeze,
    where,
    zeros,
    zeros_like,
)

# The extension's other public functions too (the op table's elementwise ops
# among them: python/src/OpBindings.cpp defines one per row), so a new op
# needs no edit here.
for _name in dir(_kiln):
    if not _name.startswith("_") and _name not in globals():
        globals()[_name] = getattr(_kiln, _name)

__version__ = "0.1.0"

# NumPy/PyTorch-style names for the dtypes.
float32 = DType.f32
float64 = DType.f64
float16 = DType.f16
bfloat16 = DType.bf16
int64 = DType.i64
int32 = DType.i32
int8 = DType.i8
uint8 = DType.u8
bool_ = DType.bool

_DL_CPU = 1  # DLPack's kDLCPU


def from_dlpack(x, *, device=None, copy=None):
    """A kiln.Tensor viewing the memory of a DLPack producer, without copying.

    ``x`` is an object with ``__dlpack__`` (NumPy >= 1.22, PyTorch, JAX, ...)
    or a DLPack capsule. DLPack 1.x versioned capsules are asked for first;
    producers that do not take ``max_version`` give plain ones. Strides and
    offsets are kept; read-only memory is fine (Kiln never writes memory it
    did not allocate). The producer must not change the memory while Kiln may
    read it.
    """
    if device is not None and str(device) not in ("cpu", "cpu:0"):
        raise Error(f"from_dlpack: device={device!r}: Kiln imports CPU memory only")
    if copy:
        raise Error("from_dlpack: copy=True is not supported; Kiln imports without copying "
                    "(use kiln.tensor(x.tolist()) for a copy)")
    if isinstance(x, Tensor):
        return x
    if not hasattr(x, "__dlpack__"):
        return _kiln._from_capsule(x)
    if hasattr(x, "__dlpack_device__"):
        dev_type, dev_id = x.__dlpack_device__()
        if int(dev_type) != _DL_CPU:
            raise Error(f"from_dlpack: the {type(x).__name__} lives on DLPack device type {int(dev_type)} "
                        f"(index {dev_id}); this Kiln build takes CPU memory only: copy it to the host first")
    try:
        capsule = x.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0
        capsule = x.__dlpack__()
    return _kiln._from_capsule(capsule)


def _numpy(self):
    """A read-only NumPy array viewing this tensor's memory (no copy)."""
    import numpy as np

    return np.from_dlpack(self)


def _normalize_index(key, rank):
    if not isinstance(key, tuple):
        key = (key,)
    if _builtins.sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = _builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > rank:
        raise IndexError(f"too many indices for a kiln.Tensor of rank {rank}")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([_py_slice(None)] * (rank - used))
        else:
            out.append(k)
    return out


_py_slice = _builtins.slice


def _getitem(self, key):
    """Basic indexing: ints, slices (any step), None and one Ellipsis."""
    parts = _normalize_index(key, self.ndim)
    x = self
    axis = 0
    for k in parts:
        if k is None:
            x = unsqueeze(x, axis)
            axis += 1
        elif isinstance(k, _py_slice):
            if k != _py_slice(None):
                x = slice(x, axis, k.start, k.stop, 1 if k.step is None else k.step)
            axis += 1
        elif isinstance(k, int) or hasattr(k, "__index__"):
            i = k.__index__()
            n = x.shape[axis]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of range for axis {axis} of extent {n}")
            x = squeeze(slice(x, axis, i, i + 1 if i != -1 else None, 1), [axis])
        else:
            raise TypeError(f"kiln.Tensor indices must be ints, slices, None or ..., not {type(k).__name__}")
    return x


def _as_method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


Tensor.numpy = _numpy
# Method forms of the ops: x.exp(), x.softmax(-1), x.matmul(y), ...
for _name in ("abs", "exp", "expm1", "log", "log1p", "erf", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu",
              "sin", "cos", "floor", "ceil", "round", "sign", "reciprocal", "square", "isnan", "isinf",
              "logical_not", "neg", "softmax", "log_softmax", "matmul", "argmax", "argmin", "prod", "clamp",
              "squeeze", "unsqueeze", "broadcast_to", "flip", "maximum", "minimum", "pow"):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _as_method(getattr(_kiln, _name)))
Tensor.__getitem__ = _getitem
Tensor.__array_priority__ = 1000  # NumPy defers binary operators to kiln.Tensor


def configure(**values):
    """Changes settings by name, e.g. ``kiln.configure(jit="sync", jit_threshold=1)``.

    Unknown names raise AttributeError; out-of-range values raise kiln.Error
    and change nothing."""
    s = settings()
    for name, value in values.items():
        if not hasattr(s, name):
            raise AttributeError(f"kiln.configure: no setting named {name!r}")
        setattr(s, name, value)
    set_settings(s)


def explain(model, *example_inputs, backward=True):
    """Compiles ``model`` with the Kiln PyTorch backend, runs it once on the
    example inputs (and its backward pass when the output needs gradients and
    ``backward`` is true), and reports how many ATen nodes ran on Kiln and
    why the others ran in PyTorch eager. Needs PyTorch."""
    from kiln.torch_backend import explain as _explain

    return _explain(model, *example_inputs, backward=backward)
