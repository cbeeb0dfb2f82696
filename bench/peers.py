#!/usr/bin/env python3
"""Python peers of the Kiln benchmark suite (issue 8).

    peers.py --system torch1|numpy|jax|onnxruntime|torch2|iree|tinygrad --out FILE [--quick] [--reps N]

Writes {"system": ..., "version": ..., "rows": {workload: [seconds per
iteration, one per repetition]}, "errors": {workload: message}} to FILE.
Every system runs with 2 threads (the machine's cores). Each repetition
times a batch of iterations lasting at least --min-time seconds, after a
warm-up (which also includes jax.jit / torch.compile compilation).
"""
import argparse
import json
import os
import sys
import time
import traceback

BIG = 1 << 24
ROWS, COLS = 4096, 1024
THREADS = 2


def timeit(fn, reps, min_time, warm=2):
    for _ in range(warm):
        fn()
    # Iterations per repetition: enough for min_time.
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-9)
    iters = max(1, int(min_time / one))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t0) / iters)
    return samples


def inputs(np):
    rng = np.random.default_rng(0)
    return {
        "x": rng.uniform(-2, 2, BIG).astype(np.float32),
        "rows": rng.uniform(-2, 2, (ROWS, COLS)).astype(np.float32),
        "a1024": rng.uniform(-1, 1, (1024, 1024)).astype(np.float32),
        "b1024": rng.uniform(-1, 1, (1024, 1024)).astype(np.float32),
        "bias": rng.uniform(-1, 1, 1024).astype(np.float32),
        "a4096": rng.uniform(-1, 1, (4096, 1024)).astype(np.float32),
        "b4096": rng.uniform(-1, 1, (1024, 4096)).astype(np.float32),
        "mlp_x": rng.standard_normal((256, 784)).astype(np.float32),
        "mlp_y": rng.integers(0, 10, 256).astype(np.int64),
    }


