#!/usr/bin/env bash
# Configure the sanitizer tree (docs/HARDENING.md): clang, AddressSanitizer + UndefinedBehaviorSanitizer
# (QGRU_SANITIZE=ON, any report fatal) and libFuzzer's coverage hooks in every object (QGRU_FUZZ=ON), CUDA off,
# -O1 -gline-tables-only. One tree gives the unit tests, the CLI tests and the fuzz targets; scripts/test_sanitizers.sh and
# scripts/fuzz.sh both build into it. With "thread" second, the ThreadSanitizer tree of scripts/test_tsan.sh
# instead (QGRU_SANITIZE_THREAD=ON, no fuzzer hooks; TSan cannot share a tree with ASan).
# Usage: scripts/configure_sanitized.sh BUILD_DIR [address|thread]
# Needs clang 14 and its runtime (scripts/setup.sh installs clang and libclang-rt-14-dev).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: configure_sanitized.sh BUILD_DIR [address|thread]}"
case "${2:-address}" in
  address) sanitizer_args=(-DQGRU_SANITIZE=ON -DQGRU_FUZZ=ON) ;;
  thread) sanitizer_args=(-DQGRU_SANITIZE_THREAD=ON) ;;
  *) echo "configure_sanitized.sh: unknown sanitizer '$2' (address or thread)" >&2; exit 2 ;;
esac
command -v clang++ >/dev/null || { echo "sanitizers: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
# A tree configured with another compiler (an older GCC sanitizer tree) cannot be switched in place.
if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$build/CMakeCache.txt"; then
  echo "sanitizers: $build was configured with another compiler; starting it afresh" >&2
  rm -rf "$build"
fi
mkdir -p "$build"
# No -Werror here: the main build has it, and instrumented code is not where warnings are judged.
# -O1 keeps compile time and the instrumented code's speed in balance; line tables are all a sanitizer or
# libFuzzer report needs (file:line in every frame), at a third less object size and link time than -g.
source "$root/scripts/compiler_cache.sh"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${compiler_cache_args[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  "${sanitizer_args[@]}" -DQGRU_ENABLE_CUDA=OFF >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
