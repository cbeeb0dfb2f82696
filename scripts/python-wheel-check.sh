#!/usr/bin/env bash
# Checks the Python package as users get it: builds the wheel with `pip wheel .`
# (pyproject.toml; incremental in build-wheel/, ccache-backed), installs it into
# a fresh virtual environment with nothing else, and there imports kiln and
# compiles a hot trace with no environment variable set (libkiln must find
# libkiln_jit inside the package). Argument: the python whose environment has
# nanobind and scikit-build-core (default: scripts/setup-python.sh's).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-$(bash scripts/setup-python.sh)}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # as scripts/build.sh: build/'s objects serve build-wheel/
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m pip wheel . --no-deps --no-build-isolation -q -w "$work/wheel"
"$PY" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-index "$work"/wheel/kiln-*.whl
cd "$work"
env -u KILN_JIT_LIBRARY -u PYTHONPATH KILN_CACHE=off "$work/venv/bin/python" - <<'PYEOF'
import os
import kiln

assert os.path.dirname(kiln.__file__).startswith(os.path.realpath(".")), kiln.__file__
kiln.configure(jit="sync", jit_threshold=1)
x = kiln.arange(16, dtype=kiln.float32)
for _ in range(3):
    y = (kiln.exp(x * 0.1) + 1.0).sum()
    kiln.step()
    value = y.item()
s = kiln.stats()
assert s.compiles > 0 and s.compiled_runs > 0, str(s)
print(f"python-wheel-check: kiln {kiln.__version__} from {os.path.dirname(kiln.__file__)}: "
      f"{s.compiles} compiles, {s.compiled_runs} compiled runs, result {value:.4f}")
PYEOF
echo "python-wheel-check: OK"
