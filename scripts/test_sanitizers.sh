#!/usr/bin/env bash
# Build qgru, its unit tests and its fuzz targets with clang, AddressSanitizer + UndefinedBehaviorSanitizer and
# libFuzzer's coverage hooks (scripts/configure_sanitized.sh, CUDA off) into build-asan/ and run tests there
# (docs/HARDENING.md). Any sanitizer report fails the test that triggered it (-fno-sanitize-recover=all,
# halt_on_error). Called by scripts/test.sh after the main ctest; scripts/fuzz.sh reuses the same tree.
#   QGRU_SANITIZE_SCOPE=ci (default, what CI runs): builds qgru, every unit test, test_capi_c and the fuzz
#       targets; runs every test ctest knows in this tree (unit, CLI and C API tests; none is left out).
#       While ctest runs, a short fuzz run goes on beside it (scripts/fuzz.sh: every target for
#       QGRU_FUZZ_SECONDS, default 8 s, about a minute in all, seeded from test/corpus/); any finding fails
#       the stage. Beside the tests it mostly fills the core the longest unit tests leave idle.
#       QGRU_FUZZ_SECONDS=0 skips it.
#   QGRU_SANITIZE_SCOPE=readers: builds the qgru binary only and runs every cli_* test (no fuzz run).
#   QGRU_SANITIZE_SCOPE=all: every target and every test (no fuzz run).
#   QGRU_SKIP_SANITIZERS=1: skip. Extra arguments go to ctest (e.g. -R corpus).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGRU_ASAN_BUILD_DIR:-$root/build-asan}"
jobs="${QGRU_JOBS:-$(nproc)}"
scope="${QGRU_SANITIZE_SCOPE:-ci}"
if [ "${QGRU_SKIP_SANITIZERS:-0}" = 1 ]; then
  echo "test_sanitizers: skipped (QGRU_SKIP_SANITIZERS=1)" >&2
  exit 0
fi
case "$scope" in
  ci | readers | all) ;;
  *) echo "test_sanitizers: QGRU_SANITIZE_SCOPE must be ci, readers or all, got '$scope'" >&2 && exit 2 ;;
esac
start=$(date +%s)
bash "$root/scripts/configure_sanitized.sh" "$build"
tests=()
case "$scope" in
  ci)
    # Unit test targets as test/CMakeLists.txt makes them: one per test/unit/<area>/ holding .cpp files, where the
    # sanitized tree has it (it builds without CUDA, so not test_cuda).
    targets=(qgru test_capi_c)
    known_targets=$(cmake --build "$build" --target help)
    for dir in "$root"/test/unit/*/; do
      target="test_$(basename "$dir")"
      compgen -G "$dir*.cpp" >/dev/null && grep -qE "(^|[ .])$target(:|\$)" <<<"$known_targets" && targets+=("$target")
    done
    targets+=(fuzz_safetensors fuzz_npy fuzz_npz fuzz_stats fuzz_bitwidth_config fuzz_artifact fuzz_gptq_checkpoint fuzz_onnx)
    cmake --build "$build" -j "$jobs" --target "${targets[@]}" >&2
    ;;
  readers)
    cmake --build "$build" -j "$jobs" --target qgru >&2
    tests=(-R '^cli_')
    ;;
  all) cmake --build "$build" -j "$jobs" >&2 ;;
esac
built=$(date +%s)
# hard_rss_limit_mb: the 8 GiB memory bound corpus.sh puts on Release runs (ASan's shadow memory rules out
# an address-space limit here), so an unbounded allocation still fails its test.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1:hard_rss_limit_mb=8192}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export QGRU_SANITIZED=1
# OpenBLAS threads only slow the instrumented GEMMs down on a small machine.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
fuzz_seconds="${QGRU_FUZZ_SECONDS:-8}"
fuzz_pid=""
if [ "$scope" = ci ] && [ "$fuzz_seconds" != 0 ]; then
  mkdir -p "$build/fuzz_logs"
  # libFuzzer sets its own sanitizer options (leaks, rss and malloc limits); the test-run options are not its.
  (unset ASAN_OPTIONS UBSAN_OPTIONS && QGRU_FUZZ_BUILD=0 QGRU_FUZZ_BUILD_DIR="$build" \
    bash "$root/scripts/fuzz.sh" "$fuzz_seconds") >"$build/fuzz_logs/summary.txt" 2>&1 &
  fuzz_pid=$!
fi
status=0
(cd "$build" && ctest --output-on-failure -j "$jobs" "${tests[@]}" "$@") || status=$?
tested=$(date +%s)
fuzz_note=""
if [ -n "$fuzz_pid" ]; then
  fuzz_status=0
  wait "$fuzz_pid" || fuzz_status=$?
  cat "$build/fuzz_logs/summary.txt" >&2
  if [ "$fuzz_status" != 0 ]; then
    echo "test_sanitizers: the fuzz run found something (reproducers above; docs/HARDENING.md, Fuzzing)" >&2
    status=1
  fi
  fuzz_note=", fuzz run ${fuzz_seconds} s per target beside the tests, done $(($(date +%s) - tested)) s after them"
fi
echo "test_sanitizers: scope $scope, build $((built - start)) s, tests $((tested - built)) s$fuzz_note (ASan+UBSan, $build)" >&2
exit $status