# ----------------------------------------------------------------- numpy
def numpy_workloads(quick):
    import numpy as np
    d = inputs(np)
    x, r = d["x"], d["rows"]

    def sigmoid(v):
        return 1.0 / (1.0 + np.exp(-v))

    def softmax():
        e = np.exp(r - r.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def layernorm():
        m = r.mean(axis=1, keepdims=True)
        v = r.var(axis=1, keepdims=True)
        return (r - m) / np.sqrt(v + 1e-5)

    return np.__version__, {
        "chain8": lambda: np.tanh((x * np.float32(1.5) + np.float32(0.5)) * sigmoid(x)) + x * x,
        "softmax": softmax,
        "layernorm": layernorm,
        "sgemm_1024": lambda: d["a1024"] @ d["b1024"],
        "sgemm_4096x4096x1024": lambda: d["a4096"] @ d["b4096"],
        "mm_bias_relu": lambda: np.maximum(d["a1024"] @ d["b1024"] + d["bias"], 0),
    }


# ----------------------------------------------------------------- torch (eager 1.13 or compile 2.x)
def torch_workloads(quick, compiled):
    import numpy as np
    import torch
    torch.set_num_threads(THREADS)
    d = {k: torch.from_numpy(v) for k, v in inputs(np).items()}
    x, r = d["x"], d["rows"]
    wrap = torch.compile if compiled else (lambda f: f)

    chain = wrap(lambda v: torch.tanh((v * 1.5 + 0.5) * torch.sigmoid(v)) + v * v)
    softmax = wrap(lambda v: torch.softmax(v, dim=1))
    layernorm = wrap(lambda v: torch.nn.functional.layer_norm(v, (COLS,)))
    mm = lambda a, b: a @ b  # noqa: E731 (ATen's BLAS call either way)
    mbr = wrap(lambda a, b, c: torch.relu(a @ b + c))

    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fwd = wrap(lambda xb, yb: torch.nn.functional.cross_entropy(model(xb), yb))

    # ResNet basic block forward (eval): two 3x3 convs, batch norm, ReLU,
    # identity shortcut; batch 16, 64 channels, 56x56.
    tnn = torch.nn
    block = tnn.ModuleDict({"c1": tnn.Conv2d(64, 64, 3, padding=1, bias=False), "n1": tnn.BatchNorm2d(64),
                            "c2": tnn.Conv2d(64, 64, 3, padding=1, bias=False), "n2": tnn.BatchNorm2d(64)}).eval()
    rx = torch.randn(16, 64, 56, 56)
    rblock = wrap(lambda v: torch.relu(block["n2"](block["c2"](torch.relu(block["n1"](block["c1"](v))))) + v))
    tblock = tnn.ModuleDict({"c1": tnn.Conv2d(64, 64, 3, padding=1, bias=False), "n1": tnn.BatchNorm2d(64),
                             "c2": tnn.Conv2d(64, 64, 3, padding=1, bias=False), "n2": tnn.BatchNorm2d(64)}).train()
    topt = torch.optim.SGD(tblock.parameters(), lr=1e-3)
    tfwd = wrap(lambda v: torch.relu(tblock["n2"](tblock["c2"](torch.relu(tblock["n1"](tblock["c1"](v))))) + v).mean())

    def resnet_train():
        topt.zero_grad(set_to_none=True)
        loss = tfwd(rx)
        loss.backward()
        topt.step()
        return loss

    transformer_step = transformer(torch, wrap)

    def mlp():
        opt.zero_grad(set_to_none=True)
        loss = fwd(d["mlp_x"], d["mlp_y"])
        loss.backward()
        opt.step()
        return loss

    with torch.no_grad():
        rows = {
            "chain8": lambda: chain(x),
            "softmax": lambda: softmax(r),
            "layernorm": lambda: layernorm(r),
            "mm_bias_relu": lambda: mbr(d["a1024"], d["b1024"], d["bias"]),
            "resnet_block_fwd": lambda: rblock(rx),
        }
    if not compiled:
        rows["sgemm_1024"] = lambda: mm(d["a1024"], d["b1024"])
        rows["sgemm_4096x4096x1024"] = lambda: mm(d["a4096"], d["b4096"])
    # bf16 GEMM (ATen's oneDNN/mkldnn call, AMX or AVX-512 BF16 where the CPU has them), eager in both.
    # Without those units ATen falls back to a loop (on a Zen 3: 2.3 s per 1024^3 call, 90 s per
    # 4096x4096x1024 one, most of a bench run), which says nothing about a bf16 GEMM: skipped.
    if cpu_has_bf16_units():
        h = {k: d[k].to(torch.bfloat16) for k in ("a1024", "b1024", "a4096", "b4096")}
        rows["gemm_bf16_1024"] = lambda: mm(h["a1024"], h["b1024"])
        rows["gemm_bf16_4096x4096x1024"] = lambda: mm(h["a4096"], h["b4096"])
    else:
        for name in ("gemm_bf16_1024", "gemm_bf16_4096x4096x1024"):
            rows[name] = skipped("skipped: this CPU has no bf16 units (AVX512-BF16, AMX), "
                                 "where ATen's bf16 matmul is a slow fallback loop")
    nograd = {k: (lambda f: (lambda: _nograd(torch, f)))(f) for k, f in rows.items()}
    nograd["mlp_train_step"] = mlp
    nograd["resnet_block_train_step"] = resnet_train
    nograd["transformer_train_step"] = transformer_step
    if not compiled:
        # Per-op dispatch on 1-element tensors (eager), for scale next to Kiln's record+run.
        t = torch.ones(1)

        def tiny():
            y = t
            for _ in range(64):
                y = y * 1.0001
            return y
        nograd["record_run_tiny_op"] = (tiny, 64)
    return torch.__version__, nograd


def transformer(torch, wrap):
    """bench_transformer.cpp's GPT-style block training step in PyTorch: token embedding plus learned positions,
    layer_norm, causal attention through batched matmuls, softmax and where, a GELU MLP, a tied LM head,
    cross-entropy and Adam (lr 3e-4); batch 8, 64 tokens, width 128, 4 heads, vocabulary 256. Each step draws a
    fresh batch of tokens on the host and reads the loss, as Kiln's loop does."""
    B, T, C, H, V = 8, 64, 128, 4, 256
    D = C // H
    gen = torch.Generator().manual_seed(0)

    def param(*shape, std=None):
        t = torch.randn(*shape, generator=gen) * std if std else torch.zeros(*shape)
        return torch.nn.Parameter(t)
    wte, wpe = param(V, C, std=0.02), param(T, C, std=0.02)
    wqkv, bqkv = param(C, 3 * C, std=0.02), param(3 * C)
    wo, bo = param(C, C, std=0.02), param(C)
    w1, b1 = param(C, 4 * C, std=0.02), param(4 * C)
    w2, b2 = param(4 * C, C, std=0.02), param(C)
    lns = [(torch.nn.Parameter(torch.ones(C)), param(C)) for _ in range(3)]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    F = torch.nn.functional

    def loss_fn(inp, tgt):
        x = wte[inp] + wpe
        qkv = F.layer_norm(x, (C,), *lns[0]) @ wqkv + bqkv
        q, k, v = (t.reshape(B, T, H, D).permute(0, 2, 1, 3) for t in qkv.split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / D ** 0.5)
        att = torch.where(causal, att, torch.tensor(-1e9)).softmax(-1)
        y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + (y @ wo + bo)
        x = x + (F.gelu(F.layer_norm(x, (C,), *lns[1]) @ w1 + b1) @ w2 + b2)
        logits = F.layer_norm(x, (C,), *lns[2]) @ wte.t()
        return F.cross_entropy(logits.reshape(B * T, V), tgt.reshape(B * T))
    f = wrap(loss_fn)
    params = [wte, wpe, wqkv, bqkv, wo, bo, w1, b1, w2, b2] + [p for ln in lns for p in ln]
    opt = torch.optim.Adam(params, lr=3e-4)

    def step():
        tokens = torch.randint(0, V, (B, T + 1), generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = f(tokens[:, :T], tokens[:, 1:])
        loss.backward()
        opt.step()
        return loss.item()
    return step


def _nograd(torch, f):
    with torch.no_grad():
        return f()


# ----------------------------------------------------------------- jax
def jax_programs():
    """The workloads as plain JAX functions with their arguments, shared by the jax.jit peer and the IREE peer
    (which compiles the same functions' StableHLO). mlp_train_step is (step, state, xb, yb): step maps the
    flattened state (parameters, Adam moments, step count) and the batch to the next flattened state."""
    import numpy as np
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_platforms", "cpu")
    d = {k: jnp.asarray(v) for k, v in inputs(np).items()}

    def ln(v):
        m = v.mean(axis=1, keepdims=True)
        var = ((v - m) ** 2).mean(axis=1, keepdims=True)
        return (v - m) * jax.lax.rsqrt(var + 1e-5)

    programs = {
        "chain8": (lambda v: jnp.tanh((v * 1.5 + 0.5) * jax.nn.sigmoid(v)) + v * v, (d["x"],)),
        "softmax": (lambda v: jax.nn.softmax(v, axis=1), (d["rows"],)),
        "layernorm": (ln, (d["rows"],)),
        "sgemm_1024": (lambda a, b: a @ b, (d["a1024"], d["b1024"])),
        "sgemm_4096x4096x1024": (lambda a, b: a @ b, (d["a4096"], d["b4096"])),
        "mm_bias_relu": (lambda a, b, c: jax.nn.relu(a @ b + c), (d["a1024"], d["b1024"], d["bias"])),
    }

    key = jax.random.PRNGKey(0)
    ks = jax.random.split(key, 3)
    params = []
    for k, (i, o) in zip(ks, [(784, 512), (512, 512), (512, 10)]):
        params.append((jax.random.normal(k, (i, o)) * np.sqrt(2.0 / i), jnp.zeros(o)))

    def loss_fn(p, xb, yb):
        h = xb
        for j, (w, b) in enumerate(p):
            h = h @ w + b
            if j < 2:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h)
        return -jnp.take_along_axis(logp, yb[:, None], axis=1).mean()

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state, treedef = jax.tree_util.tree_flatten((params, zeros, zeros, jnp.float32(0)))

    def step(*flat):
        p, m, v, t = jax.tree_util.tree_unflatten(treedef, flat[:-2])
        xb, yb = flat[-2:]
        g = jax.grad(loss_fn)(p, xb, yb)
        t = t + 1
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        p = jax.tree_util.tree_map(lambda w, a, b: w - 1e-3 * (a / c1) / (jnp.sqrt(b / c2) + 1e-8), p, m, v)
        return tuple(jax.tree_util.tree_leaves((p, m, v, t)))

    mlp = (step, state, d["mlp_x"], d["mlp_y"].astype(jnp.int32))
    return jax, programs, mlp


def jax_workloads(quick):
    jax, programs, (step, state, xb, yb) = jax_programs()
    rows = {}
    for name, (f, args) in programs.items():
        jf = jax.jit(f)
        rows[name] = (lambda jf, args: lambda: jax.block_until_ready(jf(*args)))(jf, args)
    jstep = jax.jit(step)
    st = {"s": state}

    def mlp():
        st["s"] = jstep(*st["s"], xb, yb)
        return jax.block_until_ready(st["s"][-1])
    rows["mlp_train_step"] = mlp
    return jax.__version__, rows


# ----------------------------------------------------------------- IREE
def iree_workloads(quick):
    """IREE, the MLIR-based system closest to Kiln: the JAX functions above exported as StableHLO, compiled by
    iree-base-compiler for the host CPU (llvm-cpu, --iree-llvmcpu-target-cpu=host, IREE's default pipeline) and
    run by iree-base-runtime's local-task driver on 2 worker threads. Inputs live on the device before timing."""
    import numpy as np
    import iree.compiler as ic
    import iree.runtime as rt
    jax, programs, (step, state, xb, yb) = jax_programs()
    rt.flags.parse_flags(f"--task_topology_group_count={THREADS}")
    config = rt.Config("local-task")

    def compile_fn(f, args):
        hlo = jax.jit(f).lower(*args).as_text()
        vmfb = ic.compile_str(hlo, target_backends=["llvm-cpu"], input_type="stablehlo",
                              extra_args=["--iree-llvmcpu-target-cpu=host"])
        ctx = rt.SystemContext(config=config)
        module = rt.VmModule.copy_buffer(ctx.instance, vmfb)
        ctx.add_vm_module(module)
        fn = ctx.modules[module.name]["main"]
        dev_args = [rt.asdevicearray(config.device, np.asarray(a)) for a in args]
        return fn, dev_args

    rows = {}
    for name, (f, args) in programs.items():
        fn, dev_args = compile_fn(f, args)
        want = np.asarray(jax.jit(f)(*args))
        got = fn(*dev_args).to_host()
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3):  # a wrong answer is not a timing
            raise RuntimeError(f"IREE's {name} differs from jax.jit's")
        # `main` is IREE's synchronous wrapper: it returns once the results are ready.
        rows[name] = (lambda fn, a: lambda: fn(*a))(fn, dev_args)
    fstep, dev_state = compile_fn(step, tuple(state) + (xb, yb))
    st = {"s": dev_state[:-2]}
    dxb, dyb = dev_state[-2:]

    def mlp():
        st["s"] = list(fstep(*st["s"], dxb, dyb))
        return st["s"][-1]
    rows["mlp_train_step"] = mlp
    from iree.compiler import version
    return version.VERSION, rows


