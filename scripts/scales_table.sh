#!/usr/bin/env bash
# The README's table of `qgru quantize --scales` ("qgru quantize", Scales): for the bundled example and each
# model of test/data/models/, the output SQNR (dB, `qgru verify` on its held-out data) of the int8 preset (powers
# of two, EMA ranges), int8 --scales multiplier, int8 --scales multiplier --range-method ema (the trap),
# int16-activations and int16-activations --scales multiplier. Statistics: `qgru calibrate` on the model's
# calibration file (default method). Prints one Markdown row per model; about a minute.
#   bash scripts/scales_table.sh [qgru]      (default: build/apps/qgru/qgru; run from the repository root)
set -euo pipefail
qgru=${1:-build/apps/qgru/qgru}
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
field() { "$python" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
for folder in examples/digits test/data/models/*/; do
  folder=${folder%/}
  model=$folder/gru.safetensors
  [ -f "$model" ] || model=$folder/model.onnx
  calib=$folder/calib.npy test=$folder/test.npy
  if [ -f "$folder/model.json" ]; then
    calib=$folder/$(field "$folder/model.json" calib)
    test=$folder/$(field "$folder/model.json" test)
  fi
  "$qgru" -q calibrate --model "$model" --data "$calib" -o "$work/stats.json" >/dev/null
  row="| $(basename "$folder")"
  for options in "--config int8" "--config int8 --scales multiplier" \
    "--config int8 --scales multiplier --range-method ema" "--config int16-activations" \
    "--config int16-activations --scales multiplier"; do
    # shellcheck disable=SC2086  # the options are words
    "$qgru" -q quantize --model "$model" --stats "$work/stats.json" $options -o "$work/a.qgru.json" >/dev/null
    "$qgru" -q verify --model "$model" --artifact "$work/a.qgru.json" --input "$test" --report "$work/r.json" >/dev/null
    row+=" | $("$python" -c "import json, sys; print('%.2f' % json.load(open(sys.argv[1]))['output']['sqnr_db'])" "$work/r.json")"
  done
  echo "$row |"
done
