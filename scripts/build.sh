#!/usr/bin/env bash
# Configure and build qgru into build/ (Release): every target (the CLI, the libraries, the CUDA executor when nvcc
# is found, the tests and benchmarks). Usage: scripts/build.sh [extra cmake args...]
# QGRU_BUILD_TARGETS="qgru ..." builds those targets only (scripts/example.sh: the CLI alone). A new build folder
# uses Ninja when it is installed (scripts/setup.sh installs it); an existing one keeps its generator.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGRU_BUILD_DIR:-$root/build}"
source "$root/scripts/compiler_cache.sh"
generator_args=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator_args=(-G Ninja); fi
# QGRU_BUILD_TESTS=OFF (scripts/example.sh) leaves test/ out; any other run configures it, also in a folder the
# example configured first.
cmake -S "$root" -B "$build" "${generator_args[@]}" -DCMAKE_BUILD_TYPE=Release "${compiler_cache_args[@]}" \
  -DQGRU_BUILD_TESTS="${QGRU_BUILD_TESTS:-ON}" "$@" >&2
target_args=()
if [ -n "${QGRU_BUILD_TARGETS:-}" ]; then
  read -r -a targets <<<"$QGRU_BUILD_TARGETS"
  target_args=(--target "${targets[@]}")
fi
cmake --build "$build" -j "$(nproc)" "${target_args[@]}" >&2
