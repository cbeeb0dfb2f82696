#!/usr/bin/env bash
# Builds everything and runs every test (unit, lit, samples) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}
bash scripts/build.sh
# Intel's OpenCL CPU runtime, on which the Level Zero test driver runs the
# SPIR-V kernels; without it those tests skip, saying why.
bash scripts/setup-opencl.sh >/dev/null || echo "test.sh: the OpenCL CPU runtime could not be installed; the Level Zero tests will skip" >&2
cd "$BUILD_DIR"
ctest --output-on-failure -j"${KILN_TEST_JOBS:-2}" "$@"
