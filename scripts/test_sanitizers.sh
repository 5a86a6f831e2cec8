#!/usr/bin/env bash
# Build qgru with AddressSanitizer + UndefinedBehaviorSanitizer (QGRU_SANITIZE=ON, CUDA off) into build-asan/
# and run tests there (docs/HARDENING.md). Any sanitizer report fails the test that triggered it
# (-fno-sanitize-recover=all, halt_on_error). Called by scripts/test.sh after the main ctest.
#   QGRU_SANITIZE_SCOPE=readers (default, CI): builds the qgru binary only and runs the CLI tests that feed it
#       malformed and concurrent input (corpus, atomic_outputs, gptq_cli, linear, run_float, run_quantized,
#       html_report, ...). Left out for the CI budget: cli_calibrate and cli_golden_reference (minutes under
#       ASan); left out for accuracy: cli_quantize (its int16 SQNR threshold of 40 dB fails at -O1: 39.0 dB,
#       see docs/HARDENING.md).
#   QGRU_SANITIZE_SCOPE=all: every target and every test.
#   QGRU_SKIP_SANITIZERS=1: skip. Extra arguments go to ctest (e.g. -R corpus).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGRU_ASAN_BUILD_DIR:-$root/build-asan}"
jobs="${QGRU_JOBS:-$(nproc)}"
scope="${QGRU_SANITIZE_SCOPE:-readers}"
if [ "${QGRU_SKIP_SANITIZERS:-0}" = 1 ]; then
  echo "test_sanitizers: skipped (QGRU_SKIP_SANITIZERS=1)" >&2
  exit 0
fi
start=$(date +%s)
# -O1 keeps ASan's compile time and the instrumented code's speed in balance; -g for readable reports. No
# -Werror here: GCC's flow warnings report false positives in instrumented code (the main build has -Werror).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DQGRU_SANITIZE=ON -DQGRU_ENABLE_CUDA=OFF >&2
tests=()
case "$scope" in
  readers)
    cmake --build "$build" -j "$jobs" --target qgru >&2
    tests=(-R '^cli_' -E '^cli_(calibrate|golden_reference|quantize)$')
    ;;
  all) cmake --build "$build" -j "$jobs" >&2 ;;
  *) echo "test_sanitizers: QGRU_SANITIZE_SCOPE must be readers or all, got '$scope'" >&2 && exit 2 ;;
esac
built=$(date +%s)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export QGRU_SANITIZED=1
# OpenBLAS threads only slow the instrumented GEMMs down on a small machine.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
status=0
(cd "$build" && ctest --output-on-failure -j "$jobs" "${tests[@]}" "$@") || status=$?
done_at=$(date +%s)
echo "test_sanitizers: scope $scope, build $((built - start)) s, tests $((done_at - built)) s (ASan+UBSan, $build)" >&2
exit $status
