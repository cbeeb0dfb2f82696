#!/usr/bin/env python3
"""Runs the Kiln benchmark suite against its peers and writes the report.

    run_bench.py --build BUILD_DIR [--quick] [--rounds N] [--md bench/RESULTS.md] [--json bench/results.json]

Called by scripts/bench.sh. Every measuring process (the Kiln tiers, the
native peers, each Python peer) is started once per round, the order rotated
from round to round, so that Kiln and its peers alternate on the machine and
share its noise; each process contributes several repetitions per round.
Medians and spreads are taken over all repetitions of all rounds.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BIG = 1 << 24
# Fresh processes per KILN_JIT mode and round for the transformer loop's rows (see transformer_round).
TRANSFORMER_PROCESSES_PER_ROUND = 3
ROWS, COLS = 4096, 1024
MLP_PARAMS = 784 * 512 + 512 * 512 + 512 * 10
# Multiply-adds x 2 of one MLP step's matmuls: forward and weight gradients
# for every layer, input gradients for all but the first (the batch needs
# none): 6 x batch x parameters overstated it by a quarter.
MLP_STEP_FLOPS = 256 * (6 * MLP_PARAMS - 2 * 784 * 512)
# name: (title, bytes per iteration or None, flops per iteration or None)
WORKLOADS = {
    "stream_copy_1t": ("STREAM copy, 1 thread (2^25 f32)", 2 * 4 << 25, None),
    "stream_copy_2t": ("STREAM copy, 2 threads", 2 * 4 << 25, None),
    "stream_triad_1t": ("STREAM triad, 1 thread", 3 * 4 << 25, None),
    "stream_triad_2t": ("STREAM triad, 2 threads", 3 * 4 << 25, None),
    "peak_fma_1t": ("peak FP32 FMA, 1 thread", None, "counter"),
    "peak_fma_2t": ("peak FP32 FMA, 2 threads", None, "counter"),
    "chain8": ("elementwise chain tanh((x*1.5+0.5)*sigmoid(x))+x*x, 2^24 f32", 8 * BIG, None),
    "fma3": ("a*b+c, 2^24 f32", 16 * BIG, None),
    "softmax": ("row softmax [4096,1024] f32", 8 * ROWS * COLS, None),
    "layernorm": ("layer_norm [4096,1024] f32 (no affine)", 8 * ROWS * COLS, None),
    "sgemm_1024": ("SGEMM 1024^3", None, 2 * 1024 ** 3),
    "sgemm_4096x4096x1024": ("SGEMM 4096x4096x1024", None, 2 * 4096 * 4096 * 1024),
    "gemm_bf16_1024": ("bf16 GEMM 1024^3, f32 sums (Kiln: bf16 tensors and result; oneDNN: matmul primitive, "
                       "f32 result; PyTorch: bf16 a @ b)", None, 2 * 1024 ** 3),
    "gemm_bf16_4096x4096x1024": ("bf16 GEMM 4096x4096x1024, as above", None, 2 * 4096 * 4096 * 1024),
    "mm_bias_relu": ("matmul+bias+ReLU 1024^3", None, 2 * 1024 ** 3),
    "mlp_train_step": ("MLP 784-512-512-10 training step, batch 256, Adam", None, MLP_STEP_FLOPS),
    "mlp_lr_schedule": ("the same MLP step with a learning rate that decays every step (set_lr): kiln-compiled "
                        "compiles in the warm-up only (the lr is a kernel argument)", None, MLP_STEP_FLOPS),
    "resnet_block_fwd": ("ResNet basic block forward, eval (two 3x3 convs 64 channels, batch norm, ReLU, identity), "
                         "batch 16, 56x56, NCHW (onednn: the block written natively, bench/resnet_onednn.h: blocked layouts inside, batch "
                         "norm folded into the convolutions, ReLU and the shortcut as post-ops; checked against Kiln's output)",
                         None, 2 * 2 * 16 * 64 * 64 * 9 * 56 * 56),
    "resnet_block_train_step": ("the same block's training step (batch statistics, backward, SGD; onednn: natively, "
                                "its loss and gradients checked against Kiln's)", None,
                                3 * 2 * 2 * 16 * 64 * 64 * 9 * 56 * 56),
    "rnn_varlen": ("recurrent loop h = tanh(h@W + x_t@U + b), B 64, H 256, D 128, 20-60 steps (new trip count every "
                   "iteration, mean 40): kiln-compiled runs the body on a hot-region kernel (whole-trace compiles off)",
                   None, 40 * 2 * 64 * 256 * (256 + 128)),
    "rnn_fixed40": ("the same recurrent loop at a fixed 40 steps: kiln-compiled runs one whole-trace kernel", None,
                    40 * 2 * 64 * 256 * (256 + 128)),
    "dispatch_tiny_step": ("kiln::step() of a 4-op trace on 1-element tensors", None, None),
    "record_run_tiny_op": ("record + run one op on 1-element tensors (per op, chain of 64)", None, None),
    "record_op": ("recording one op (per op)", None, None),
    "compile_10_ops": ("compile latency, 10-op elementwise trace", None, None),
    "compile_50_ops": ("compile latency, 50-op elementwise trace", None, None),
    "compile_200_ops": ("compile latency, 200-op elementwise trace", None, None),
    "transformer_train_step": ("GPT-style block training step (batch 8, 64 tokens, width 128, 4 heads, vocabulary 256, "
                               "Adam; ~800 ops): median of steps 31-40 of a fresh process, per KILN_JIT mode "
                               "(kiln-interp: off; kiln-async: the default; kiln-sync: compiled in the calling thread "
                               "at step 2)", None, None),
    "transformer_first40_wall": ("the same loop: wall time of its first 40 steps in a fresh process, compilation "
                                 "included", None, None),
    "transformer_first200_wall": ("the same loop: wall time of its first 200 steps, compilation included", None, None),
    "transformer_compile": ("the same loop: compile time of its step's trace (kiln-sync)", None, None),
    "allreduce_64mib": ("all-reduce (sum) of 64 MiB f32 on 2 ranks (mpirun -np 2, one machine): kiln-recorded is "
                        "dist::all_reduce recorded in a trace and run (agreement check, communication thread), "
                        "kiln-communicator the communicator call alone; the peers are MPI_Allreduce and "
                        "MPI_Iallreduce + MPI_Wait on the same buffers", 64 << 20, None),
    "digits_step": ("the demo's training step (train_digits, MLP 64-128-64-10, batch 32 per rank, KILN_JIT=sync, "
                    "one TBB thread per rank): median ms/step of epochs 2-10 on 1 rank and, data-parallel, on 2 "
                    "ranks (gradients all-reduced in the step)", None, None),
    "warm_start_replay": ("first MLP training step of a fresh process: interpreted (kiln-interp), replayed from "
                          "the disk cache (kiln-replay, KILN_JIT=replay, with the warm start that the compiling process "
                          "recorded: its kernels loaded and its memory faulted in on a background thread during the "
                          "set-up; kiln-replay-next-step: the fastest of that process's next 3 steps), compiled in the calling thread (kiln-compile-first-run, one sample)",
                          None, None),
}
# Which workloads each optional peer takes part in (a missing peer still gets its rows, as "missing").
PEER_ROWS = {
    "eigen": ["chain8"],
    "openblas": ["sgemm_1024", "sgemm_4096x4096x1024", "mm_bias_relu"],
    "onednn": ["sgemm_1024", "sgemm_4096x4096x1024", "gemm_bf16_1024", "gemm_bf16_4096x4096x1024", "resnet_block_fwd",
               "resnet_block_train_step"],
    "torch1": ["chain8", "softmax", "layernorm", "sgemm_1024", "sgemm_4096x4096x1024", "gemm_bf16_1024",
               "gemm_bf16_4096x4096x1024", "mm_bias_relu",
               "mlp_train_step", "record_run_tiny_op", "resnet_block_fwd", "resnet_block_train_step",
               "transformer_train_step"],
    "numpy": ["chain8", "softmax", "layernorm", "sgemm_1024", "sgemm_4096x4096x1024", "mm_bias_relu"],
    "jax": ["chain8", "softmax", "layernorm", "sgemm_1024", "sgemm_4096x4096x1024", "mm_bias_relu", "mlp_train_step"],
    "iree": ["chain8", "softmax", "layernorm", "sgemm_1024", "sgemm_4096x4096x1024", "mm_bias_relu", "mlp_train_step"],
    "tinygrad": ["chain8", "softmax", "layernorm", "sgemm_1024", "sgemm_4096x4096x1024", "mm_bias_relu", "mlp_train_step"],
    "onnxruntime": ["chain8", "softmax", "layernorm", "sgemm_1024", "sgemm_4096x4096x1024", "mm_bias_relu"],
    "torch2": ["chain8", "softmax", "layernorm", "gemm_bf16_1024", "gemm_bf16_4096x4096x1024", "mm_bias_relu", "mlp_train_step", "resnet_block_fwd",
               "resnet_block_train_step", "transformer_train_step"],
}
PEER_LABEL = {"eigen": "eigen", "openblas": "openblas", "onednn": "onednn", "torch1": "pytorch-1.13-eager",
              "numpy": "numpy", "jax": "jax.jit", "onnxruntime": "onnxruntime", "torch2": "pytorch-2-compile", "iree": "iree",
              "tinygrad": "tinygrad"}
BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def goals(med, rss=None, replay_system_s=None):
    """Kiln's goals from issues 2, 4, 6, 9, 17, 19, 20 and 21: (workload, system, goal, measured, met or None when not
    measurable). `rss`: peak resident bytes of the warm-start processes (lists per kind) and the kernels' bytes."""
    def m(w, s):
        return med.get((w, s))

    def speed(a, b):  # speed of a relative to b (> 1: a is faster)
        return None if a is None or b is None else b / a

    def limit(w, s, text, bound):
        r = m(w, s)
        return (w, s, text, fmt_time(r), None if r is None else r <= bound)

    def rel(q, what):
        return "—" if q is None else f"{q:.2f}× {what}"

    out = [limit("record_op", "kiln", "≤ 100 ns per op (issue 2)", 100e-9),
           limit("record_run_tiny_op", "kiln-interp", "≤ 300 ns per op (issue 2)", 300e-9)]
    q = speed(m("fma3", "kiln-interp"), m("fma3", "hand-fused"))
    out.append(("fma3", "kiln-interp", "≥ 0.7 of the hand loop (issue 2)", rel(q, "hand loop"),
                None if q is None else q >= 0.7))
    q1 = speed(m("chain8", "kiln-compiled"), m("chain8", "hand-fused"))
    q2 = speed(m("chain8", "kiln-compiled"), m("chain8", "kiln-interp"))
    out.append(("chain8", "kiln-compiled", "≥ 0.9 of hand-fused and ≥ 4× interpreter (issue 4)",
                rel(q1, "hand-fused") + ", " + rel(q2, "interpreter"),
                None if q1 is None or q2 is None else (q1 >= 0.9 and q2 >= 4)))
    for w in ("softmax", "layernorm"):
        q = speed(m(w, "kiln-compiled"), m(w, "hand-fused"))
        out.append((w, "kiln-compiled", "≥ 0.8 of hand-fused (issue 4)", rel(q, "hand-fused"),
                    None if q is None else q >= 0.8))
    out.append(limit("compile_10_ops", "kiln-compiled", "median ≤ 50 ms (issue 4)", 0.050))
    out.append(limit("compile_200_ops", "kiln-compiled", "median ≤ 500 ms (issue 4)", 0.500))
    out.append(limit("dispatch_tiny_step", "kiln-compiled", "≤ 2 µs per step (issue 4)", 2e-6))
    out.append(limit("mlp_train_step", "kiln-compiled", "≤ 3.8 ms (issue 6)", 3.8e-3))
    r, f = m("rnn_varlen", "kiln-compiled"), m("rnn_fixed40", "kiln-compiled")
    out.append(("rnn_varlen", "kiln-compiled", "region kernels within 1.3× of the whole-trace kernel (issue 9)",
                "—" if r is None or f is None else f"{r / f:.2f}× rnn_fixed40's whole-trace time",
                None if r is None or f is None else r <= 1.3 * f))
    r, t = m("mlp_train_step", "kiln-interp"), m("mlp_train_step", PEER_LABEL["torch1"])
    ref = t if t is not None else 5.2e-3
    out.append(("mlp_train_step", "kiln-interp",
                "within 3× of PyTorch eager (issue 6)" + ("" if t is not None else "; PyTorch missing: vs the issue's 5.2 ms"),
                "—" if r is None else f"{r / ref:.2f}× PyTorch eager's time",
                None if r is None else r <= 3 * ref))
    r, a_, sy = (m("transformer_first40_wall", s) for s in ("kiln-interp", "kiln-async", "kiln-sync"))
    out.append(("transformer_first40_wall", "kiln-async", "≤ the interpreted run's wall time (issue 20)",
                "—" if r is None or a_ is None else f"{a_ / r:.2f}× interpreted",
                None if r is None or a_ is None else a_ <= r))
    r, a_ = m("transformer_first200_wall", "kiln-interp"), m("transformer_first200_wall", "kiln-async")
    out.append(("transformer_first200_wall", "kiln-async", "≤ 0.7 of the interpreted run's wall time (issue 20)",
                "—" if r is None or a_ is None else f"{a_ / r:.2f}× interpreted",
                None if r is None or a_ is None else a_ <= 0.7 * r))
    q = speed(m("transformer_train_step", "kiln-sync"), m("transformer_train_step", "kiln-interp"))
    out.append(("transformer_train_step", "kiln-sync", "compiled step ≥ 1.5× interpreted (issue 20)",
                rel(q, "interpreter"), None if q is None else q >= 1.5))
    q = speed(m("transformer_train_step", "kiln-sync"), m("transformer_train_step", PEER_LABEL["torch2"]))
    out.append(("transformer_train_step", "kiln-sync", "compiled step ≥ 1.0× torch.compile (issue 20)",
                rel(q, "torch.compile"), None if q is None else q >= 1.0))
    out.append(limit("transformer_compile", "kiln-sync", "≤ 1.5 s (issue 20)", 1.5))
    q = speed(m("mlp_train_step", "kiln-compiled"), m("mlp_train_step", "kiln-interp"))
    out.append(("mlp_train_step", "kiln-compiled", "≥ 1.2× interpreted (issue 20)", rel(q, "interpreter"),
                None if q is None else q >= 1.2))
    # The steady compiled step: the replaying process's own next steps, and the benchmark's compiled MLP
    # step (warm caches, many iterations); the goal holds when the first step is within both bounds.
    f, n, b = (m("warm_start_replay", "kiln-replay"), m("warm_start_replay", "kiln-replay-next-step"),
               m("mlp_train_step", "kiln-compiled"))
    out.append(("warm_start_replay", "kiln-replay", "first step ≤ 1.1× the steady compiled step + 2 ms (issue 21)",
                "—" if f is None or n is None or b is None else
                f"{fmt_time(f)} (bounds: {fmt_time(1.1 * n + 2e-3)} from the process's next steps, "
                f"{fmt_time(1.1 * b + 2e-3)} from mlp_train_step kiln-compiled"
                + ("" if not replay_system_s else
                   f"; the first step's kernel (system) time, first-touch page zeroing where it was not warmed: "
                   f"{fmt_time(statistics.median(replay_system_s))}") + ")",
                None if f is None or n is None or b is None else f <= 1.1 * min(n, b) + 2e-3))
    rss = rss or {}
    r, i_, k = (statistics.median(rss[x]) if rss.get(x) else None for x in ("kiln-replay", "kiln-interp", "kernels"))
    out.append(("warm_start_replay", "kiln-replay", "resident memory ≤ the interpreter's + the kernels (issue 21)",
                "—" if r is None or i_ is None or k is None else
                f"{r / 2**20:.1f} MiB (interpreter {i_ / 2**20:.1f} MiB, kernels {k / 2**20:.2f} MiB)",
                None if r is None or i_ is None or k is None else r <= i_ + k))
    # Issue 17: the CPU kernels against the best peers, on this machine's ISA.
    def best(w, systems):
        vals = [m(w, PEER_LABEL.get(x, x)) for x in systems]
        vals = [v for v in vals if v is not None]
        return min(vals) if vals else None

    def versus(w, s, systems, what, bound):
        q = speed(m(w, s), best(w, systems))
        out.append((w, s, f"≥ {bound}× {what} (issue 17)", rel(q, what), None if q is None else q >= bound))
    for w in ("sgemm_1024", "sgemm_4096x4096x1024"):
        versus(w, "kiln-compiled", ("onednn", "openblas"), "the best of oneDNN and OpenBLAS", 1.0)
    for w in ("gemm_bf16_1024", "gemm_bf16_4096x4096x1024"):
        versus(w, "kiln-compiled", ("onednn", "torch1", "torch2"), "oneDNN's bf16 GEMM (native and in PyTorch)", 1.0)
    all_peers = [x for x in PEER_LABEL if x not in ("eigen",)] + ["openblas+loop"]
    versus("mm_bias_relu", "kiln-compiled", all_peers, "the best peer", 1.1)
    versus("mlp_train_step", "kiln-compiled", ("jax",), "jax.jit", 1.2)
    for w in ("resnet_block_fwd", "resnet_block_train_step"):
        versus(w, "kiln-compiled", ("torch1", "torch2", "onednn"), "PyTorch (eager and torch.compile) and oneDNN", 1.0)
    for w in ("softmax", "layernorm"):
        versus(w, "kiln-compiled", ("hand-fused",), "hand-fused", 0.9)
        versus(w, "kiln-compiled", all_peers, "the best peer", 1.0)
    versus("chain8", "kiln-compiled", ("eigen",), "Eigen", 1.0)
    q = speed(m("allreduce_64mib", "kiln-recorded"), m("allreduce_64mib", "mpi-allreduce"))
    out.append(("allreduce_64mib", "kiln-recorded", "≥ 0.95 of MPI_Allreduce's bandwidth (issue 19)",
                rel(q, "MPI_Allreduce"), None if q is None else q >= 0.95))
    return out


