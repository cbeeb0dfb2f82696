"""torch.compile(backend="kiln") against Inductor and eager, in one run:

  - MLP training step (forward, backward, SGD update; the digits MLP shape
    64-128-64-10 at batch 64),
  - transformer block forward + backward (python/tests' Block, d=128,
    4 heads, batch 8 x 64 tokens),
  - the backend's own overhead per call: a one-add graph on a 1-element
    tensor, compiled minus eager (guards, AOTAutograd's wrappers, Kiln's graph
    runner and DLPack crossings).

Median milliseconds per step over --rounds rounds of --steps steps each. The
first warm-up covers Inductor's compile and Kiln's tier-up: Kiln runs with
KILN_JIT=sync here (a hot trace compiles in the calling thread), so the timed
steps are the steady state of both compilers, not a race with Kiln's
background compile. In each round every system runs its steps (after a short
warm-up), in an order rotated between rounds, so that a stretch of load from
other processes on a shared machine falls on all of them alike.

Threads are each system's own: eager and Inductor run with PyTorch's intra-op
threads (--threads, else PyTorch's default), Kiln on its own threads with
PyTorch's lowered to 1, as the backend sets them (torch_backend's
_limit_torch_threads); the count is set before each system's turn.

  python bench/torch_backend.py [--steps N] [--warmup N] [--rounds N] [--threads N] [--md FILE]

--md writes the table as a Markdown section (scripts/bench.sh writes
bench/RESULTS-torch.md, which bench/run_bench.py includes in RESULTS.md).
"""
import argparse
import copy
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))
from test_torch_backend import Block  # noqa: E402

import kiln  # noqa: E402


def mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def time_steps(step, warmup, steps):
    """Seconds per step of `steps` steps after `warmup` untimed ones."""
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        samples.append(time.perf_counter() - start)
    return samples


def mlp_step(model, opt, x, y):
    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def block_step(model, x):
    def step():
        for p in model.parameters():
            p.grad = None
        model(x).sum().backward()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50, help="timed steps per system and round")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up steps before the first round (compiles)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="PyTorch's threads for eager and Inductor (0: its default)")
    ap.add_argument("--md", help="also write the results as a Markdown section to this file")
    args = ap.parse_args()
    torch_threads = args.threads or torch.get_num_threads()
    torch.manual_seed(0)
    kiln.configure(jit="sync")
    backends = {"eager": None, "inductor": "inductor", "kiln": "kiln"}
    print(f"torch {torch.__version__}, {torch_threads} threads for eager and Inductor; median ms per step "
          f"({args.rounds} rounds of {args.steps} steps after {args.warmup} warm-up)")
    print(f"{'workload':<34}" + "".join(f"{b:>12}" for b in backends) + f"{'kiln/inductor':>15}")

    base_mlp = mlp()
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    base_block = Block(d=128, heads=4)
    xb = torch.randn(8, 64, 128)
    tiny = torch.ones(1)
    workloads = ["MLP training step (64-128-64-10, b=64)", "transformer block fwd+bwd (8x64x128)",
                 "backend overhead per call"]
    # Each system's compiled steps, built and warmed up once: Dynamo caches
    # per code object, so every system compiles its own copies of the models.
    steps = {}
    for name, backend in backends.items():
        torch.set_num_threads(1 if name == "kiln" else torch_threads)
        compiled = (lambda f: f) if backend is None else (lambda f: torch.compile(f, backend=backend))
        m = copy.deepcopy(base_mlp)
        b = copy.deepcopy(base_block)
        fn = compiled(lambda t: t + 1)
        steps[name] = {workloads[0]: mlp_step(compiled(m), torch.optim.SGD(m.parameters(), lr=0.01), x, y),
                       workloads[1]: block_step(compiled(b), xb),
                       workloads[2]: lambda fn=fn: fn(tiny)}
        for w, step in steps[name].items():
            time_steps(step, args.warmup, 0)
    samples = {w: {name: [] for name in backends} for w in workloads}
    order = list(backends)
    for r in range(args.rounds):
        for name in order[r % len(order):] + order[:r % len(order)]:
            torch.set_num_threads(1 if name == "kiln" else torch_threads)
            for w, step in steps[name].items():
                n = args.steps * (20 if "overhead" in w else 1)
                samples[w][name] += time_steps(step, 3, n)
    rows = {w: {name: 1e3 * statistics.median(v) for name, v in by.items()} for w, by in samples.items()}
    for name in backends:
        rows["backend overhead per call"][name] *= 1e3
    eager_call = rows["backend overhead per call"]["eager"]
    for k in backends:
        rows["backend overhead per call"][k] -= eager_call
    md = ["## PyTorch backend: torch.compile(backend=\"kiln\") vs Inductor vs eager", "",
          f"`python bench/torch_backend.py --steps {args.steps} --warmup {args.warmup} --rounds {args.rounds}` "
          f"(torch {torch.__version__}; eager and Inductor on {torch_threads} PyTorch threads, Kiln on its own threads "
          "with PyTorch's at 1, as the backend sets them; Kiln with KILN_JIT=sync so the timed steps are compiled). "
          "Median per step over all rounds, the systems' order rotated between rounds; the goal is kiln/inductor "
          ">= 1.0 and a backend overhead <= 20 us per call.", "",
          "| workload | eager | inductor | kiln | kiln vs inductor |", "|---|---|---|---|---|"]
    for workload, r in rows.items():
        overhead = "overhead" in workload
        ratio = r["inductor"] / r["kiln"] if r["kiln"] > 0 else float("nan")
        print(f"{workload:<34}" + "".join(f"{r[b]:>12.3f}" for b in backends) +
              (f"{ratio:>14.2f}x" if not overhead else ""))
        unit = "us" if overhead else "ms"
        md.append(f"| {workload} | " + " | ".join(f"{r[b]:.3f} {unit}" for b in backends) + " | " +
                  ("—" if overhead else f"{ratio:.2f}x") + " |")
    s = kiln.stats()
    line = f"kiln: {s.compiled_runs} compiled / {s.interpreted_runs} interpreted trace runs, {s.compiles} compiles"
    print(line)
    if args.md:
        md += ["", line + ".", ""]
        with open(args.md, "w") as f:
            f.write("\n".join(md))


if __name__ == "__main__":
    main()
