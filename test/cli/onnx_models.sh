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

for case in pytorch_l2 pytorch_l2_bidir_external lbr0_l2_opset11; do
  "$qgru" -q run --model "$data/$case/model.onnx" --input "$data/$case/x.npy" --output "y_$case.npy" \
    --hn "hn_$case.npy" >/dev/null
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
"$qgru" -q run --model m.qgru.json --input "$data/pytorch_l2_bidir_external/x.npy" --output yq.npy >/dev/null
"$qgru" -q verify --model "$model" --artifact m.qgru.json --input "$data/pytorch_l2_bidir_external/x.npy" \
  --fail-below-sqnr 30 >verify.txt || fail "verify of the ONNX model's artifact: $(tail -3 verify.txt)"

# --prefix is for state dicts, --node for ONNX graphs: each refuses the other's file.
if "$qgru" -q run --model "$model" --prefix rnn --input "$data/pytorch_l2/x.npy" --output no.npy 2>err.txt; then
  fail "--prefix with an ONNX model was accepted"
fi
grep -q "use --node" err.txt || fail "unhelpful --prefix error: $(cat err.txt)"
echo "onnx_models: OK"
