#!/usr/bin/env bash
# The bundled example on a fresh machine: install what is missing, build, run the float digits GRU on its
# held-out test set, then calibrate, quantize (int8 and int16-activations), run the integer model and verify
# it against float, printing accuracy and error figures. No download (examples/digits/ holds model and data).
# Usage: scripts/example.sh   (QGRU_BUILD_DIR picks the build folder, default build/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${QGRU_BUILD_DIR:-$root/build}"
example="$root/examples/digits"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
qgru="$build/apps/qgru/qgru"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

python=python3
if ! python3 -c "import numpy" 2>/dev/null; then python=/usr/bin/python3; fi

echo "== float GRU (examples/digits/gru.safetensors) on examples/digits/test.npy"
"$qgru" run --model "$example/gru.safetensors" --input "$example/test.npy" --output "$out/float.npy"
"$python" "$root/scripts/example_accuracy.py" "$out/float.npy" --model "$example/gru.safetensors" \
  --labels "$example/test_labels.npy"

echo "== calibrate on examples/digits/calib.npy"
"$qgru" calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o "$out/stats.json" > "$out/calibrate.txt"
for preset in int8 int16-activations; do
  echo "== quantize ($preset), run the integer model, verify against float"
  "$qgru" -q quantize --model "$example/gru.safetensors" --stats "$out/stats.json" --config "$preset" \
    -o "$out/$preset.qgru.json"
  "$qgru" -q run --model "$out/$preset.qgru.json" --input "$example/test.npy" --output "$out/$preset.npy"
  "$python" "$root/scripts/example_accuracy.py" "$out/$preset.npy" --model "$example/gru.safetensors" \
    --labels "$example/test_labels.npy"
  "$qgru" -q verify --model "$example/gru.safetensors" --artifact "$out/$preset.qgru.json" \
    --input "$example/test.npy" | grep -E "^(tensor|output|h_n) "
done
