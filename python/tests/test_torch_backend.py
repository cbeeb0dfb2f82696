"""torch.compile(backend="kiln"): forward and backward against PyTorch eager
on an MLP, a small CNN and a transformer block; the eager fallback for nodes
Kiln does not offer; kiln.explain; compiled Kiln steps in a training loop."""
import copy
import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
from kiln import torch_backend

torch.manual_seed(0)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def run_both(model, *inputs, atol=1e-5, rtol=1e-4):
    """Forward + backward of `model` in eager and through the Kiln backend
    (on identical copies); checks outputs, input gradients and parameter
    gradients agree."""
    eager = copy.deepcopy(model)
    compiled_model = copy.deepcopy(model)
    compiled = torch.compile(compiled_model, backend="kiln")
    ins_e = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    ins_k = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out_e = eager(*ins_e)
    out_k = compiled(*ins_k)
    torch.testing.assert_close(out_k, out_e, atol=atol, rtol=rtol)
    grad_out = torch.randn_like(out_e)
    out_e.backward(grad_out)
    out_k.backward(grad_out)
    for a, b in zip(ins_k, ins_e):
        if b.grad is not None:
            torch.testing.assert_close(a.grad, b.grad, atol=atol, rtol=rtol)
    for (name, pk), (_, pe) in zip(compiled_model.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(pk.grad, pe.grad, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")
    return compiled


class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=32, d_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=-1)


class Block(nn.Module):
    """A pre-norm transformer block: layer_norm, attention matmuls, softmax, GELU."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.tanh(self.conv(x)).flatten(1))


def test_backend_is_registered_through_the_entry_point():
    assert "kiln" in torch._dynamo.list_backends(exclude_tags=())


def test_compiling_lowers_torch_threads_unless_asked_not_to():
    # Kiln runs compiled graphs on its own threads; PyTorch's spinning
    # OpenMP workers would take their cores (torch_backend._limit_torch_threads).
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        kept = torch.compile(lambda t: t * 2 + 1, backend=torch_backend.make_backend(torch_threads=None))
        assert kept(torch.ones(3)).tolist() == [3.0, 3.0, 3.0]
        assert torch.get_num_threads() == 2
        torch._dynamo.reset()
        lowered = torch.compile(lambda t: t * 3 + 1, backend="kiln")
        assert lowered(torch.ones(3)).tolist() == [4.0, 4.0, 4.0]
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_mlp_forward_backward_matches_eager():
    run_both(MLP(), torch.randn(16, 64))


def test_mlp_runs_entirely_on_kiln():
    report = kiln.explain(MLP(), torch.randn(8, 64))
    assert report.graphs == 2  # forward and backward
    assert report.eager_nodes == 0, str(report)
    assert report.kiln_nodes > 10
    assert "on Kiln" in str(report)


def test_transformer_block_forward_backward_matches_eager():
    run_both(Block(), torch.randn(2, 8, 32), atol=1e-4, rtol=1e-4)
    report = kiln.explain(Block(), torch.randn(2, 8, 32))
    assert report.kiln_nodes > 0
    # Everything in the block's forward and backward has a Kiln op.
    assert report.eager_nodes == 0, str(report)


def test_cnn_forward_backward_matches_eager():
    # conv2d and its backward (aten.convolution_backward) run on Kiln.
    run_both(CNN(), torch.randn(2, 1, 8, 8), atol=1e-4, rtol=1e-4)
    report = kiln.explain(CNN(), torch.randn(2, 1, 8, 8))
    assert report.ops["aten.convolution_backward.default"] == 1, str(report)
    assert report.eager_nodes == 0, str(report)


class WithSort(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.sort(F.relu(self.fc(x)), dim=1).values * 0.5


def test_fallback_runs_in_eager_logs_once_and_is_explained(caplog):
    # Kiln has no sort: that node runs in PyTorch eager, the rest on Kiln.
    with caplog.at_level(logging.WARNING, logger="kiln.torch"):
        compiled = run_both(WithSort(), torch.randn(4, 8))
        x = torch.randn(4, 8)
        for _ in range(3):
            compiled(x)
    sort_logs = [r for r in caplog.records if "aten.sort" in r.getMessage()]
    assert len(sort_logs) <= 1  # logged once per reason (maybe earlier in this process)
    report = kiln.explain(WithSort(), torch.randn(4, 8))
    assert report.eager_nodes >= 1
    assert any("aten.sort" in r for r in report.reasons), str(report)
    assert report.kiln_nodes > report.eager_nodes


def test_gather_and_scatter_add_of_many_indices_match_eager():
    # gather's gradient is a scatter_add; scatter_add's, a gather.
    class Spread(nn.Module):
        def forward(self, x, index):
            picked = torch.gather(x, 1, index)
            return torch.zeros(4, 16).scatter_add(1, index, picked * picked)

    run_both(Spread(), torch.randn(4, 16), torch.randint(0, 16, (4, 9)))
    report = kiln.explain(Spread(), torch.randn(4, 16, requires_grad=True), torch.randint(0, 16, (4, 9)))
    assert report.graphs == 2  # forward and backward
    assert report.eager_nodes == 0, str(report)


def test_language_model_with_a_padded_embedding_runs_entirely_on_kiln():
    # embedding_dense_backward (index_add), cross_entropy's gradient
    # (zeros_like, scatter of a value).
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16, padding_idx=0)
            self.ln = nn.LayerNorm(16)
            self.head = nn.Linear(16, 50)

        def forward(self, tokens, targets):
            return F.cross_entropy(self.head(self.ln(self.emb(tokens))).view(-1, 50), targets.view(-1))

    tokens = torch.randint(0, 50, (4, 8))
    tokens[0, :3] = 0  # padding: no gradient for row 0
    targets = torch.randint(0, 50, (4, 8))
    run_both(LM(), tokens, targets)
    report = kiln.explain(LM(), tokens, targets)
    assert report.graphs == 2
    assert report.eager_nodes == 0, str(report)


def test_reductions_with_indices_masks_and_fills_match_eager():
    class Mixed(nn.Module):
        def forward(self, x):
            top, where_top = x.max(dim=1)
            low, where_low = x.min(dim=0, keepdim=True)
            masked = x.masked_fill(x < 0, -2.0)
            filled = torch.zeros_like(x) + torch.ones_like(x) * torch.full_like(x, 0.5)
            return (top.sum() + low.sum() + x.std(dim=0).sum() + torch.flip(masked, [1])[:, 0].sum()
                    + (x[1:4] * x[1:4]).sum() + x[:, -2].sum() + (torch.cumsum(x, 1) ** 2).sum()
                    + filled.sum() + F.softplus(x).sum() + F.elu(x).sum()
                    + where_top.float().sum() + where_low.float().sum() + torch.argmin(x, 1).float().sum())

    x = torch.randn(5, 7)
    run_both(Mixed(), x)
    report = kiln.explain(Mixed(), x.clone().requires_grad_())
    assert report.eager_nodes == 0, str(report)


def test_inference_without_grad():
    model = MLP()
    compiled = torch.compile(model, backend="kiln")
    x = torch.randn(4, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)


def test_training_loop_matches_eager_and_tiers_up():
    kiln.configure(jit="sync", jit_threshold=2)
    try:
        torch.manual_seed(1)
        model_e = MLP()
        model_k = copy.deepcopy(model_e)
        compiled = torch.compile(model_k, backend="kiln")
        opt_e = torch.optim.SGD(model_e.parameters(), lr=0.1)
        opt_k = torch.optim.SGD(model_k.parameters(), lr=0.1)
        x = torch.randn(32, 64)
        y = torch.randint(0, 10, (32,))
        kiln.reset_stats()
        for _ in range(6):
            losses = []
            for model, opt in ((model_e, opt_e), (compiled, opt_k)):
                opt.zero_grad()
                loss = F.nll_loss(model(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            assert losses[1] == pytest.approx(losses[0], rel=1e-4)
        for pk, pe in zip(model_k.parameters(), model_e.parameters()):
            torch.testing.assert_close(pk, pe, atol=1e-5, rtol=1e-4)
        s = kiln.stats()
        assert s.compiled_runs >= 4, str(s)  # forward and backward traces ran compiled
    finally:
        kiln.configure(jit="async")


def test_zero_copy_inputs_into_the_graph():
    """A graph input reaches Kiln as a view of PyTorch's memory."""
    t = torch.randn(5, 3)
    k = torch_backend.to_kiln(t)
    assert kiln.Tensor.numpy(k).__array_interface__["data"][0] == t.data_ptr()
    back = torch_backend.to_torch(k * 1.0)
    assert torch.equal(back, t)


def test_dynamic_batch_sizes_stay_on_kiln(caplog):
    """After a second batch size Dynamo compiles a dynamic-shape graph: its
    shape arithmetic runs as Python and the tensor ops stay on Kiln."""
    model = MLP()
    compiled = torch.compile(model, backend="kiln")
    with caplog.at_level(logging.WARNING, logger="kiln.torch"):
        for batch in (4, 8, 16):
            x = torch.randn(batch, 64)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)
    assert not [r for r in caplog.records if "eager" in r.getMessage()]


