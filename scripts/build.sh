#!/usr/bin/env bash
# Configures and builds Kiln (Release, Ninja, ccache) in build/ with 2 jobs.
# Extra arguments are passed to `cmake --build` (e.g. --target quickstart).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${KILN_BUILD_DIR:-build}
JOBS=${KILN_BUILD_JOBS:-2}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$BUILD_DIR" -j"$JOBS" "$@"
