"""The Python API over Kiln's C++ API: tensors, ops, errors, autograd,
optimizers, trace boundaries, stats, settings and devices."""
import math

import pytest

import kiln


def test_tensor_from_nested_lists_and_back():
    x = kiln.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.shape == (2, 3)
    assert x.dtype == kiln.float32
    assert x.ndim == 2 and x.numel() == 6 and len(x) == 2
    assert x.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert kiln.tensor([1, 2]).dtype == kiln.int64
    assert kiln.tensor([True, False]).dtype == kiln.bool_
    assert kiln.tensor([True, False]).tolist() == [True, False]
    assert kiln.tensor([1, 2], dtype=kiln.float64).dtype == kiln.DType.f64
    with pytest.raises(kiln.Error, match="ragged"):
        kiln.tensor([[1, 2], [3]])


def test_integer_literals_are_exact():
    # Through a double, 2**53 + 1 lost its last bit and 2**63 - 1 overflowed.
    big = [2**53 + 1, 2**63 - 1, -(2**63), -(2**53) - 1]
    assert kiln.tensor(big).tolist() == big
    assert kiln.tensor(big, dtype=kiln.int64).tolist() == big
    assert kiln.tensor([2**31 - 1, -(2**31)], dtype=kiln.DType.i32).tolist() == [2**31 - 1, -(2**31)]
    # Floats given for an integer dtype truncate, as a cast does.
    assert kiln.tensor([1.9, -1.9], dtype=kiln.int64).tolist() == [1, -1]


def test_operators_promotion_and_laziness():
    a = kiln.tensor([1.0, 2.0, 3.0])
    b = kiln.tensor([10.0, 20.0, 30.0])
    y = (a + b) * 2 - 1 / a
    assert not y.is_materialized
    assert y.tolist() == pytest.approx([21.0, 43.5, 66.0 - 1 / 3])
    assert y.is_materialized
    assert (2 - a).tolist() == [1, 0, -1]
    assert (a ** 2).tolist() == [1, 4, 9]
    assert (-a).tolist() == [-1, -2, -3]
    assert (a > 1.5).tolist() == [False, True, True]
    assert (a == kiln.tensor([1.0, 0.0, 3.0])).tolist() == [True, False, True]
    # PyTorch's promotion: an int tensor times a Python float is f32.
    assert (kiln.tensor([1, 2]) * 2.5).dtype == kiln.float32
    assert (kiln.tensor([1, 2]) * 2).dtype == kiln.int64
    assert (kiln.arange(5) % 2).tolist() == [0, 1, 0, 1, 0]


def test_op_set():
    x = kiln.tensor([[1.0, -2.0], [3.0, -4.0]])
    assert kiln.relu(x).tolist() == [[1, 0], [3, 0]]
    assert kiln.abs(x).sum().item() == 10
    assert x.sum(axis=0).tolist() == [4, -6]
    assert x.mean(axis=1, keepdim=True).shape == (2, 1)
    assert kiln.max(x).item() == 3
    assert kiln.argmax(x, 1).tolist() == [0, 0]
    assert kiln.matmul(x, x.T).tolist() == [[5, 11], [11, 25]]
    assert (x @ kiln.ones([2, 1])).tolist() == [[-1], [-1]]
    s = kiln.softmax(kiln.tensor([[0.0, math.log(3.0)]]))
    assert s.tolist()[0] == pytest.approx([0.25, 0.75])
    assert kiln.exp(kiln.log_softmax(kiln.tensor([1.0, 2.0]))).sum().item() == pytest.approx(1.0)
    ln = kiln.layer_norm(kiln.tensor([[1.0, 2.0, 3.0]]))
    assert ln.tolist()[0] == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-3)
    assert kiln.gelu_exact(kiln.tensor([1.0])).item() == pytest.approx(0.8413447, rel=1e-5)
    assert kiln.where(x > 0, x, 0.0).tolist() == [[1, 0], [3, 0]]
    assert kiln.clamp(x, -1.0, 1.0).tolist() == [[1, -1], [1, -1]]
    assert kiln.clamp(x, min=0.0).tolist() == [[1, 0], [3, 0]]
    assert kiln.concat([x, x], 0).shape == (4, 2)
    assert kiln.reshape(kiln.arange(6), [2, -1]).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert kiln.arange(6).reshape(3, 2).shape == (3, 2)
    assert kiln.arange(6).reshape(2, 3).permute(1, 0).tolist() == [[0, 3], [1, 4], [2, 5]]
    assert kiln.one_hot(kiln.tensor([0, 2]), 3).tolist() == [[1, 0, 0], [0, 0, 1]]
    assert kiln.index_select(kiln.arange(5), 0, kiln.tensor([4, 0])).tolist() == [4, 0]
    assert kiln.index_add(kiln.zeros([3]), 0, kiln.tensor([2, 2]), kiln.tensor([1.0, 2.0])).tolist() == [0, 0, 3]
    assert kiln.cumsum(kiln.tensor([[1, 2, 3], [4, 5, 6]]), 1).tolist() == [[1, 3, 6], [4, 9, 15]]
    assert kiln.scatter_add(kiln.zeros([2, 3]), 1, kiln.tensor([[2, 2], [0, 1]]),
                            kiln.tensor([[1.0, 2.0], [3.0, 4.0]])).tolist() == [[0, 0, 3], [3, 4, 0]]
    assert kiln.cast(kiln.tensor([1.7]), kiln.int32).tolist() == [1]
    r = kiln.rand([1000], seed=7)
    assert 0.4 < r.mean().item() < 0.6
    assert kiln.zeros([2, 2], kiln.int32).tolist() == [[0, 0], [0, 0]]
    assert kiln.full([2], 7.5).tolist() == [7.5, 7.5]
    logits = kiln.tensor([[2.0, 0.0], [0.0, 2.0]])
    ce = kiln.cross_entropy(logits, kiln.tensor([0, 1])).item()
    assert ce == pytest.approx(math.log(1 + math.exp(-2)), rel=1e-5)


