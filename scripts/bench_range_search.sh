#!/usr/bin/env bash
# Time of `qgru quantize --range-method search` (int8 preset, default budget: 2000 evaluations, 256 held-in
# sequences, the 16-bit widenings) on the bundled example and the models of test/data/models/: wall and CPU
# seconds (GNU time), evaluations and the held-in output SQNR from the log. One line per model on stdout.
# Usage: bash scripts/bench_range_search.sh [BUILD_DIR]   (default build/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
qgru="${1:-$root/build}/apps/qgru/qgru"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
bench() {
  local name=$1 model=$2 calib=$3
  "$qgru" -q calibrate --model "$model" --data "$calib" -o "$out/$name.stats.json" > /dev/null
  /usr/bin/time -f "%e %U" -o "$out/$name.time" "$qgru" quantize --model "$model" --stats "$out/$name.stats.json" \
    --range-method search -o "$out/$name.qgru.json" > /dev/null 2> "$out/$name.log"
  read -r wall cpu < "$out/$name.time"
  local summary
  summary=$(grep -o "output SQNR .* evaluations" "$out/$name.log" | head -1)
  echo "$name: wall $wall s, CPU $cpu s; $summary"
}
bench digits "$root/examples/digits/gru.safetensors" "$root/examples/digits/calib.npy"
bench digits_l2_bidir "$root/test/data/models/digits_l2_bidir/gru.safetensors" "$root/examples/digits/calib.npy"
bench waves_h128 "$root/test/data/models/waves_h128/gru.safetensors" "$root/test/data/models/waves_h128/calib.npy"
bench denoise_l2 "$root/test/data/models/denoise_l2/gru.safetensors" "$root/test/data/models/denoise_l2/calib.npy"
