#!/usr/bin/env python3
"""Python peers of the Kiln benchmark suite (issue 8).

    peers.py --system torch1|numpy|jax|onnxruntime|torch2 --out FILE [--quick] [--reps N]

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
    nograd = {k: (lambda f: (lambda: _nograd(torch, f)))(f) for k, f in rows.items()}
    nograd["mlp_train_step"] = mlp
    nograd["resnet_block_train_step"] = resnet_train
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


def _nograd(torch, f):
    with torch.no_grad():
        return f()


# ----------------------------------------------------------------- jax
def jax_workloads(quick):
    import numpy as np
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_platforms", "cpu")
    d = {k: jnp.asarray(v) for k, v in inputs(np).items()}

    def block(f):
        return lambda: jax.block_until_ready(f())

    chain = jax.jit(lambda v: jnp.tanh((v * 1.5 + 0.5) * jax.nn.sigmoid(v)) + v * v)
    softmax = jax.jit(lambda v: jax.nn.softmax(v, axis=1))

    def ln(v):
        m = v.mean(axis=1, keepdims=True)
        var = ((v - m) ** 2).mean(axis=1, keepdims=True)
        return (v - m) * jax.lax.rsqrt(var + 1e-5)
    layernorm = jax.jit(ln)
    mm = jax.jit(lambda a, b: a @ b)
    mbr = jax.jit(lambda a, b, c: jax.nn.relu(a @ b + c))

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

    @jax.jit
    def step(p, m, v, t, xb, yb):
        g = jax.grad(loss_fn)(p, xb, yb)
        t = t + 1
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        p = jax.tree_util.tree_map(lambda w, a, b: w - 1e-3 * (a / c1) / (jnp.sqrt(b / c2) + 1e-8), p, m, v)
        return p, m, v, t

    state = {"p": params, "m": jax.tree_util.tree_map(jnp.zeros_like, params),
             "v": jax.tree_util.tree_map(jnp.zeros_like, params), "t": jnp.float32(0)}
    yb = d["mlp_y"].astype(jnp.int32)

    def mlp():
        state["p"], state["m"], state["v"], state["t"] = step(state["p"], state["m"], state["v"], state["t"],
                                                              d["mlp_x"], yb)
        return jax.block_until_ready(state["t"])

    return jax.__version__, {
        "chain8": block(lambda: chain(d["x"])),
        "softmax": block(lambda: softmax(d["rows"])),
        "layernorm": block(lambda: layernorm(d["rows"])),
        "sgemm_1024": block(lambda: mm(d["a1024"], d["b1024"])),
        "sgemm_4096x4096x1024": block(lambda: mm(d["a4096"], d["b4096"])),
        "mm_bias_relu": block(lambda: mbr(d["a1024"], d["b1024"], d["bias"])),
        "mlp_train_step": mlp,
    }


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
                "onnxruntime": ort_workloads}[a.system]
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
        except Exception as e:
            result["errors"][name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            traceback.print_exc()
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    sys.exit(main())