def test_indexing():
    x = kiln.arange(12).reshape(3, 4)
    assert x[1].tolist() == [4, 5, 6, 7]
    assert x[-1, 0].item() == 8
    assert x[:, 1].tolist() == [1, 5, 9]
    assert x[::2, ::-1].tolist() == [[3, 2, 1, 0], [11, 10, 9, 8]]
    assert x[None, ..., 2].shape == (1, 3)
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises(IndexError):
        x[0, 0, 0]


def test_errors_are_kiln_errors_with_the_message():
    a = kiln.ones([2, 3])
    b = kiln.ones([4, 5])
    with pytest.raises(kiln.Error) as e:
        kiln.matmul(a, b)
    assert "matmul" in str(e.value) and "[2, 3]" in str(e.value)
    assert issubclass(kiln.Error, RuntimeError)
    with pytest.raises(kiln.Error, match="item"):
        a.item()
    with pytest.raises(TypeError, match="kiln.Tensor or a number"):
        a + "x"
    # The failed call left everything intact.
    assert (a + 1).sum().item() == 12


def test_autograd_and_no_grad():
    w = kiln.tensor([1.0, 2.0, 3.0]).requires_grad_()
    assert w.requires_grad
    loss = (w * w).sum()
    loss.backward()
    assert w.grad.tolist() == [2, 4, 6]
    w.grad = None
    assert w.grad is None
    (gw,) = kiln.grad((w * 3.0).sum(), [w])
    assert gw.tolist() == [3, 3, 3]
    with kiln.no_grad():
        assert not kiln.grad_mode_enabled()
        y = w * 2
    assert kiln.grad_mode_enabled()
    assert not y.requires_grad


def test_gradients_of_gradients_with_create_graph():
    x = kiln.tensor([1.0, -2.0], dtype=kiln.float64).requires_grad_()
    (g,) = kiln.grad((x * x * x).sum(), [x], create_graph=True)
    assert g.requires_grad and g.tolist() == [3, 12]
    (h,) = kiln.grad(g.sum(), [x])
    assert h.tolist() == [6, -12]
    # backward(create_graph=True): .grad carries a graph of its own.
    y = kiln.tensor([2.0], dtype=kiln.float64).requires_grad_()
    (y * y * y).sum().backward(create_graph=True)
    assert y.grad.requires_grad
    (d2,) = kiln.grad(y.grad.sum(), [y])
    assert d2.tolist() == [12]
    # Without it the gradient is a constant.
    (c,) = kiln.grad((x * x).sum(), [x])
    assert not c.requires_grad


