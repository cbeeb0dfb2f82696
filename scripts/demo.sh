#!/usr/bin/env bash
# The main job: builds Kiln and runs the training demo.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}
# The demo needs no Python: a new build directory leaves the package out.
export KILN_PYTHON=${KILN_PYTHON:-keep}
if [ -d samples/train_digits ]; then
  bash scripts/build.sh --target train_digits
  exec "$BUILD_DIR/samples/train_digits" "$@"
fi
bash scripts/build.sh --target quickstart
exec "$BUILD_DIR/samples/quickstart" "$@"
