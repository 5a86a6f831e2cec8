#!/usr/bin/env bash
# Set up, build (CUDA targets included when nvcc is present) and run every test. The README's test command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" -DQGRU_WERROR=ON
build="${QGRU_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
# Sanitizers (harden, docs/HARDENING.md): ASan + UBSan build of qgru in build-asan/, then the CLI tests on
# malformed and concurrent input there. QGRU_SKIP_SANITIZERS=1 skips it; QGRU_SANITIZE_SCOPE=all runs everything.
bash "$root/scripts/test_sanitizers.sh"
