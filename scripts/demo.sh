#!/usr/bin/env bash
# The main job: builds Kiln and runs the training demo.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_BUILD_DIR:-build}
if [ -d samples/train_digits ]; then
  bash scripts/build.sh --target train_digits
  exec "$BUILD_DIR/samples/train_digits" "$@"
fi
bash scripts/build.sh --target quickstart
exec "$BUILD_DIR/samples/quickstart" "$@"
