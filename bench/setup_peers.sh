#!/usr/bin/env bash
# Installs the peers the benchmark suite compares Kiln against. Idempotent
# and never fatal: whatever cannot be installed is recorded in
# $BUILD/peers/status.txt and reported as "missing" in bench/RESULTS.md.
#
#   bench/setup_peers.sh [BUILD_DIR]     (default: build-bench)
#
# Debian: Eigen (libeigen3-dev), OpenBLAS (libopenblas-dev), oneDNN
# (libdnnl-dev), PyTorch 1.13 (python3-torch), NumPy (python3-numpy).
# PyPI, into a virtual environment under BUILD_DIR/peers/venv: jax + jaxlib,
# onnxruntime + onnx, IREE (iree-base-compiler + iree-base-runtime; it compiles
# the JAX programs' StableHLO), tinygrad, and PyTorch 2.x (torch.compile) if its wheel installs.
# KILN_BENCH_NO_TORCH2=1 skips the (large) PyTorch 2.x download.
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-${KILN_BENCH_BUILD_DIR:-$here/build-bench}}"
peers="$build/peers"
mkdir -p "$peers"
status="$peers/status.txt"
: > "$status.new"
note() { echo "$1 $2 ${3:-}" >> "$status.new"; echo "setup_peers: $1: $2 ${3:-}"; }

# --- Debian packages -------------------------------------------------------
debs=(libeigen3-dev libopenblas-dev libdnnl-dev python3-torch python3-numpy python3-venv python3-pip)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" != 0 ]; then command -v sudo >/dev/null && sudo -n true 2>/dev/null && sudo="sudo -n"; fi
  if [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; then
    echo "setup_peers: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null 2>&1 || true
    # One at a time: a package that cannot be installed does not block the rest.
    for p in "${missing[@]}"; do
      $sudo apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 || echo "setup_peers: apt-get install $p failed"
    done
  else
    echo "setup_peers: not root and no password-less sudo; cannot install ${missing[*]}"
  fi
fi
# Debian's python3-torch and python3-numpy live in the system interpreter, not
# in whatever python3 comes first on PATH (pyenv, conda).
syspy=/usr/bin/python3; [ -x "$syspy" ] || syspy=python3
deb_ok() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
deb_ok libeigen3-dev && note eigen ok "$(dpkg-query -W -f='${Version}' libeigen3-dev)" || note eigen missing "libeigen3-dev not installable"
deb_ok libopenblas-dev && note openblas ok "$(dpkg-query -W -f='${Version}' libopenblas-dev)" || note openblas missing "libopenblas-dev not installable"
deb_ok libdnnl-dev && note onednn ok "$(dpkg-query -W -f='${Version}' libdnnl-dev)" || note onednn missing "libdnnl-dev not installable"
if "$syspy" -c "import torch" >/dev/null 2>&1; then note torch1 ok "$("$syspy" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
else note torch1 missing "python3-torch not importable"; fi
if "$syspy" -c "import numpy" >/dev/null 2>&1; then note numpy ok "$("$syspy" -c 'import numpy; print(numpy.__version__)')"
else note numpy missing "python3-numpy not importable"; fi

# --- PyPI into a venv ------------------------------------------------------
venv="$peers/venv"
if [ ! -x "$venv/bin/python" ]; then "$syspy" -m venv "$venv" >/dev/null 2>&1 || echo "setup_peers: cannot create venv"; fi
vpy="$venv/bin/python"
pipi() { "$vpy" -m pip install -q --disable-pip-version-check "$@" >> "$peers/pip.log" 2>&1; }
if [ -x "$vpy" ]; then
  "$vpy" -c "import jax, jaxlib" >/dev/null 2>&1 || pipi jax jaxlib || true
  "$vpy" -c "import onnxruntime, onnx" >/dev/null 2>&1 || pipi onnxruntime onnx numpy || true
  "$vpy" -c "import iree.compiler, iree.runtime" >/dev/null 2>&1 || pipi iree-base-compiler iree-base-runtime || true
  "$vpy" -c "import tinygrad" >/dev/null 2>&1 || pipi tinygrad || true
  if [ "${KILN_BENCH_NO_TORCH2:-0}" != 1 ] && [ ! -e "$peers/torch2.failed" ]; then
    if ! "$vpy" -c "import torch, sys; sys.exit(0 if int(torch.__version__.split('.')[0]) >= 2 else 1)" >/dev/null 2>&1; then
      echo "setup_peers: trying PyTorch 2.x from PyPI (large; see $peers/pip.log)"
      timeout 1500 "$vpy" -m pip install -q --disable-pip-version-check torch >> "$peers/pip.log" 2>&1 || touch "$peers/torch2.failed"
    fi
  fi
fi
vimport() { [ -x "$vpy" ] && "$vpy" -c "$1" 2>>"$peers/pip.log"; }
v=$(vimport "import jax; print(jax.__version__)") && note jax ok "$v" || note jax missing "pip install jax jaxlib failed (see $peers/pip.log)"
v=$(vimport "import onnxruntime, onnx; print(onnxruntime.__version__)") && note onnxruntime ok "$v" || note onnxruntime missing "pip install onnxruntime onnx failed (see $peers/pip.log)"
v=$(vimport "from iree.compiler import version; import iree.runtime; print(version.VERSION)") && note iree ok "$v" || note iree missing "pip install iree-base-compiler iree-base-runtime failed (see $peers/pip.log)"
v=$(vimport "from importlib.metadata import version; import tinygrad; print(version('tinygrad'))") && note tinygrad ok "$v" || note tinygrad missing "pip install tinygrad failed (see $peers/pip.log)"
if [ "${KILN_BENCH_NO_TORCH2:-0}" = 1 ]; then note torch2 missing "skipped (KILN_BENCH_NO_TORCH2=1)"
else
  # The torch.compile smoke test (it runs Inductor's C++ compiler) is done once per installed version.
  v=$(vimport "import torch; assert int(torch.__version__.split('.')[0]) >= 2; print(torch.__version__)")
  if [ -n "$v" ] && [ "$(cat "$peers/torch2.ok" 2>/dev/null)" = "$v" ]; then note torch2 ok "$v"
  elif [ -n "$v" ] && vimport "import torch; f = torch.compile(lambda x: x * 2 + 1); f(torch.ones(8))" >/dev/null; then
    echo "$v" > "$peers/torch2.ok"; note torch2 ok "$v"
  else note torch2 missing "PyTorch 2.x wheel did not install, or torch.compile failed (see $peers/pip.log)"; fi
fi
mv "$status.new" "$status"
exit 0
