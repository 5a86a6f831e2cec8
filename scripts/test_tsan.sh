#!/usr/bin/env bash
# ThreadSanitizer stage (docs/HARDENING.md, "Threads"): clang -fsanitize=thread build of the runtime C API's
# unit tests and the runtime's into build-tsan/, then the cases where threads meet: several contexts and
# states streamed and run from several threads at once, both executors, and the fast executor's worker team.
# Any report fails the stage. Called by scripts/test.sh after the ASan/UBSan stage.
#   QGRU_SKIP_TSAN=1 skips it. QGRU_TSAN_BUILD_DIR picks the tree (default build-tsan/).
# Needs clang and its runtime (scripts/setup.sh installs clang and libclang-rt-14-dev).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ "${QGRU_SKIP_TSAN:-0}" != 1 ] || { echo "test_tsan: skipped (QGRU_SKIP_TSAN=1)" >&2; exit 0; }
build="${QGRU_TSAN_BUILD_DIR:-$root/build-tsan}"
jobs="${QGRU_JOBS:-$(nproc)}"
start=$(date +%s)
# clang, -O1 and line tables as in the ASan tree (file:line in every frame of a report), CUDA off.
bash "$root/scripts/configure_sanitized.sh" "$build" thread
# test_runtime_threads: fast_executor_test.cpp alone, where the fast executor's thread cases live (test/CMakeLists.txt).
cmake --build "$build" -j "$jobs" --target test_runtime_capi test_runtime_threads >"$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log" >&2; exit 1; }
built=$(date +%s)
# halt_on_error: the first report fails the run; second_deadlock_stack: both stacks of a lock-order report.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
# The C API's tests, all of them (every whole run goes through the fast executor's worker team; the thread
# case streams and runs from four threads at once), and the fast executor's own thread cases: a unit split
# over three threads, two runs sharing one team, the batch-1 schedules chosen by measured time.
"$build/test/test_runtime_capi" --no-intro >&2
"$build/test/test_runtime_threads" --test-case='*three threads*,*two threads at once*,*measured time*' --no-intro >&2
echo "test_tsan: build $((built - start)) s, tests $(($(date +%s) - built)) s (ThreadSanitizer, $build)" >&2
