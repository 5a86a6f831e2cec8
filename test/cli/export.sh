#!/usr/bin/env bash
# qgru export --onnx from the command line: a float model's export runs in qgru exactly as the model itself
# (the weights go through ONNX and back unchanged); an artifact's float-equivalent reads back as one GRU stack
# and tracks the integer executor's output; the failure contract (exit 1 with one line and no file for bad
# input, exit 2 for usage; an artifact never overwritten). onnxruntime's side is test/unit/export's fixtures.
# Usage: export.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
find_python
example="$root/examples/digits"
artifact_dir="$root/test/data/onnx_export/int8_l2_bidir"
cd "$scratch"

# 1. A float model through ONNX and back: qgru runs the exported graph to the same bytes as the model itself.
"$qgru" -q export --onnx --model "$example/gru.safetensors" --prefix gru -o digits.onnx
"$qgru" -q run --model "$example/gru.safetensors" --input "$example/test.npy" --output y_safetensors.npy >/dev/null
"$qgru" -q run --model digits.onnx --input "$example/test.npy" --output y_onnx.npy >/dev/null
cmp -s y_safetensors.npy y_onnx.npy || fail "the exported float model computes other numbers than the model"

# 2. An artifact's float-equivalent, batch-first with h0 and lengths inputs: one stack of 2 bidirectional layers.
"$qgru" export --onnx --model "$artifact_dir/model.qgru.json" -o fe.onnx --batch-first --h0-input --lengths-input \
  2>export.log
grep -q "float-equivalent of the int8 artifact (dequantized weights), 2 layer(s), C = 5, H = 7, bidirectional" export.log ||
  fail "export summary: $(cat export.log)"
"$qgru" inspect fe.onnx >inspect.txt
grep -q "^GRU 'layer1/GRU': C = 14, H = 7, bidirectional, linear_before_reset = 1.*sequence_lens 'sequence_lens', initial_h 'layer1/initial_h'; stack 0 layer 1$" inspect.txt ||
  fail "inspect of the export: $(cat inspect.txt)"
grep -q "^1 GRU stack(s)" inspect.txt || fail "the export is not one stack: $(cat inspect.txt)"
# The float-equivalent (dequantized weights, float activations) against the integer executor's output, on the
# data the artifact was calibrated on: with 16-bit activations and int8 weights they differ by the activations'
# quantization alone, far below the weights' share (about 70 dB here).
int16_dir="$root/test/data/onnx_export/int16act_qdq_options"
"$qgru" -q export --onnx --model "$int16_dir/model.qgru.json" -o fe16.onnx
"$qgru" -q run --model fe16.onnx --input "$root/test/data/onnx/pytorch_l2/x.npy" --output y_fe.npy >/dev/null
"$qgru" -q run --model "$int16_dir/model.qgru.json" --input "$root/test/data/onnx/pytorch_l2/x.npy" --output y_int.npy >/dev/null
"$python" - <<'EOF' || fail "the float-equivalent does not track the integer executor"
import numpy as np
fe, integer = np.load("y_fe.npy").astype(np.float64), np.load("y_int.npy").astype(np.float64)
sqnr = 10 * np.log10(np.sum(integer ** 2) / np.sum((integer - fe) ** 2))
print(f"export: float-equivalent vs integer executor (int16 activations), SQNR {sqnr:.1f} dB")
assert sqnr > 55.0, sqnr  # a wrong weight layout or scale drops far below
EOF

# 3. Failures: bad input exits 1 with one line and leaves no file; usage exits 2.
expect_failure 2 "$scratch/none.onnx" "" -- export --model "$artifact_dir/model.qgru.json" -o "$scratch/none.onnx"
expect_failure 2 "$scratch/none.onnx" "" -- export --onnx --model "$artifact_dir/model.qgru.json" --opset 9 -o "$scratch/none.onnx"
expect_failure 1 "$scratch/none.onnx" "takes x's quantization from a quantized artifact" -- \
  export --onnx --model "$example/gru.safetensors" --quantize-input -o "$scratch/none.onnx"
expect_failure 1 "$scratch/none.onnx" "16-bit codes from opset 21" -- \
  export --onnx --model "$root/test/data/onnx_export/int16act_qdq_options/model.qgru.json" --quantize-input \
  -o "$scratch/none.onnx"
# An artifact of a cell variant this qgru does not know (a later version naming its cell) is refused by name.
mkdir variant own
sed 's/"schema": "qgru.artifact"/"cell": "linear_before_reset_0", "schema": "qgru.artifact"/' \
  "$artifact_dir/model.qgru.json" >variant/model.qgru.json
cp "$artifact_dir/model.qgru.safetensors" variant/
grep -q '"cell": "linear_before_reset_0"' variant/model.qgru.json || fail "the test's variant key was not written"
expect_failure 1 "$scratch/none.onnx" "cell variant (cell = \"linear_before_reset_0\")" -- \
  export --onnx --model variant/model.qgru.json -o "$scratch/none.onnx"
# Writing over the artifact it exports: refused, the artifact unchanged.
cp "$artifact_dir/model.qgru.json" "$artifact_dir/model.qgru.safetensors" own/
for target in own/model.qgru.json own/model.qgru.safetensors; do
  if "$qgru" export --onnx --model own/model.qgru.json -o "$target" 2>err.txt; then fail "export over its input $target"; fi
  grep -q "is the same file as --model.*an output must never replace an input" err.txt || fail "unclear refusal: $(cat err.txt)"
done
cmp -s own/model.qgru.json "$artifact_dir/model.qgru.json" &&
  cmp -s own/model.qgru.safetensors "$artifact_dir/model.qgru.safetensors" || fail "the artifact changed"
echo "export: OK"