# ----------------------------------------------------------------- tinygrad
def tinygrad_workloads(quick):
    """tinygrad on its CPU device (C kernels built by clang, its default thread count = the machine's cores),
    each workload a TinyJit function, timed with a device synchronise per call."""
    import numpy as np
    from tinygrad import Tensor, TinyJit, Device, nn
    from tinygrad.helpers import Context
    from importlib.metadata import version
    dev = Device[Device.DEFAULT]
    d = {k: Tensor(v).realize() for k, v in inputs(np).items() if k != "mlp_y"}
    d["mlp_y"] = Tensor(inputs(np)["mlp_y"].astype(np.int32)).realize()

    def ln(v):
        m = v.mean(axis=1, keepdim=True)
        var = ((v - m) ** 2).mean(axis=1, keepdim=True)
        return (v - m) * (var + 1e-5).rsqrt()
    fns = {
        "chain8": (lambda v: ((v * 1.5 + 0.5) * v.sigmoid()).tanh() + v * v, ("x",)),
        "softmax": (lambda v: v.softmax(axis=1), ("rows",)),
        "layernorm": (ln, ("rows",)),
        "sgemm_1024": (lambda a, b: a @ b, ("a1024", "b1024")),
        "sgemm_4096x4096x1024": (lambda a, b: a @ b, ("a4096", "b4096")),
        "mm_bias_relu": (lambda a, b, c: (a @ b + c).relu(), ("a1024", "b1024", "bias")),
    }
    rows = {}
    for name, (f, keys) in fns.items():
        jf = TinyJit(lambda *a, f=f: f(*a).realize())
        args = [d[k] for k in keys]
        rows[name] = (lambda jf, args: lambda: (jf(*args), dev.synchronize()))(jf, args)

    class MLP:
        def __init__(self):
            self.l1, self.l2, self.l3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

        def __call__(self, x):
            return self.l3(self.l2(self.l1(x).relu()).relu())
    model = MLP()
    opt = nn.optim.Adam(nn.state.get_parameters(model), lr=1e-3)

    @TinyJit
    def step(xb, yb):
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = model(xb).sparse_categorical_crossentropy(yb).backward()
            opt.step()
            return loss.realize()
    rows["mlp_train_step"] = lambda: (step(d["mlp_x"], d["mlp_y"]), dev.synchronize())
    return version("tinygrad"), rows