@pytest.fixture(params=["exchange", "capsules"])
def crossing(request, monkeypatch):
    """Replays cross tensors through PyTorch's DLPack C exchange API when it
    has one (kiln._run_exchange), else capsule by capsule: both paths run."""
    if request.param == "exchange" and torch_backend._EXCHANGE_API is None:
        pytest.skip("this PyTorch has no __dlpack_c_exchange_api__")
    if request.param == "capsules":
        monkeypatch.setattr(torch_backend, "_EXCHANGE_API", None)
    return request.param


def test_graph_calls_replay_the_captured_trace(crossing):
    """After its first call a graph runs its captured trace (no Python walk);
    an input of another shape walks the graph again, with the same results."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        return torch.relu(x @ w).sum(dim=0), x

    x, w = torch.randn(4, 3), torch.randn(3, 5)
    graph = torch_backend.KilnGraph(make_fx(f, tracing_mode="fake")(x, w))
    first = graph([x, w])
    torch.testing.assert_close(first[0], f(x, w)[0])
    captured = graph.templates[()]
    assert isinstance(captured, torch_backend._Captured)
    assert captured.template.num_ops >= 3
    for _ in range(3):
        x2 = torch.randn(4, 3)
        walked = kiln.stats().traces_recorded
        out = graph([x2, w])
        assert kiln.stats().traces_recorded == walked + 1  # one trace a call, as when walking
        torch.testing.assert_close(out[0], f(x2, w)[0])
        assert out[1] is x2  # an input handed back is the caller's tensor
    assert graph.templates[()] is captured
    x3 = torch.randn(6, 3)
    out = graph([x3, w])
    torch.testing.assert_close(out[0], f(x3, w)[0])
    assert graph.templates[()] is None  # walked from now on for these inputs


def test_views_of_inputs_are_handed_back_as_views(crossing):
    """A graph output that is a view of an input (AOTAutograd's forward saves
    W.t() for the backward) comes back from a replay as a PyTorch view of
    that input, not as a copy that Kiln's kernel writes; the captured trace
    does not produce it."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        wt = w.t()
        return x @ wt, wt, w.view(-1)[1:4], w.clone()

    x, w = torch.randn(4, 3), torch.randn(5, 3)
    graph = torch_backend.KilnGraph(make_fx(f, tracing_mode="fake")(x, w))
    first = graph([x, w])  # walks and captures
    assert first[3].data_ptr() != w.data_ptr() and torch.equal(first[3], w)
    kinds = [kind for kind, _ in graph.templates[()].outputs]
    assert kinds == ["kiln", "view", "view", "copy"]  # a clone of an input is new memory
    for _ in range(2):
        x2, w2 = torch.randn(4, 3), torch.randn(5, 3, requires_grad=True)  # a parameter crosses too
        y, wt, part, copied = graph([x2, w2])
        w2 = w2.detach()
        torch.testing.assert_close(y, x2 @ w2.t())
        y.add_(1)  # the caller owns the outputs (AOTAutograd accumulates into them)
        torch.testing.assert_close(y, x2 @ w2.t() + 1)
        assert wt.data_ptr() == w2.data_ptr() and wt.stride() == (1, 3) and torch.equal(wt, w2.t())
        assert part.data_ptr() == w2.data_ptr() + 4 and torch.equal(part, w2.view(-1)[1:4])
        assert copied.data_ptr() != w2.data_ptr() and torch.equal(copied, w2)