def cpu_core_name(vendor, family, model):
    """The core generation of an x86 CPU from cpuid's family and model, where known."""
    if vendor == "AuthenticAMD":
        if family == 26:
            return "Zen 5"
        if family == 25:
            return "Zen 4" if 0x10 <= model <= 0x1F or 0x60 <= model <= 0xAF else "Zen 3"
        if family == 23:
            return "Zen 2" if model >= 0x30 else "Zen"
    if vendor == "GenuineIntel" and family == 6:
        return {0x55: "Skylake-SP/Cascade Lake", 0x6A: "Ice Lake-SP", 0x8F: "Sapphire Rapids",
                0xCF: "Emerald Rapids", 0xAD: "Granite Rapids"}.get(model, "")
    return ""


def now():
    return time.strftime("%H:%M:%S")


def run(cmd, env, log, timeout):
    t0 = time.time()
    with open(log, "a") as f:
        f.write(f"\n### {' '.join(cmd)}\n")
        f.flush()
        try:
            rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return rc, time.time() - t0


def parse_gbench(path, samples, errors, extra):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return f"no output ({e})"
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    for b in data.get("benchmarks", []):
        if b.get("run_type") != "iteration":
            continue
        parts = b["name"].split("/")
        key = (parts[0], parts[1])
        if b.get("error_occurred"):
            errors[key] = b.get("error_message", "error")
            continue
        t = b["real_time"] * scale[b.get("time_unit", "ns")]
        t /= b.get("per_iter", 1) or 1
        samples.setdefault(key, []).append(t)
        if "flops_per_iter" in b:
            extra[key] = b["flops_per_iter"]
    return None


