#!/usr/bin/env bash
# Configures and builds Kiln (Release, Ninja, ccache) in build/ with 2 jobs.
# Extra arguments are passed to `cmake --build` (e.g. --target quickstart).
# The Python package (python/) is built too, with the virtual environment of
# scripts/setup-python.sh; KILN_PYTHON=0 leaves it out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${KILN_BUILD_DIR:-build}
# Paths inside the clone hash relative to it, so build-wheel/ (pip, the same
# depth as build/) reuses build/'s objects wherever the clone lives.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
JOBS=${KILN_BUILD_JOBS:-2}
PYTHON_ARGS=(-DKILN_PYTHON=OFF)
if [ "${KILN_PYTHON:-1}" != 0 ]; then
  PYTHON_ARGS=(-DKILN_PYTHON=ON "-DPython_EXECUTABLE=$(bash scripts/setup-python.sh)")
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${PYTHON_ARGS[@]}"
elif ! grep -qx "KILN_PYTHON:BOOL=${PYTHON_ARGS[0]#-DKILN_PYTHON=}" "$BUILD_DIR/CMakeCache.txt"; then
  cmake "$BUILD_DIR" "${PYTHON_ARGS[@]}"  # an existing build directory switches the package on or off
fi
cmake --build "$BUILD_DIR" -j"$JOBS" "$@"
