#!/usr/bin/env bash
# Set up, build (CUDA targets included when nvcc is present) and run every test. The README's test command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" -DQGRU_WERROR=ON
build="${QGRU_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
# The second toolkit (docs/CUDA.md "Toolkits and drivers"): with CUDA built, the CUDA-facing host code compiles
# and links against CUDA 12.4 (PyPI wheels in a cached private venv) and ptxas 12.4 assembles every kernel with
# no spill. About 1 minute, plus about 30 s the first time (the wheels). QGRU_SKIP_CUDA12=1 skips it.
if [ -x "$build/test/test_cuda_gpu" ] && [ "${QGRU_SKIP_CUDA12:-0}" != 1 ]; then
  bash "$root/scripts/check_cuda12.sh" "$build"
fi
# Sanitizers (docs/HARDENING.md): clang ASan + UBSan build of qgru, the unit tests and the fuzz targets in
# build-asan/, then the unit tests and the CLI tests there with a short fuzz run of every reader beside them
# (QGRU_FUZZ_SECONDS per target, default 8; any finding fails). QGRU_SKIP_SANITIZERS=1 skips it all;
# QGRU_SANITIZE_SCOPE picks what runs (ci, the default; readers; all).
bash "$root/scripts/test_sanitizers.sh"
# ThreadSanitizer (docs/HARDENING.md, "Threads"): the runtime's C API tests and the fast executor's thread cases
# in build-tsan/. About a minute warm, three to four cold. QGRU_SKIP_TSAN=1 skips it.
bash "$root/scripts/test_tsan.sh"