def fmt_time(s):
    if s is None:
        return "—"
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--md", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--json", default=os.path.join(HERE, "results.json"))
    a = ap.parse_args()
    rounds = a.rounds or (1 if a.quick else 2)
    reps = 2 if a.quick else 3
    build = os.path.abspath(a.build)
    work = os.path.join(build, "bench-run")
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "run.log")
    open(log, "w").close()
    started = time.time()
    load_before = os.getloadavg()

    status = {}
    try:
        with open(os.path.join(build, "peers", "status.txt")) as f:
            for line in f:
                p = line.split(None, 2)
                if len(p) >= 2:
                    status[p[0]] = (p[1], p[2].strip() if len(p) > 2 else "")
    except OSError:
        pass
    bench = os.path.join(build, "bench", "kiln_bench")
    venv_py = os.path.join(build, "peers", "venv", "bin", "python")
    base_env = dict(os.environ)
    base_env.update({"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": "2",
                     "KILN_NUM_THREADS": "2", "KILN_LOG": "error", "KILN_CACHE": "off",
                     "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads=2"})
    blas_env = {k: v for k, v in base_env.items() if k not in BLAS_VARS}
    have_jit = os.path.exists(os.path.join(build, "runtime", "libkiln_jit.so"))

    gb = ["--benchmark_repetitions=%d" % reps, "--benchmark_enable_random_interleaving=true",
          "--benchmark_format=console"]
    if a.quick:
        gb.append("--quick")
    procs = [
        ("kiln-interp+native", [bench, "--tier=interp", "--systems=kiln,hand,eigen,onednn,machine"] + gb, base_env, 900),
        ("openblas", [bench, "--systems=openblas"] + gb, blas_env, 600),
    ]
    if have_jit:
        procs.append(("kiln-compiled", [bench, "--tier=compiled", "--systems=kiln"] + gb, base_env, 900))
    py_min = "0.1" if a.quick else "0.3"
    for peer in ("torch1", "numpy", "jax", "onnxruntime", "torch2", "iree", "tinygrad"):
        if status.get(peer, ("missing",))[0] != "ok":
            continue
        py = venv_py
        if peer in ("torch1", "numpy"):  # Debian's packages: the system interpreter
            py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
        env = blas_env if peer == "numpy" else base_env
        procs.append((peer, [py, os.path.join(HERE, "peers.py"), "--system", peer, "--reps", str(reps),
                             "--min-time", py_min] + (["--quick"] if a.quick else []), env, 900))

    samples, errors, extra, proc_errors, versions = {}, {}, {}, {}, {}
    rss = {}  # warm start: peak resident bytes per process kind, and the kernels' bytes
    replay_system_s = []  # warm start: kernel (system) seconds of each replaying process's first step

    # Warm start: a compiled process fills a fresh disk cache with the MLP step's kernel; then fresh
    # processes time their first step, replayed from that cache or interpreted.
    cache_dir = os.path.join(work, "kernel-cache")
    subprocess.run(["rm", "-rf", cache_dir])
    cache_env = dict(base_env, KILN_CACHE="on", KILN_CACHE_DIR=cache_dir)

    def first_step(tier, env):
        # kiln_bench links OpenBLAS for its peer rows; at load OpenBLAS starts
        # its thread pool, whose threads spin (sched_yield) for their first
        # ~0.1 s and took a core from the first step being timed (perf: a third
        # of that step's CPU samples). A service replaying kernels has no
        # OpenBLAS; one thread keeps it from starting any.
        env = dict(env, OPENBLAS_NUM_THREADS="1")
        try:
            p = subprocess.run([bench, "--first-step", f"--tier={tier}"], env=env, capture_output=True, text=True,
                               timeout=300)
            with open(log, "a") as f:
                f.write(f"\n### first step, {tier}\n{p.stdout}{p.stderr}")
            return json.loads(p.stdout.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
            return {"error": f"{type(e).__name__}"}

    def warm_start_round():
        for _ in range(2 if a.quick else 3):
            res = first_step("replay", cache_env)
            if res.get("compiled_runs") == 1:
                samples.setdefault(("warm_start_replay", "kiln-replay"), []).append(res["first_step_s"])
                samples.setdefault(("warm_start_replay", "kiln-replay-next-step"), []).append(res["next_step_s"])
                rss.setdefault("kiln-replay", []).append(res["max_rss_kb"] * 1024)
                replay_system_s.append(res.get("first_step_system_s", 0.0))
            else:
                errors[("warm_start_replay", "kiln-replay")] = "the first step did not run a cached kernel: " + json.dumps(res)
            res = first_step("interp", base_env)
            if "first_step_s" in res:
                samples.setdefault(("warm_start_replay", "kiln-interp"), []).append(res["first_step_s"])
                rss.setdefault("kiln-interp", []).append(res["max_rss_kb"] * 1024)
        # The kernels a replaying process maps: the cache's entries.
        rss["kernels"] = [sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache_dir) for f in fs)]

    # Data-parallel (issue 19): all-reduce bandwidth and the demo's step on 1 and 2 ranks, under mpirun.
    dist_bench = os.path.join(build, "bench", "kiln_dist_bench")
    digits = os.path.join(build, "samples", "train_digits")
    mpirun = shutil.which("mpirun")
    dist_env = dict(base_env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", KILN_NUM_THREADS="1",
                    KILN_DIST_TIMEOUT="120")

    def dist_run(cmd, env, what):
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            with open(log, "a") as f:
                f.write(f"\n### {what}: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
            return p.stdout if p.returncode == 0 else None
        except (subprocess.TimeoutExpired, OSError):
            return None

    def dist_round():
        out = dist_run([mpirun, "-np", "2", "--oversubscribe", dist_bench, "64", "10"], dist_env, "all-reduce")
        row = [ln.split() for ln in (out or "").splitlines() if ln.split()[:1] == ["64"]]
        if not row:
            errors[("allreduce_64mib", "kiln-recorded")] = f"kiln_dist_bench failed (see {log})"
        else:  # MiB, then GB/s of MPI_Allreduce, MPI_Iallreduce, the recorded op, the communicator call
            secs = [(64 << 20) / (float(g) * 1e9) for g in row[0][1:5]]
            for label, t in zip(("mpi-allreduce", "mpi-iallreduce", "kiln-recorded", "kiln-communicator"), secs):
                samples.setdefault(("allreduce_64mib", label), []).append(t)
        digits_env = dict(dist_env, KILN_JIT="sync")
        for label, cmd in (("kiln-1-rank", [digits, "--epochs", "10"]),
                           ("kiln-2-ranks", [mpirun, "-np", "2", "--oversubscribe", digits, "--distributed",
                                             "--epochs", "10"])):
            out = dist_run(cmd, digits_env, label)
            ms = [float(ln.split()[4]) for ln in (out or "").splitlines()
                  if len(ln.split()) == 7 and ln.split()[0].isdigit() and int(ln.split()[0]) >= 2]
            if ms:
                samples.setdefault(("digits_step", label), []).append(statistics.median(ms) / 1000)
            else:
                errors[("digits_step", label)] = f"train_digits failed (see {log})"

    if mpirun and os.path.exists(dist_bench) and os.path.exists(digits):
        procs.append(("dist", None, None, None))

    # Transformer-block training loop (issue 20): fresh processes, the KILN_JIT modes alternating,
    # TRANSFORMER_PROCESSES_PER_ROUND of each per round: a process gives one sample of its first
    # 40 and 200 steps, and two samples moved that row's ratio by 5 % between runs.
    transformer = os.path.join(build, "bench", "kiln_bench_transformer")
    transformer_steps = 40 if a.quick else 200

    def transformer_round():
        modes = ("off", "async", "sync") if have_jit else ("off",)
        for mode in modes * TRANSFORMER_PROCESSES_PER_ROUND:
            label = "kiln-interp" if mode == "off" else f"kiln-{mode}"
            try:
                p = subprocess.run([transformer, f"--jit={mode}", f"--steps={transformer_steps}"], env=base_env,
                                   capture_output=True, text=True, timeout=600)
                with open(log, "a") as f:
                    f.write(f"\n### transformer, {mode}\n{p.stdout}{p.stderr}")
                res = json.loads(p.stdout.strip().splitlines()[-1])
            except (subprocess.TimeoutExpired, ValueError, IndexError, OSError) as e:
                errors[("transformer_train_step", label)] = f"failed: {type(e).__name__} (see {log})"
                continue
            samples.setdefault(("transformer_train_step", label), []).append(res["step_ms_31_40"] / 1000)
            samples.setdefault(("transformer_first40_wall", label), []).append(res["wall_40_s"])
            if res["steps"] >= 200:
                samples.setdefault(("transformer_first200_wall", label), []).append(res["wall_s"])
            if mode == "sync":
                samples.setdefault(("transformer_compile", label), []).append(res["compile_ms"] / 1000)

    if os.path.exists(transformer):
        procs.append(("transformer", None, None, None))

    if have_jit:
        populate = first_step("compiled", cache_env)
        if "error" in populate:
            proc_errors["warm-start cache fill"] = populate["error"]
        else:  # for scale: the same first step when it is compiled in the calling thread (KILN_JIT=sync)
            samples.setdefault(("warm_start_replay", "kiln-compile-first-run"), []).append(populate["first_step_s"])
        procs.append(("warm-start", None, None, None))

    for r in range(rounds):
        order = procs[r % len(procs):] + procs[:r % len(procs)]
        for name, cmd, env, timeout in order:
            if cmd is None and name == "dist":
                print(f"[{now()}] round {r + 1}/{rounds}: data-parallel (mpirun -np 2)", flush=True)
                dist_round()
                continue
            if cmd is None and name == "transformer":
                print(f"[{now()}] round {r + 1}/{rounds}: transformer block training loop", flush=True)
                transformer_round()
                continue
            if cmd is None:
                print(f"[{now()}] round {r + 1}/{rounds}: warm start (first steps)", flush=True)
                warm_start_round()
                continue
            out = os.path.join(work, f"{name}.r{r}.json")
            if os.path.exists(out):
                os.remove(out)
            if cmd[0] == bench:
                full = cmd + [f"--benchmark_out={out}", "--benchmark_out_format=json"]
            else:
                full = cmd + ["--out", out]
            print(f"[{now()}] round {r + 1}/{rounds}: {name}", flush=True)
            rc, secs = run(full, env, log, timeout)
            print(f"[{now()}]   done in {secs:.0f} s (rc {rc})", flush=True)
            if cmd[0] == bench:
                err = parse_gbench(out, samples, errors, extra)
                if err or rc != 0:
                    proc_errors[name] = f"exit {rc}" + (f", {err}" if err else "") + f" (see {log})"
            else:
                try:
                    with open(out) as f:
                        res = json.load(f)
                except (OSError, ValueError) as e:
                    proc_errors[name] = f"exit {rc}, no output (see {log})"
                    continue
                label = PEER_LABEL[name]
                versions[name] = res.get("version")
                for w, ts in res["rows"].items():
                    per = res.get("per_iter", {}).get(w, 1)
                    samples.setdefault((w, label), []).extend(t / per for t in ts)
                for w, msg in res["errors"].items():
                    if w == "*":
                        proc_errors[name] = msg
                    else:
                        errors[(w, label)] = msg

    med = {k: statistics.median(v) for k, v in samples.items()}
    # Machine limits: the best repetition (as STREAM reports), not the median: a limit is what the
    # hardware allowed at least once in this run.
    machine = {w: min(samples[(w, "machine")]) if (w, "machine") in samples else None
               for w in WORKLOADS if w.startswith(("stream", "peak"))}
    peak_flops = None
    if machine.get("peak_fma_2t") and ("peak_fma_2t", "machine") in extra:
        peak_flops = extra[("peak_fma_2t", "machine")] / machine["peak_fma_2t"]
    bw = [WORKLOADS[w][1] / machine[w] for w in ("stream_copy_2t", "stream_triad_2t") if machine.get(w)]
    peak_bw = max(bw) if bw else None

    # Rows: every measured (workload, system), plus missing peers and errors.
    rows = []
    keys = set(samples) | set(errors)
    for peer, ws in PEER_ROWS.items():
        st = status.get(peer, ("missing", "bench/setup_peers.sh has not run"))
        for w in ws:
            key = (w, PEER_LABEL[peer])
            if st[0] != "ok":
                errors.setdefault(key, f"missing: {st[1]}")
                keys.add(key)
            elif peer in proc_errors and key not in samples:
                errors.setdefault(key, f"failed: {proc_errors[peer]}")
                keys.add(key)
    if not have_jit:
        for w in ("chain8", "softmax", "layernorm", "mlp_train_step", "dispatch_tiny_step", "compile_10_ops"):
            errors[(w, "kiln-compiled")] = "missing: libkiln_jit.so was not built"
            keys.add((w, "kiln-compiled"))
    goal_list = goals(med, rss, replay_system_s)
    goal_of = {}
    for w, s, text, _, ok in goal_list:
        goal_of.setdefault((w, s), []).append((text, ok))

    order = list(WORKLOADS)
    sys_rank = lambda s: (0 if s.startswith("kiln") else 2 if s == "machine" else 1, s)  # noqa: E731
    table = []
    for key in sorted(keys, key=lambda k: (order.index(k[0]) if k[0] in order else 99, sys_rank(k[1]))):
        w, s = key
        title, nbytes, flops = WORKLOADS.get(w, (w, None, None))
        t = med.get(key)
        ts = samples.get(key, [])
        row = {"workload": w, "title": title, "system": s, "median_s": t, "samples_s": ts,
               "spread_pct": (100 * (max(ts) - min(ts)) / t) if ts and t else None}
        if key in errors and t is None:
            row["note"] = errors[key]
        if t:
            if nbytes:
                row["gb_per_s"] = nbytes / t / 1e9
                if peak_bw and not w.startswith("stream"):
                    row["fraction_of_limit"] = row["gb_per_s"] * 1e9 / peak_bw
            if flops:
                f = extra.get(key) if flops == "counter" else flops
                if f:
                    row["gflop_per_s"] = f / t / 1e9
                    if peak_flops and not w.startswith("peak"):
                        row["fraction_of_limit"] = f / t / peak_flops
            peers = [med[k] for k in med if k[0] == w and not k[1].startswith("kiln") and k[1] != "machine"]
            if peers and s != "machine":
                row["vs_best_peer"] = min(peers) / t
        if key in goal_of:
            row["goals"] = [{"goal": g, "met": ok} for g, ok in goal_of[key]]
        table.append(row)

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    # Changes to the files a bench run writes itself (scripts/bench.sh writes
    # bench/RESULTS-torch.md before this script) do not make the tree dirty.
    git_status = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.splitlines()
    written = re.compile(r"bench/(RESULTS[^/]*\.md|results\.json)$")
    dirty = [line for line in git_status if not written.search(line[3:])]
    load_after = os.getloadavg()
    cpu = platform.processor() or ""
    isa = "avx2"
    try:
        info = {}  # the first core's fields
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
        cpu = info.get("model name", cpu)
        # VMs often name the CPU by vendor alone ("AMD EPYC"): the family and model tell the core
        # (family 25 is Zen 3, without AVX-512, or Zen 4, with half-width AVX-512 units; family 26 is
        # Zen 5, with full-width ones).
        family, model = info.get("cpu family"), info.get("model")
        if family and model:
            core = cpu_core_name(info.get("vendor_id", ""), int(family), int(model))
            cpu += f" (family {family} model {model}" + (f": {core}" if core else "") + ")"
        flags = info.get("flags", "").split()
        isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "scalar"
        amx = "amx_bf16" in flags
    except OSError:
        amx = False
    meta = {
        "isa": isa,
        # The kind of machine a full run's copy is kept for: AVX-512 machines with and without AMX
        # run different bf16 kernels and have different cache sizes (Sapphire Rapids, Zen 4).
        "machine_kind": isa + ("-amx" if amx else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "mode": "quick" if a.quick else "full", "rounds": rounds, "repetitions_per_round": reps,
        "cpu": cpu, "cores": os.cpu_count(), "load_before": load_before, "load_after": load_after,
        "duration_s": round(time.time() - started),
        "peers": {k: {"status": v[0], "detail": v[1]} for k, v in status.items()},
        "peer_versions": versions, "goals": [dict(zip(("workload", "system", "goal", "measured", "met"), g))
                                             for g in goal_list], "process_errors": proc_errors,
        "machine_limits": {"peak_gb_per_s": peak_bw and peak_bw / 1e9,
                           "peak_gflop_per_s": peak_flops and peak_flops / 1e9},
        "env": {k: base_env.get(k) for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
                                             "KILN_NUM_THREADS", "KILN_CACHE", "XLA_FLAGS")},
        "blas_vars_outside_blas_rows": {k: os.environ.get(k) for k in BLAS_VARS},
    }
    with open(a.json, "w") as f:
        json.dump({"meta": meta, "rows": table}, f, indent=1)
    write_md(a.md, meta, table, goal_list, a.quick)
    # Machines of our kind differ in ISA, and the goals must hold on each: the latest full
    # run of each kind stays beside RESULTS.md (RESULTS-avx2.md, RESULTS-avx512.md,
    # RESULTS-avx512-amx.md).
    by_isa = os.path.join(os.path.dirname(os.path.abspath(a.md)), f"RESULTS-{meta['machine_kind']}.md")
    if not a.quick and os.path.abspath(a.md) == os.path.join(HERE, "RESULTS.md"):
        shutil.copyfile(a.md, by_isa)
        print(f"wrote {a.md} (and {by_isa}) and {a.json} in {meta['duration_s']} s")
    else:
        print(f"wrote {a.md} and {a.json} in {meta['duration_s']} s")
    return 0


def write_md(path, meta, table, goal_list, quick):
    L = []
    L.append("# Kiln benchmark results\n")
    L.append(f"Generated by `scripts/bench.sh{' --quick' if quick else ''}` on {meta['date']}, commit "
             f"{meta['commit']}, in {meta['duration_s']} s. Do not edit by hand: rerun the command.\n")
    L.append("## Methodology\n")
    lb, la = meta["load_before"], meta["load_after"]
    kind = meta.get("machine_kind", meta.get("isa", "?"))
    others = ", ".join(f"`bench/RESULTS-{k}.md`" for k in ("avx2", "avx512", "avx512-amx") if k != kind)
    L.append(f"- Machine: {meta['cpu']}, {meta['cores']} cores, widest vector ISA {meta.get('isa', '?').upper()}"
             f"{' with AMX' if kind.endswith('-amx') else ''} (the latest full runs on the other kinds of machine: "
             f"{others}). It is shared with other engineers' builds: "
             f"load average (1/5/15 min) was {lb[0]:.2f}/{lb[1]:.2f}/{lb[2]:.2f} at the start and "
             f"{la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f} at the end, so absolute figures carry that noise; ratios between "
             "rows measured in the same rounds are the trustworthy reading.")
    L.append("- Threads: every system uses 2 threads (the machine's cores): Kiln `KILN_NUM_THREADS=2`, hand-written "
             "loops a 2-thread TBB arena with static halves, `OMP_NUM_THREADS=2` and `OMP_WAIT_POLICY=PASSIVE` "
             "(PyTorch, oneDNN), `OPENBLAS_NUM_THREADS=2`, ONNX Runtime `intra_op_num_threads=2`, XLA its default "
             "CPU pool (2 cores), IREE's local-task driver `--task_topology_group_count=2` (IREE compiles the jax "
             "rows' StableHLO for the host CPU), tinygrad its CPU device's default (one worker per core). STREAM and peak-FMA rows are measured with 1 and 2 threads.")
    L.append(f"- Alternation: {meta['rounds']} round(s); in each, every measuring process runs once (Kiln "
             "interpreted + native peers + machine limits, OpenBLAS, Kiln compiled, then each Python peer), the "
             "order rotated between rounds. Inside a Google Benchmark process the repetitions of all rows are "
             "randomly interleaved (`--benchmark_enable_random_interleaving`).")
    L.append(f"- Repetitions: {meta['repetitions_per_round']} per round per row, each timing a batch of iterations "
             f"lasting at least {'0.1' if quick else '0.4'} s (C++) / {'0.1' if quick else '0.3'} s (Python) after "
             "warm-up runs. Kiln rows warm up 1–3 runs first; a compiled row is timed only if its warm-up ran compiled "
             "code (`KILN_JIT=sync`, threshold 1), otherwise it reports an error; then the row's hot GEMM shapes finish "
             "their tier-2 blocking trials (`KILN_TUNE`; at most 64 more runs, confirming runs included), as in a long-running loop. jax.jit and "
             "torch.compile compile during warm-up. Wall-clock time everywhere.")
    L.append(f"- The transformer loop's rows come from {TRANSFORMER_PROCESSES_PER_ROUND} fresh processes per "
             "KILN_JIT mode and round, the modes alternating (one sample each of a process's step time, first 40 "
             "and first 200 steps).")
    L.append("- Median: the median of all repetitions of all rounds. Spread: (max − min) / median over the same "
             "samples. Ratio to best peer: best non-Kiln median / this row's median (> 1: faster than every peer). "
             "Fraction of machine limit: GB/s over the best 2-thread STREAM bandwidth (copy or triad, best "
             "repetition, as STREAM reports) for memory-streaming rows, GFLOP/s over the best 2-thread peak FMA rate "
             "for matmul/MLP rows. Under load a limit can be measured low, so a fraction above 1 means the limit "
             "row was squeezed by other processes.")
    L.append("- Bytes count one read of each input and one write of the output (STREAM convention). MLP FLOPs are "
             "those of its matmuls: 2 × batch × parameters forward, as many for the weight gradients, and for the "
             "input gradients of every layer but the first (6 × batch × parameters − 2 × batch × 784 × 512). Compile latency is the compiler's own time "
             "(`stats().compile_ms`) for a trace recorded anew each time (new constants, so a new TraceKey).")
    bv = meta["blas_vars_outside_blas_rows"]
    bv_text = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in bv.items())
    L.append("- `OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` are removed from the environment of the OpenBLAS and NumPy "
             f"processes only; elsewhere they are left as found ({bv_text}).")
    L.append("- Peers: " + "; ".join(
        f"{PEER_LABEL.get(k, k)} {v['status']}" + (f" ({v['detail']})" if v['detail'] else "")
        for k, v in sorted(meta["peers"].items())) + ". Installed by `bench/setup_peers.sh`; a missing peer keeps "
        "its rows, marked missing.")
    if meta["process_errors"]:
        L.append("- Processes that failed: " + "; ".join(f"{k}: {v}" for k, v in meta["process_errors"].items()))
    ml = meta["machine_limits"]
    L.append(f"- Machine limits measured in this run: {ml['peak_gb_per_s'] or 0:.1f} GB/s (2-thread STREAM), "
             f"{ml['peak_gflop_per_s'] or 0:.1f} GFLOP/s (2-thread FP32 FMA).\n")

    L.append("## Kiln goals\n")
    L.append("Absolute goals (ns, µs, ms) were set on an idle machine; ratio goals compare rows measured in the same "
             "rounds and hold under load. The 1-thread peak-FMA row shows how much of a core this run got.\n")
    L.append("| workload | system | goal | measured | met |")
    L.append("|---|---|---|---|---|")
    for w, s, text, measured, ok in goal_list:
        L.append(f"| {w} | {s} | {text} | {measured} | "
                 f"{'met' if ok else 'not measured' if ok is None else '**not met**'} |")
    L.append("")
    L.append("## All rows\n")
    L.append("| workload | system | median | spread | GB/s | GFLOP/s | vs best peer | fraction of machine limit | Kiln goal |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for r in table:
        g = "; ".join(f"{x['goal']}: {'met' if x['met'] else 'not measured' if x['met'] is None else '**not met**'}"
                      for x in r.get("goals", []))
        if r["median_s"] is None:
            L.append(f"| {r['workload']} | {r['system']} | {r.get('note', '—')} | | | | | | {g} |")
            continue
        f = lambda k, spec: format(r[k], spec) if r.get(k) is not None else ""  # noqa: E731
        L.append(f"| {r['workload']} | {r['system']} | {fmt_time(r['median_s'])} | {r['spread_pct']:.0f}% | "
                 f"{f('gb_per_s', '.1f')} | {f('gflop_per_s', '.1f')} | {f('vs_best_peer', '.2f')} | "
                 f"{f('fraction_of_limit', '.2f')} | {g} |")
    L.append("")
    L.append("Workloads: " + "; ".join(f"`{k}`: {v[0]}" for k, v in WORKLOADS.items()) + ".\n")
    # The PyTorch backend's rows (bench/torch_backend.py, run by scripts/bench.sh when the Python
    # package is built).
    torch_md = os.path.join(HERE, "RESULTS-torch.md")
    if os.path.exists(torch_md):
        with open(torch_md) as fh:
            L.append(fh.read())
    with open(path, "w") as fh:
        fh.write("\n".join(L))


if __name__ == "__main__":
    sys.exit(main())
