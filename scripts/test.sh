#!/usr/bin/env bash
# Builds everything and runs every test (unit, lit, samples) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}
bash scripts/build.sh
cd "$BUILD_DIR"
ctest --output-on-failure -j"${KILN_TEST_JOBS:-2}" "$@"
