#!/usr/bin/env bash
# Set up, build (CUDA targets included when nvcc is present) and run every test. The README's test command.
# Each stage's wall time is printed as it ends and again in a table at the end ("test: stage ... s"), the profile
# docs/BENCHMARKS.md ("The README's two commands") quotes; scripts/build_profile.py gives the compile time per
# target and per file from a build folder's Ninja log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGRU_BUILD_DIR:-$root/build}"
stages=()
stage_started=$SECONDS
# stage_done NAME: records the time since the previous stage ended.
stage_done() {
  local seconds=$((SECONDS - stage_started))
  stages+=("$(printf '%-34s %5d s' "$1" "$seconds")")
  echo "test: $1 done in $seconds s" >&2
  stage_started=$SECONDS
}

bash "$root/scripts/setup.sh"
stage_done "setup (apt packages)"
# The CUDA 12 wheels are a download (no CPU to speak of): fetched while the main build compiles.
cuda12_fetch=""
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ "${QGRU_SKIP_CUDA12:-0}" != 1 ]; then
    mkdir -p "$build"
    bash "$root/scripts/cuda12_toolchain.sh" >/dev/null 2>"$build/cuda12_fetch.log" &
    cuda12_fetch=$!
  fi
fi
bash "$root/scripts/build.sh" -DQGRU_WERROR=ON
stage_done "build (Release, every target)"
(cd "$build" && ctest --output-on-failure -j "$(nproc)")
stage_done "ctest (Release tree)"
# The second toolkit (docs/CUDA.md "Toolkits and drivers"): with CUDA built, the CUDA-facing host code compiles
# and links against CUDA 12.4 (PyPI wheels in a cached private venv) and ptxas 12.4 assembles every kernel with
# no spill. About 1 minute, plus about 30 s the first time (the wheels). QGRU_SKIP_CUDA12=1 skips it.
if [ -n "$cuda12_fetch" ]; then
  wait "$cuda12_fetch" || { cat "$build/cuda12_fetch.log" >&2; exit 1; }
fi
if [ -x "$build/test/test_cuda_gpu" ] && [ "${QGRU_SKIP_CUDA12:-0}" != 1 ]; then
  bash "$root/scripts/check_cuda12.sh" "$build"
  stage_done "CUDA 12 check"
fi
# Sanitizers (docs/HARDENING.md): clang ASan + UBSan build of qgru, the unit tests and the fuzz targets in
# build-asan/, then the unit tests and the CLI tests there with a short fuzz run of every reader beside them
# (QGRU_FUZZ_SECONDS per target, default 8; any finding fails). QGRU_SKIP_SANITIZERS=1 skips it all;
# QGRU_SANITIZE_SCOPE picks what runs (ci, the default; readers; all).
bash "$root/scripts/test_sanitizers.sh"
stage_done "ASan + UBSan (build, tests, fuzz)"
# ThreadSanitizer (docs/HARDENING.md, "Threads"): the runtime's C API tests and the fast executor's thread cases
# in build-tsan/. About a minute warm, three to four cold. QGRU_SKIP_TSAN=1 skips it.
bash "$root/scripts/test_tsan.sh"
stage_done "TSan (build, tests)"
echo "test: every stage passed; wall time per stage:" >&2
printf '  %s\n' "${stages[@]}" >&2
echo "  $(printf '%-34s %5d s' total "$SECONDS")" >&2
