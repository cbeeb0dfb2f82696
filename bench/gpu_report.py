#!/usr/bin/env python3
"""Turns the GPU check's timings (results/*.json of scripts/gpu-check.sh's
run.sh) into the Markdown tables of bench/RESULTS-gpu.md.

    python3 bench/gpu_report.py RESULTS_DIR > table.md

Ratios are Kiln's time over PyTorch eager's (below 1: Kiln is faster). The
elementwise goal of issue 14 is read off the fma row: Kiln's tier 0 runs
a * b + c as two kernels (multiply, then add), each reading two 64 MiB
arrays and writing one, so its effective bandwidth is 6 x 64 MiB over its
time, against the device's copy bandwidth (PyTorch's copy_ of 256 MiB: read
and write).
"""
import json
import os
import sys

MIB = 1 << 20
FLOPS = {
    "sgemm_1024": 2 * 1024 ** 3,
    "sgemm_4096x4096x1024": 2 * 4096 * 4096 * 1024,
    "gemm_bf16_1024": 2 * 1024 ** 3,
    "gemm_bf16_4096x4096x1024": 2 * 4096 * 4096 * 1024,
    "mm_bias_relu": 2 * 1024 ** 3,
}
ORDER = ["fma", "chain8", "softmax", "layernorm", "softmax_32768x4096", "layernorm_32768x4096", "sgemm_1024", "sgemm_4096x4096x1024", "gemm_bf16_1024",
         "gemm_bf16_4096x4096x1024", "mm_bias_relu", "mlp_train_step", "embedding_grad", "launch_tiny_step", "dynamic_batches"]


def load(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def us(t):
    return f"{t * 1e6:.1f}" if t is not None else "-"


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "results"
    torch, tier0, replay = load(d, "torch.json"), load(d, "kiln-tier0.json"), load(d, "kiln-replay.json")
    nographs = load(d, "kiln-replay-nographs.json")
    rowkernels = load(d, "kiln-replay-rowkernels.json")
    inductor = load(d, "torch-compile.json")
    row = lambda r, k: (r or {}).get("rows", {}).get(k, {})  # noqa: E731
    out = []
    if torch:
        out.append(f"Device: {torch['device']}; PyTorch {torch['version']} (CUDA {torch['cuda']}), eager, "
                   "TF32 off.\n")
    out.append("| workload | PyTorch eager (us) | Kiln tier 0 (us) | tier 0 / PyTorch | Kiln compiled, replayed (us) "
               "| compiled / PyTorch | compiled share | torch.compile (us) | compiled / torch.compile |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in ORDER:
        t, a, c = row(torch, k).get("median_s"), row(tier0, k).get("median_s"), row(replay, k).get("median_s")
        i = row(inductor, k).get("median_s")
        share = row(replay, k).get("compiled_share")
        ratio = lambda x, y=t: f"{x / y:.2f}x" if x and y else "-"  # noqa: E731
        out.append(f"| {k} | {us(t)} | {us(a)} | {ratio(a)} | {us(c)} | {ratio(c)} | "
                   f"{'-' if share is None else f'{share:.2f}'} | {us(i)} | {ratio(c, i)} |")
    copy = row(torch, "copy_256MiB").get("median_s")
    out.append("")
    if copy:
        bw = 2 * 256 * MIB / copy
        out.append(f"Copy bandwidth (PyTorch copy_ of 256 MiB, read + write): {bw / 1e9:.0f} GB/s.")
        fma0 = row(tier0, "fma").get("median_s")
        if fma0:
            eff = 6 * 64 * MIB / fma0
            out.append(f"Kiln tier-0 elementwise (fma as two kernels, 6 x 64 MiB moved): {eff / 1e9:.0f} GB/s = "
                       f"{eff / bw:.2f} of copy (goal >= 0.7).")
        fmac = row(replay, "fma").get("median_s")
        if fmac and row(replay, "fma").get("compiled_share", 0) > 0.99:
            eff = 4 * 64 * MIB / fmac
            out.append(f"Kiln compiled fma (one fused kernel, 4 x 64 MiB moved): {eff / 1e9:.0f} GB/s = "
                       f"{eff / bw:.2f} of copy.")
    if tier0 and "cublaslt_relu_epilogue" in tier0:
        out.append("cuBLASLt's relu epilogue " + ("keeps NaN, so relus after matmuls run in the matmul's call at tier 0 "
                                                  "(mm_bias_relu: one call)." if tier0["cublaslt_relu_epilogue"] else
                                                  "does not keep NaN, so relus after matmuls run as tier-0 kernels "
                                                  "(mm_bias_relu: a call with the bias epilogue, then a relu kernel)."))
    for k in ("launch_tiny_step", "mlp_train_step", "chain8", "softmax"):
        g, n = row(replay, k).get("median_s"), row(nographs, k).get("median_s")
        if g and n:
            goal = " (a compiled step's launch cost, goal <= 10 us)" if k == "launch_tiny_step" else ""
            out.append(f"{k} compiled: {us(g)} us with CUDA graphs, {us(n)} us launching kernel by kernel "
                       f"(KILN_CUDA_GRAPHS=0){goal}.")
    for k in ("softmax", "layernorm", "softmax_32768x4096", "layernorm_32768x4096"):
        g, r = row(replay, k).get("median_s"), row(rowkernels, k).get("median_s")
        i = row(inductor, k).get("median_s")
        if g and r:
            peer = f", {r / i:.2f}x torch.compile's time" if i else ""
            out.append(f"{k} compiled: {us(g)} us as regions around tier 0's warp reductions, {us(r)} us as one row "
                       f"kernel (KILN_CUDA_ROW_KERNELS=1){peer}.")
    checks = [(name, k, v["check_error"]) for name, r in (("tier 0", tier0), ("compiled", replay),
                                                          ("row kernels", rowkernels), ("no graphs", nographs))
              for k, v in (r or {}).get("rows", {}).items() if v.get("check_error", -1) >= 0]
    if checks:
        worst = max(checks, key=lambda c: c[2])
        out.append(f"Results checked against the CPU interpreter: {len(checks)} rows, the largest error "
                   f"{worst[2]:.2g} of the result's magnitude ({worst[1]}, {worst[0]}).")
    for k, f in FLOPS.items():
        t, a = row(torch, k).get("median_s"), row(tier0, k).get("median_s")
        if t and a:
            out.append(f"{k}: PyTorch {f / t / 1e12:.1f} TFLOP/s, Kiln tier 0 {f / a / 1e12:.1f} TFLOP/s "
                       f"({a / t:.2f}x PyTorch's time; goal for GEMM: within 5%).")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
