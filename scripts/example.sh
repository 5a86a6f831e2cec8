#!/usr/bin/env bash
# The bundled example on a fresh machine: install what is missing, build, calibrate, quantize (int8), run the
# integer model and verify it against float on the held-out test set, then print the README's table (accuracy and
# output SQNR of every preset and of the range search, scripts/example_figures.py). No download (examples/digits/
# holds model and data).
# Usage: scripts/example.sh   (QGRU_BUILD_DIR picks the build folder, default build/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGRU_BUILD_DIR:-$root/build}"
example="$root/examples/digits"
# The CLI's packages and the qgru target alone (docs/BENCHMARKS.md, "The README's two commands"), with the flags
# scripts/test.sh builds with (-Werror), so that every object compiled here is a compiler-cache hit there.
bash "$root/scripts/setup.sh" cli
QGRU_BUILD_TESTS=OFF QGRU_BUILD_TARGETS=qgru bash "$root/scripts/build.sh" -DQGRU_WERROR=ON
qgru="$build/apps/qgru/qgru"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

python=python3
if ! python3 -c "import numpy" 2>/dev/null; then python=/usr/bin/python3; fi

echo "== calibrate on examples/digits/calib.npy, quantize (int8), run the integer model, verify it against float"
"$qgru" calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o "$out/stats.json" > "$out/calibrate.txt"
"$qgru" -q quantize --model "$example/gru.safetensors" --stats "$out/stats.json" --config int8 -o "$out/int8.qgru.json"
"$qgru" -q run --model "$out/int8.qgru.json" --input "$example/test.npy" --output "$out/int8.npy" --codes "$out/int8.codes.npy"
"$qgru" -q verify --model "$example/gru.safetensors" --artifact "$out/int8.qgru.json" --input "$example/test.npy"

echo "== the README's table: accuracy (%) and output SQNR (dB) of each preset and of the range search"
"$python" "$root/scripts/example_figures.py" --qgru "$qgru" int8 int8/search int16-activations int16
