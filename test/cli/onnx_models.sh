#!/usr/bin/env bash
# ONNX GRUs through the whole tool chain, on the committed fixtures (test/data/onnx, made by
# scripts/make_onnx_fixtures.py with onnxruntime's outputs beside them): `qgru inspect` lists the GRU nodes,
# `qgru run --model model.onnx` matches onnxruntime within 1e-5, and calibrate -> quantize -> run -> verify
# accept --model model.onnx (a 2-layer bidirectional stack with external weights). Needs python3 with numpy.
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
find_python
data="$root/test/data/onnx"
cd "$scratch"

"$qgru" inspect "$data/pytorch_l2_bidir_external/model.onnx" >inspect.txt
grep -q "GRU '/rnn/GRU_1': C = 14, H = 7, bidirectional, linear_before_reset = 1" inspect.txt || fail "inspect: $(cat inspect.txt)"
grep -q "^1 GRU stack(s)" inspect.txt || fail "inspect does not count the stack: $(cat inspect.txt)"

for case in pytorch_l2 pytorch_l2_bidir_external lbr0_l2_opset11 lbr0_bidir_lengths pytorch_l2_bidir_lengths; do
  lengths=()
  [ -e "$data/$case/lengths.npy" ] && lengths=(--lengths "$data/$case/lengths.npy")
  "$qgru" -q run --model "$data/$case/model.onnx" --input "$data/$case/x.npy" --output "y_$case.npy" \
    --hn "hn_$case.npy" "${lengths[@]}" >/dev/null
  "$python" -c "
import sys, numpy as np
d = sys.argv[1]
worst = max(np.abs(np.load('y_$case.npy') - np.load(d + '/y.npy')).max(), np.abs(np.load('hn_$case.npy') - np.load(d + '/h_n.npy')).max())
print('$case: largest difference to onnxruntime %.3g' % worst)
sys.exit(0 if worst <= 1e-5 else 1)" "$data/$case" || fail "$case: qgru run differs from onnxruntime by more than 1e-5"
done

model="$data/pytorch_l2_bidir_external/model.onnx"
"$qgru" -q calibrate --model "$model" --data "$data/pytorch_l2_bidir_external/x.npy" -o stats.json >/dev/null
"$qgru" -q quantize --model "$model" --stats stats.json --config int16-activations -o m.qgru.json
# The model named without a folder (run from its own folder): its external data is found beside it.
(cd "$data/pytorch_l2_bidir_external" && "$qgru" -q calibrate --model model.onnx --data x.npy -o "$OLDPWD/stats_bare.json" >/dev/null) ||
  fail "calibrate --model model.onnx from the model's folder"
python3 -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for s in (a, b):
    s['model']['path'] = None
    for d in s['data_files']: d['path'] = None
sys.exit(0 if a == b else 1)" stats.json stats_bare.json ||
  fail "the statistics (but for the paths they record) differ when the model is named without its folder"
"$qgru" -q run --model m.qgru.json --input "$data/pytorch_l2_bidir_external/x.npy" --output yq.npy >/dev/null
"$qgru" -q verify --model "$model" --artifact m.qgru.json --input "$data/pytorch_l2_bidir_external/x.npy" \
  --fail-below-sqnr 30 >verify.txt || fail "verify of the ONNX model's artifact: $(tail -3 verify.txt)"

# A batch of unequal lengths through calibrate -> quantize -> run -> verify, both executors the same codes.
case_dir="$data/pytorch_l2_bidir_lengths"
"$qgru" -q calibrate --model "$case_dir/model.onnx" --data "$case_dir/x.npy" --lengths "$case_dir/lengths.npy" \
  -o stats_l.json >/dev/null
"$qgru" -q quantize --model "$case_dir/model.onnx" --stats stats_l.json --config int16-activations -o l.qgru.json
for executor in fast reference; do
  "$qgru" -q run --model l.qgru.json --input "$case_dir/x.npy" --lengths "$case_dir/lengths.npy" --output "yl_$executor.npy" \
    --codes "cl_$executor.npy" --executor "$executor" >/dev/null
done
cmp -s cl_fast.npy cl_reference.npy || fail "with --lengths the fast and reference executors differ"
"$python" -c "
import sys, numpy as np
y, lengths = np.load('yl_fast.npy'), np.load(sys.argv[1])
padded = [y[t, n] for n in range(y.shape[1]) for t in range(lengths[n], y.shape[0])]
sys.exit(0 if padded and all((p == 0).all() for p in padded) else 1)" "$case_dir/lengths.npy" || fail "padded outputs are not 0"
"$qgru" -q verify --model "$case_dir/model.onnx" --artifact l.qgru.json --input "$case_dir/x.npy" \
  --lengths "$case_dir/lengths.npy" --fail-below-sqnr 30 >verify_l.txt || fail "verify with --lengths: $(tail -3 verify_l.txt)"

# The linear_before_reset = 0 cell (ONNX's default): calibrate -> quantize (every preset) -> run -> verify, with
# unequal lengths; both executors the same codes, the artifact version 2 naming the cell.
case_dir="$data/lbr0_bidir_lengths"
"$qgru" -q calibrate --model "$case_dir/model.onnx" --data "$case_dir/x.npy" --lengths "$case_dir/lengths.npy" \
  -o stats_r.json >/dev/null
for preset in int8 int16-activations int16; do
  "$qgru" -q quantize --model "$case_dir/model.onnx" --stats stats_r.json --config "$preset" -o "r_$preset.qgru.json"
  grep -q '"linear_before_reset": false' "r_$preset.qgru.json" || fail "$preset: the artifact does not name the cell"
  for executor in fast reference; do
    "$qgru" -q run --model "r_$preset.qgru.json" --input "$case_dir/x.npy" --lengths "$case_dir/lengths.npy" \
      --output "yr_$executor.npy" --codes "cr_$executor.npy" --executor "$executor" >/dev/null
  done
  cmp -s cr_fast.npy cr_reference.npy || fail "linear_before_reset = 0, $preset: the fast and reference executors differ"
  floor=$([ "$preset" = int8 ] && echo 10 || echo 30)  # 4 short rows of calibration data: int8's EMA ranges are coarse (11.9 dB)
  "$qgru" -q verify --model "$case_dir/model.onnx" --artifact "r_$preset.qgru.json" --input "$case_dir/x.npy" \
    --lengths "$case_dir/lengths.npy" --fail-below-sqnr "$floor" >"verify_r_$preset.txt" \
    || fail "verify of the linear_before_reset = 0 artifact ($preset): $(tail -3 "verify_r_$preset.txt")"
done

# --prefix is for state dicts, --node for ONNX graphs: each refuses the other's file.
if "$qgru" -q run --model "$model" --prefix rnn --input "$data/pytorch_l2/x.npy" --output no.npy 2>err.txt; then
  fail "--prefix with an ONNX model was accepted"
fi
grep -q "use --node" err.txt || fail "unhelpful --prefix error: $(cat err.txt)"
echo "onnx_models: OK"
