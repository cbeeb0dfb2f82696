"""Trains a digits classifier with PyTorch, once in eager mode and once
through torch.compile(backend="kiln"), from identical initial weights and
batches: the MLP (64-128-64-10, ReLU, cross-entropy, Adam; the same model as
samples/train_digits) or, with --model cnn, a small CNN on the 8x8 images
(3x3 convolutions 1->8 and 8->16 with stride 2, ReLU, a linear layer). Kiln runs the forward and backward graphs that AOTAutograd hands it;
after a couple of steps their traces run as compiled kernels.

Passes ("train_digits_torch: PASS") when
  - every step's loss through Kiln matches eager within --loss-tolerance
    (relative, default 1e-4: both compute in f32, in a different order),
  - the final test accuracy is at least --min-accuracy (default 0.95),
  - at least --min-compiled-steps Kiln traces ran compiled (default 1).

  python samples/python/train_digits_torch.py [--model mlp|cnn] [--epochs N] [--batch B]
"""
import argparse
import copy
import gzip
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv.gz")


def load_digits(path):
    rows = [line.split(",") for line in gzip.open(path, "rt").read().splitlines() if line]
    x = torch.tensor([[float(v) / 16.0 for v in r[:64]] for r in rows])
    y = torch.tensor([int(r[64]) for r in rows])
    return x, y


def make_model(kind):
    if kind == "cnn":
        # The 64 pixels as a 1x8x8 image; the stride-2 convolution halves it to 4x4.
        return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(256, 10))
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--loss-tolerance", type=float, default=1e-4)
    ap.add_argument("--min-accuracy", type=float, default=0.95)
    ap.add_argument("--min-compiled-steps", type=int, default=1)
    ap.add_argument("--data", default=DATA)
    args = ap.parse_args()

    x, y = load_digits(args.data)
    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(y), generator=gen)
    n_train = int(0.8 * len(y))
    train, test = perm[:n_train], perm[n_train:]
    n_batches = n_train // args.batch  # whole batches only: one shape, one trace per step

    torch.manual_seed(0)
    eager = make_model(args.model)
    on_kiln = copy.deepcopy(eager)
    compiled = torch.compile(on_kiln, backend="kiln")
    opt_e = torch.optim.Adam(eager.parameters(), lr=args.lr)
    opt_k = torch.optim.Adam(on_kiln.parameters(), lr=args.lr)

    kiln.reset_stats()
    worst = 0.0
    t_eager = t_kiln = 0.0
    for epoch in range(args.epochs):
        order = train[torch.randperm(n_train, generator=gen)]
        loss_e_sum = loss_k_sum = 0.0
        for b in range(n_batches):
            idx = order[b * args.batch:(b + 1) * args.batch]
            xb, yb = x[idx], y[idx]
            losses = []
            for model, opt in ((eager, opt_e), (compiled, opt_k)):
                start = time.perf_counter()
                opt.zero_grad()
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
                elapsed = time.perf_counter() - start
                if model is eager:
                    t_eager += elapsed
                else:
                    t_kiln += elapsed
            worst = max(worst, abs(losses[1] - losses[0]) / max(abs(losses[0]), 1e-12))
            loss_e_sum += losses[0]
            loss_k_sum += losses[1]
        print(f"epoch {epoch + 1:2d}: loss eager {loss_e_sum / n_batches:.5f} kiln {loss_k_sum / n_batches:.5f}  "
              f"test accuracy eager {accuracy(eager, x[test], y[test]):.4f} "
              f"kiln {accuracy(compiled, x[test], y[test]):.4f}")

    steps = args.epochs * n_batches
    s = kiln.stats()
    acc = accuracy(compiled, x[test], y[test])
    print(f"model {args.model}: {steps} steps: {1e3 * t_eager / steps:.3f} ms/step eager, {1e3 * t_kiln / steps:.3f} ms/step kiln")
    print(f"largest relative loss difference kiln vs eager: {worst:.2e} (tolerance {args.loss_tolerance:.0e})")
    print(f"kiln traces: {s.traces_recorded} recorded, {s.interpreted_runs} interpreted, "
          f"{s.compiled_runs} compiled ({s.compiles} compiles, {s.compile_ms:.0f} ms)")
    ok = True
    if worst > args.loss_tolerance:
        print("train_digits_torch: FAIL: losses differ from eager beyond the tolerance")
        ok = False
    if acc < args.min_accuracy:
        print(f"train_digits_torch: FAIL: test accuracy {acc:.4f} < {args.min_accuracy}")
        ok = False
    if s.compiled_runs < args.min_compiled_steps:
        print(f"train_digits_torch: FAIL: {s.compiled_runs} Kiln traces ran compiled, "
              f"{args.min_compiled_steps} required")
        ok = False
    print("train_digits_torch: PASS" if ok else "train_digits_torch: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