def test_outputs_written_in_place_leave_constants_and_each_other_alone(crossing):
    """The caller owns a graph's outputs and may write them. A clone of a
    tensor constant is the constant itself to Kiln (values are immutable),
    and a view of it shares its memory: handed over as they were, writing
    them changed the constant for every later call (walked and replayed)."""

    def f(x):
        c = torch.tensor([1.0, 2.0, 3.0])
        y = x * 2
        return y, c.clone(), c.view(3, 1), y

    compiled = torch.compile(f, backend=torch_backend.make_backend())
    x = torch.ones(3)
    for _ in range(4):  # the first calls walk the graph, the later ones replay it
        y, cloned, viewed, again = compiled(x)
        torch.testing.assert_close(cloned, torch.tensor([1.0, 2.0, 3.0]))
        torch.testing.assert_close(viewed.flatten(), torch.tensor([1.0, 2.0, 3.0]))
        assert cloned.data_ptr() != viewed.data_ptr()
        torch.testing.assert_close(again, x * 2)
        cloned.add_(100)
        viewed.mul_(-1)
        y.add_(1)


def test_custom_op_mlp_in_an_eager_model():
    """torch.ops.kiln.mlp: one fused Kiln op (forward and backward) inside eager
    PyTorch, with a fake kernel for tracing."""
    import kiln.torch_ops  # noqa: F401  (registers torch.ops.kiln.*)

    fc1, fc2 = nn.Linear(16, 32), nn.Linear(32, 4)
    x = torch.randn(8, 16, requires_grad=True)
    args = (x, fc1.weight, fc1.bias, fc2.weight, fc2.bias)
    y = torch.ops.kiln.mlp(*args)
    ref = fc2(F.relu(fc1(x)))
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-4)
    g = torch.randn_like(ref)
    got = torch.autograd.grad(y, args, g)
    want = torch.autograd.grad(ref, args, g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fake = torch.ops.kiln.mlp(torch.empty(3, 16), torch.empty(32, 16), torch.empty(32), torch.empty(4, 32),
                                  torch.empty(4))
    assert fake.shape == (3, 4)
    torch.library.opcheck(torch.ops.kiln.mlp.default, [t.detach().requires_grad_() for t in args])


def test_clone_of_an_input_survives_the_inputs_mutation():
    """A clone is Kiln's value itself; the graph's input mutation (an eager
    copy_ into the caller's tensor) changed it before it was returned."""
    def f(x):
        y = x.clone()
        z = x * 2
        x.add_(1)
        return y, z

    x = torch.arange(3.0)
    y, z = torch.compile(f, backend="kiln")(x)
    torch.testing.assert_close(x, torch.tensor([1.0, 2.0, 3.0]))
    torch.testing.assert_close(y, torch.tensor([0.0, 1.0, 2.0]))
    torch.testing.assert_close(z, torch.tensor([0.0, 2.0, 4.0]))

    def g(x):  # a view of the clone: Kiln's is a view of the input's memory
        y = x.clone().t()
        x.mul_(10)
        return y

    torch._dynamo.reset()
    x = torch.arange(6.0).view(2, 3)
    y = torch.compile(g, backend="kiln")(x)
    torch.testing.assert_close(y, torch.arange(6.0).view(2, 3).t())
    torch.testing.assert_close(x, torch.arange(6.0).view(2, 3) * 10)


def test_reductions_with_a_dtype_accumulate_in_it():
    x = torch.full((100,), 1000.0, dtype=torch.float16)
    out = torch.compile(lambda x: torch.sum(x, 0, dtype=torch.float32), backend="kiln")(x)
    assert out.dtype == torch.float32 and out.item() == 100000.0
    b = torch.tensor([1.0, 2.0**-8], dtype=torch.bfloat16)
    out = torch.compile(lambda b: b.mean(dtype=torch.float32), backend="kiln")(b)
    assert out.item() == pytest.approx(0.501953125)
    # An integer dtype: torch's result has it (Kiln sums integers in i64).
    i = torch.tensor([[2**31 - 1, 1], [5, 6]], dtype=torch.int32)
    for f in (lambda i: torch.sum(i, 1, dtype=torch.int32), lambda i: torch.cumsum(i, 1, dtype=torch.int32)):
        torch._dynamo.reset()
        out = torch.compile(f, backend="kiln")(i)
        assert out.dtype == torch.int32 and torch.equal(out, f(i))


def test_rounding_divisions_match_torch():
    a, b = torch.tensor([7, -7, 2**40 + 1]), torch.tensor([2, 2, 1])
    for mode in ("floor", "trunc"):
        torch._dynamo.reset()
        out = torch.compile(lambda a, b: torch.div(a, b, rounding_mode=mode), backend="kiln")(a, b)
        want = torch.div(a, b, rounding_mode=mode)
        assert out.dtype == want.dtype and out.tolist() == want.tolist()
    x, y = torch.tensor([1.0, -7.5, 7.5]), torch.tensor([0.1, 2.0, -2.0])
    for mode in ("floor", "trunc"):
        torch._dynamo.reset()
        out = torch.compile(lambda x, y: torch.div(x, y, rounding_mode=mode), backend="kiln")(x, y)
        torch.testing.assert_close(out, torch.div(x, y, rounding_mode=mode))


def test_an_integer_tensor_to_a_float_power_is_a_float():
    x = torch.tensor([200], dtype=torch.uint8)
    out = torch.compile(lambda x: x ** 2.0, backend="kiln")(x)
    assert out.dtype == torch.float32 and out.item() == 40000.0


def test_variance_without_degrees_of_freedom_is_nan():
    x = torch.randn(1, 4)
    out = torch.compile(lambda x: torch.var(x, dim=0), backend="kiln")(x)
    assert torch.isnan(out).all()
