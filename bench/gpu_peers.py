#!/usr/bin/env python3
"""PyTorch eager on the GPU, for the GPU check (scripts/gpu-check.sh).

Times the GPU workloads of bench/gpu_bench.cpp with the same shapes and
data ranges: each figure is the median over repetitions of the mean time per
call, in wall time over a batch of calls that ends with one synchronize (as
kiln_gpu_bench times Kiln: launches overlap the GPU's work as in a real
program). Also measures the device's copy bandwidth (x.copy_ of a 256 MiB
tensor), the yardstick of the elementwise goal (issue 14: tier-0 elementwise
kernels at >= 0.7 of it).

With --compiled, the fused workloads go through torch.compile (Inductor's
Triton kernels: issue 15's bar); a workload that fails to compile is
reported and left out.

Writes one JSON object: {"system", "version", "device", "rows": {name:
{"median_s", "samples_s"}}}. Runs on the GPU machine with only PyTorch.
"""
import argparse
import json
import statistics
import sys
import time

BIG = 1 << 24
ROWS, COLS = 4096, 1024
BIG_ROWS, BIG_COLS = 32768, 4096


def time_cuda(torch, fn, reps, min_time):
    # Wall time over a batch of calls with one synchronize at its end, as
    # kiln_gpu_bench times Kiln.
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-7)
    iters = max(1, min(10000, int(min_time / one)))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / iters)
    return samples


def workloads(torch, compiled=False):
    dev = torch.device("cuda:0")
    g = torch.Generator(device=dev).manual_seed(0)

    def uniform(shape, lo, hi, dtype=torch.float32):
        return (torch.rand(shape, generator=g, device=dev) * (hi - lo) + lo).to(dtype)

    x = uniform((BIG,), -2, 2)
    a, b, c = uniform((BIG,), -1, 1), uniform((BIG,), -1, 1), uniform((BIG,), -1, 1)
    rows = uniform((ROWS, COLS), -2, 2)
    big_rows = uniform((BIG_ROWS, BIG_COLS), -2, 2)
    a1024, b1024, bias = uniform((1024, 1024), -1, 1), uniform((1024, 1024), -1, 1), uniform((1024,), -1, 1)
    a4096, b4096 = uniform((4096, 1024), -1, 1), uniform((1024, 4096), -1, 1)
    big_src = uniform((1 << 26,), -1, 1)
    big_dst = torch.empty_like(big_src)

    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    mx = torch.randn((256, 784), generator=g, device=dev)
    my = torch.randint(0, 10, (256,), generator=g, device=dev)

    def mlp():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(mx), my)
        loss.backward()
        opt.step()
        return loss

    # embedding_grad: GPT-2's table read at 8 x 1024 tokens, its gradient.
    table = uniform((50257, 768), -1, 1).requires_grad_()
    tokens = torch.randint(0, 50256, (8, 1024), generator=g, device=dev)
    token_grads = uniform((8, 1024, 768), -1, 1)

    def embedding_grad():
        table.grad = None
        (torch.nn.functional.embedding(tokens, table) * token_grads).sum().backward()
        return table.grad

    h = {k: v.to(torch.bfloat16) for k, v in (("a1024", a1024), ("b1024", b1024), ("a4096", a4096), ("b4096", b4096))}
    nograd = {
        "copy_256MiB": lambda: big_dst.copy_(big_src),
        "fma": lambda: a * b + c,
        "chain8": lambda: torch.tanh((x * 1.5 + 0.5) * torch.sigmoid(x)) + x * x,
        "softmax": lambda: torch.softmax(rows, dim=1),
        "layernorm": lambda: torch.nn.functional.layer_norm(rows, (COLS,)),
        "softmax_32768x4096": lambda: torch.softmax(big_rows, dim=1),
        "layernorm_32768x4096": lambda: torch.nn.functional.layer_norm(big_rows, (BIG_COLS,)),
        "sgemm_1024": lambda: a1024 @ b1024,
        "sgemm_4096x4096x1024": lambda: a4096 @ b4096,
        "gemm_bf16_1024": lambda: h["a1024"] @ h["b1024"],
        "gemm_bf16_4096x4096x1024": lambda: h["a4096"] @ h["b4096"],
        "mm_bias_relu": lambda: torch.relu(a1024 @ b1024 + bias),
    }

    def no_grad(f):
        def run():
            with torch.no_grad():
                return f()
        return run

    if compiled:
        # torch.compile (Inductor, Triton kernels) of the fused workloads,
        # the bar of issue 15; the GEMMs and the copy stay eager calls.
        chain = torch.compile(lambda v: torch.tanh((v * 1.5 + 0.5) * torch.sigmoid(v)) + v * v)
        fma = torch.compile(lambda p, q, r: p * q + r)
        sm = torch.compile(lambda v: torch.softmax(v, dim=1))
        ln = torch.compile(lambda v: torch.nn.functional.layer_norm(v, (v.shape[1],)))
        mbr = torch.compile(lambda p, q, r: torch.relu(p @ q + r))
        nograd.update({
            "fma": lambda: fma(a, b, c),
            "chain8": lambda: chain(x),
            "softmax": lambda: sm(rows),
            "layernorm": lambda: ln(rows),
            "softmax_32768x4096": lambda: sm(big_rows),
            "layernorm_32768x4096": lambda: ln(big_rows),
            "mm_bias_relu": lambda: mbr(a1024, b1024, bias),
        })
        for k in ("copy_256MiB", "sgemm_1024", "sgemm_4096x4096x1024", "gemm_bf16_1024", "gemm_bf16_4096x4096x1024"):
            nograd.pop(k)
    out = {k: no_grad(f) for k, f in nograd.items()}
    if not compiled:
        out["mlp_train_step"] = mlp
        out["embedding_grad"] = embedding_grad
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--compiled", action="store_true", help="torch.compile the fused workloads (issue 15's bar)")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("gpu_peers: PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    # Full-precision float32 matmuls, as Kiln's SGEMM (no TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = {}
    for name, fn in workloads(torch, args.compiled).items():
        try:
            samples = time_cuda(torch, fn, args.reps, args.min_time)
        except Exception as e:  # noqa: BLE001 (torch.compile needs a working Triton toolchain)
            print(f"torch {name}: failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        rows[name] = {"median_s": statistics.median(samples), "samples_s": samples}
        print(f"torch{' compiled' if args.compiled else ''} {name}: {rows[name]['median_s'] * 1e6:.1f} us", flush=True)
    result = {"system": "torch-compile" if args.compiled else "torch-eager", "version": torch.__version__, "cuda": torch.version.cuda,
              "device": torch.cuda.get_device_name(0), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