def test_optimizer_updates_python_parameters_in_place():
    w = kiln.tensor([1.0, -1.0])
    opt = kiln.optim.SGD([w], lr=0.5)
    assert w.requires_grad
    (w * w).sum().backward()
    opt.step()
    assert w.tolist() == [0.0, 0.0]  # w - 0.5 * 2w
    assert w.grad is None
    opt.lr = 0.1
    assert opt.lr == pytest.approx(0.1)
    adam = kiln.optim.Adam([w], lr=0.1, betas=(0.9, 0.99))
    (w - 1.0).square().sum().backward()
    adam.step()
    assert w.tolist() == pytest.approx([0.1, 0.1], rel=1e-4)
    kiln.optim.AdamW([w])  # default weight decay 0.01


def test_training_steps_tier_up():
    kiln.configure(jit="sync", jit_threshold=2)
    try:
        kiln.reset_stats()
        w = kiln.randn([8, 4], seed=1)
        x = kiln.randn([16, 8], seed=2)
        target = kiln.randn([16, 4], seed=3)
        opt = kiln.optim.SGD([w], lr=0.01)
        losses = []
        for _ in range(6):
            loss = ((x @ w - target) ** 2).mean()
            loss.backward()
            opt.step()
            kiln.step()
            losses.append(loss.item())
        s = kiln.stats()
        assert s.traces_recorded >= 6
        assert s.compiled_runs >= 1, str(s)
        assert losses[-1] < losses[0]
    finally:
        kiln.configure(jit="async")


def test_stats_settings_devices():
    s = kiln.stats()
    assert isinstance(s.traces_recorded, int)
    assert "traces_recorded" in str(s)
    # Every counter of the C++ Stats (KILN_STATS_FIELDS), the newer ones included.
    for name in ("urgent_compiles", "quick_compiles", "full_recompiles", "warm_start_bytes", "device_bytes_active",
                 "device_kernel_launches", "device_graph_launches", "device_copy_bytes"):
        assert isinstance(getattr(s, name), (int, float)), name
    cfg = kiln.settings()
    assert cfg.jit in ("async", "sync", "off", "replay")
    with pytest.raises(kiln.Error):
        kiln.configure(jit="sometimes")
    assert kiln.settings().jit == cfg.jit  # unchanged
    with pytest.raises(AttributeError):
        kiln.configure(no_such_setting=1)
    assert str(kiln.default_device()) == "cpu:0"
    assert kiln.Device("cpu") == "cpu"
    assert kiln.device_count(kiln.Device.Kind.CPU) == 1
    assert kiln.zeros([1], device="cpu").device == kiln.Device("cpu:0")
    with pytest.raises(kiln.Error):
        kiln.Device("tpu:0")
    kiln.sync()
    kiln.empty_cache()


def test_compiler_library_loads_from_the_package():
    """The JIT library is found next to libkiln without KILN_JIT_LIBRARY."""
    import os
    assert "KILN_JIT_LIBRARY" not in os.environ
    kiln.configure(jit="sync", jit_threshold=1)
    try:
        before = kiln.stats().compiles
        x = kiln.arange(64, dtype=kiln.float32)
        for i in range(2):
            y = (kiln.exp(x * 0.01) + 1.0).sum()
            kiln.step()
            y.item()
        assert kiln.stats().compiles > before
    finally:
        kiln.configure(jit="async", jit_threshold=2)


def test_trace_template_runs_captured_ops_on_new_inputs():
    x = kiln.tensor([[1.0, 2.0], [3.0, 4.0]])
    w = kiln.tensor([[0.5], [-1.0]])
    kiln.step()  # inputs are computed tensors
    y = kiln.relu(x @ w) + 1.0
    template = kiln.TraceTemplate.capture([x, w], [], [y, x])
    kiln.step()
    assert template.num_inputs == 2 and template.num_outputs == 2 and template.num_ops >= 3
    x2 = kiln.tensor([[4.0, 1.0], [-2.0, 0.0]])
    out, passed = template.run([x2, w])
    assert out.tolist() == [[2.0], [1.0]]  # relu([[1], [-1]]) + 1
    assert passed.tolist() == x2.tolist()
    with pytest.raises(kiln.Error, match="captured with f32"):
        template.run([kiln.tensor([1.0, 2.0]), w])
    other = kiln.tensor([1.0])
    kiln.step()
    z = x + other
    with pytest.raises(kiln.Error, match="neither an input nor a constant"):
        kiln.TraceTemplate.capture([x], [], [z])
    assert z.tolist() == [[2.0, 3.0], [4.0, 5.0]]  # nothing recorded was lost
