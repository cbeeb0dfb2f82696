#!/usr/bin/env bash
# Builds Kiln with ThreadSanitizer in build-tsan/ (compiler included) and runs
# the tests that exercise threads: recorder hand-off between threads,
# concurrent recording, allocator and stream/event conformance, the C ABI from
# several threads, and user threads recording and running traces while hot
# ones compile in the background (kiln_tiering_tests, kiln_concurrency_tests),
# and the test device (KILN_TEST_DEVICES=1): its stream worker threads (ops,
# copies, launches of compiled kernels and stream-ordered frees run there),
# events between streams and the memory it opens and closes around its work
# (kiln_test_device_tests, the *_test_device entries of ctest: conformance,
# op, scalar-argument and concurrency suites with the test device as the
# default device).
# Not part of scripts/test.sh or CI: a TSan build of the compiler takes about
# as long as a normal one. Extra arguments go to the first configure, e.g.
# `-DKILN_BUILD_COMPILER=OFF` for a quick runtime-only check.
#
# TBB runs with one thread (KILN_NUM_THREADS=1): Debian's libtbb is not
# instrumented, so TSan cannot see the synchronisation of its scheduler and
# reports every parallel_for body against the code around it (false
# positives that would hide real reports). User threads and compile threads
# still run at once; only the split of one kernel over TBB workers is off.
# scripts/tsan.supp holds the suppressions for uninstrumented third-party code.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${KILN_TSAN_BUILD_DIR:-build-tsan}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE_THREAD=ON \
    -DKILN_BUILD_BENCH=OFF "$@"
fi
TESTS=(kiln_trace_tests kiln_backend_tests kiln_capi_tests
       kiln_test_device_tests kiln_backend_tests_test_device kiln_op_tests_test_device)
TARGETS=(kiln_trace_tests kiln_backend_tests kiln_capi_tests kiln_test_device_tests kiln_op_tests)
if grep -q "^KILN_BUILD_COMPILER:BOOL=ON" "$BUILD_DIR/CMakeCache.txt"; then
  TESTS+=(kiln_tiering_tests kiln_concurrency_tests kiln_concurrency_tests_test_device kiln_exit_tests
          kiln_scalar_arg_tests kiln_scalar_arg_tests_test_device)
  TARGETS+=(kiln_tiering_tests kiln_concurrency_tests kiln_exit_tests kiln_scalar_arg_tests)
fi
cmake --build "$BUILD_DIR" -j"${KILN_BUILD_JOBS:-2}" --target "${TARGETS[@]}"
export KILN_NUM_THREADS=${KILN_NUM_THREADS:-1}
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}"
cd "$BUILD_DIR"
ctest --output-on-failure -R "^($(IFS="|"; echo "${TESTS[*]}"))\$"
