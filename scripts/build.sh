#!/usr/bin/env bash
# Configure and build qgru into build/ (Release). Usage: scripts/build.sh [extra cmake args...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGRU_BUILD_DIR:-$root/build}"
source "$root/scripts/compiler_cache.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "${compiler_cache_args[@]}" "$@" >&2
cmake --build "$build" -j "$(nproc)" >&2
