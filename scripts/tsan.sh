#!/usr/bin/env bash
# Builds Kiln with ThreadSanitizer in build-tsan/ and runs the tests that
# exercise threads: recorder hand-off between threads, concurrent recording,
# allocator and stream/event conformance, the C ABI from several threads, and
# (with the compiler) background compilation while threads record and run.
# Not part of scripts/test.sh: a TSan build takes about as long as a normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${KILN_TSAN_BUILD_DIR:-build-tsan}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE_THREAD=ON \
    -DKILN_BUILD_BENCH=OFF "$@"
fi
cmake --build "$BUILD_DIR" -j"${KILN_BUILD_JOBS:-2}"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
cd "$BUILD_DIR"
ctest --output-on-failure -R "kiln_trace_tests|kiln_backend_tests|kiln_capi_tests|kiln_tiering_tests"
