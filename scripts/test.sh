#!/usr/bin/env bash
# Set up, build (CUDA targets included when nvcc is present) and run every test. The README's test command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" -DQGRU_WERROR=ON
build="${QGRU_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