# ----------------------------------------------------------------- onnxruntime
def ort_workloads(quick):
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
    d = inputs(np)
    F = TensorProto.FLOAT

    def session(nodes, ins, out_shape, inits=()):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in ins],
                              [helper.make_tensor_value_info("out", F, out_shape)], list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        so = ort.SessionOptions()
        so.intra_op_num_threads = THREADS
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])

    def const(name, v):
        return helper.make_tensor(name, F, [], [v])

    chain = session([
        helper.make_node("Mul", ["x", "c15"], ["t1"]), helper.make_node("Add", ["t1", "c05"], ["t2"]),
        helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["t2", "s"], ["t3"]),
        helper.make_node("Tanh", ["t3"], ["t4"]), helper.make_node("Mul", ["x", "x"], ["sq"]),
        helper.make_node("Add", ["t4", "sq"], ["out"])], [("x", [BIG])], [BIG],
        [const("c15", 1.5), const("c05", 0.5)])
    softmax = session([helper.make_node("Softmax", ["x"], ["out"], axis=1)], [("x", [ROWS, COLS])], [ROWS, COLS])
    ln = session([helper.make_node("LayerNormalization", ["x", "w", "b"], ["out"], axis=-1, epsilon=1e-5)],
                 [("x", [ROWS, COLS])], [ROWS, COLS],
                 [helper.make_tensor("w", F, [COLS], np.ones(COLS, np.float32)),
                  helper.make_tensor("b", F, [COLS], np.zeros(COLS, np.float32))])

    def mm_session(m, k, n):
        return session([helper.make_node("MatMul", ["a", "b"], ["out"])], [("a", [m, k]), ("b", [k, n])], [m, n])
    mm1, mm4 = mm_session(1024, 1024, 1024), mm_session(4096, 1024, 4096)
    mbr = session([helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Add", ["t", "c"], ["t2"]),
                   helper.make_node("Relu", ["t2"], ["out"])],
                  [("a", [1024, 1024]), ("b", [1024, 1024]), ("c", [1024])], [1024, 1024])
    return ort.__version__, {
        "chain8": lambda: chain.run(None, {"x": d["x"]}),
        "softmax": lambda: softmax.run(None, {"x": d["rows"]}),
        "layernorm": lambda: ln.run(None, {"x": d["rows"]}),
        "sgemm_1024": lambda: mm1.run(None, {"a": d["a1024"], "b": d["b1024"]}),
        "sgemm_4096x4096x1024": lambda: mm4.run(None, {"a": d["a4096"], "b": d["b4096"]}),
        "mm_bias_relu": lambda: mbr.run(None, {"a": d["a1024"], "b": d["b1024"], "c": d["bias"]}),
    }


