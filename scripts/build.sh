#!/usr/bin/env bash
# Configures and builds Kiln (Release, Ninja, ccache) in build/ with 2 jobs.
# Extra arguments are passed to `cmake --build` (e.g. --target quickstart).
# The Python package (python/) is built too, with the virtual environment of
# scripts/setup-python.sh; KILN_PYTHON=0 leaves it out, and KILN_PYTHON=keep
# (the demo's) keeps an existing build directory as it is configured and
# leaves the package (and its PyTorch download) out of a new one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${KILN_BUILD_DIR:-build}
# Paths inside the clone hash relative to it, so build-wheel/ (pip, the same
# depth as build/) reuses build/'s objects wherever the clone lives.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
JOBS=${KILN_BUILD_JOBS:-2}
PYTHON_ARGS=(-DKILN_PYTHON=OFF)
if [ "${KILN_PYTHON:-1}" = keep ] && [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  configured=$(grep -m1 '^KILN_PYTHON:BOOL=' "$BUILD_DIR/CMakeCache.txt" | cut -d= -f2 || true)
  PYTHON_ARGS=("-DKILN_PYTHON=${configured:-OFF}")
elif [ "${KILN_PYTHON:-1}" != 0 ] && [ "${KILN_PYTHON:-1}" != keep ]; then
  PYTHON_ARGS=(-DKILN_PYTHON=ON "-DPython_EXECUTABLE=$(bash scripts/setup-python.sh)")
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${PYTHON_ARGS[@]}"
elif ! grep -qx "KILN_PYTHON:BOOL=${PYTHON_ARGS[0]#-DKILN_PYTHON=}" "$BUILD_DIR/CMakeCache.txt"; then
  cmake "$BUILD_DIR" "${PYTHON_ARGS[@]}"  # an existing build directory switches the package on or off
fi
cmake --build "$BUILD_DIR" -j"$JOBS" "$@"
