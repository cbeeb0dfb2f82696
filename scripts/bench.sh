#!/usr/bin/env bash
# Builds the benchmark suite, installs its peers and runs Kiln (interpreted and
# compiled) against them; writes bench/RESULTS.md (a full run also
# bench/RESULTS-<isa>.md) and bench/results.json.
#
#   scripts/bench.sh [--quick]     (--quick: a few minutes; full: 15 to 35)
#
# Build folder: build-bench (KILN_BENCH_BUILD_DIR changes it). A peer that
# cannot be installed is reported as missing, never fatal.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=()
for a in "$@"; do
  case "$a" in
    --quick) QUICK=(--quick) ;;
    *) echo "usage: scripts/bench.sh [--quick]" >&2; exit 2 ;;
  esac
done
BUILD_DIR=${KILN_BENCH_BUILD_DIR:-build-bench}
bash scripts/setup.sh
bash bench/setup_peers.sh "$BUILD_DIR" || true
# -U: forget peers not found by an earlier configure (setup_peers may have installed them since).
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -U 'KILN_BENCH_*' >/dev/null
targets=(--target kiln_bench --target kiln_bench_transformer)
grep -q '^KILN_BUILD_COMPILER:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" && targets+=(--target kiln_jit)
# Data-parallel rows (mpirun): the all-reduce bench and the demo, where MPI was found.
if ninja -C "$BUILD_DIR" -t targets all 2>/dev/null | grep -q '^kiln_dist_bench:'; then
  targets+=(--target kiln_dist_bench --target train_digits)
fi
cmake --build "$BUILD_DIR" -j"${KILN_BUILD_JOBS:-2}" "${targets[@]}"
# The PyTorch backend against Inductor and eager (bench/RESULTS-torch.md), with the package of build/.
if [ -d build/python/kiln ] && [ -x "${KILN_PY_VENV:-$HOME/.cache/kiln-python/venv}/bin/python" ]; then
  steps=50; [ ${#QUICK[@]} -gt 0 ] && steps=10
  PYTHONPATH=build/python KILN_CACHE=off "${KILN_PY_VENV:-$HOME/.cache/kiln-python/venv}/bin/python" \
    bench/torch_backend.py --steps "$steps" --md bench/RESULTS-torch.md || echo "bench: bench/torch_backend.py failed" >&2
fi
python3 bench/run_bench.py --build "$BUILD_DIR" "${QUICK[@]}"