class Skipped(Exception):
    """A row this peer does not measure on this machine, and why."""


def skipped(why):
    def row():
        raise Skipped(why)
    return row


def cpu_has_bf16_units():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        return True  # cannot tell: measure
    return "avx512_bf16" in flags or "amx_bf16" in flags


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--system", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--only", default="", help="comma-separated workloads")
    a = ap.parse_args()
    result = {"system": a.system, "version": None, "rows": {}, "errors": {}, "per_iter": {}}
    try:
        make = {"numpy": numpy_workloads, "torch1": lambda q: torch_workloads(q, False),
                "torch2": lambda q: torch_workloads(q, True), "jax": jax_workloads,
                "onnxruntime": ort_workloads, "iree": iree_workloads, "tinygrad": tinygrad_workloads}[a.system]
        result["version"], rows = make(a.quick)
    except Exception as e:  # the whole peer is unavailable
        result["errors"]["*"] = f"{type(e).__name__}: {e}"
        rows = {}
    only = set(filter(None, a.only.split(",")))
    for name, fn in rows.items():
        if only and name not in only:
            continue
        per = 1
        if isinstance(fn, tuple):
            fn, per = fn
        big = name.startswith("sgemm_4096")
        try:
            result["rows"][name] = timeit(fn, a.reps, a.min_time * (0.5 if big and a.quick else 1))
            result["per_iter"][name] = per
        except Skipped as e:
            result["errors"][name] = str(e)
        except Exception as e:
            result["errors"][name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            traceback.print_exc()
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    sys.exit(main())
