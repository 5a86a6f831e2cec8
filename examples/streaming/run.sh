#!/usr/bin/env bash
# Build and run the streaming example against an installed qgru: quantize the bundled digits model with the
# CLI (the artifact is made here, not committed: calibrate on examples/digits/calib.npy, int8 preset), compile
# stream_digits.c with pkg-config, classify the 597 held-out images frame by frame.
# Usage: examples/streaming/run.sh <install-prefix> [work-folder]
#   (install with: cmake --install build --prefix <install-prefix>)
set -euo pipefail
prefix="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
digits="$here/../digits"
work="${2:-$(mktemp -d)}"
mkdir -p "$work"
qgru="$prefix/bin/qgru"
"$qgru" -q calibrate --model "$digits/gru.safetensors" --data "$digits/calib.npy" -o "$work/stats.json" > /dev/null
"$qgru" -q quantize --model "$digits/gru.safetensors" --stats "$work/stats.json" --config int8 -o "$work/digits.qgru.json" > /dev/null
libdir="$(dirname "$(find "$prefix" -name qgru-runtime.pc | head -n 1)")"
export PKG_CONFIG_PATH="$libdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# shellcheck disable=SC2046
cc -std=c99 -O2 -Wall -Wextra -o "$work/stream_digits" "$here/stream_digits.c" $(pkg-config --cflags --libs qgru-runtime) \
  -lm -Wl,-rpath,"$(pkg-config --variable=libdir qgru-runtime)"
"$work/stream_digits" "$work/digits.qgru.json" "$digits"
