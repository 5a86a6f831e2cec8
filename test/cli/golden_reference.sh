#!/usr/bin/env bash
# The integer algorithm re-implemented from docs/FIXED_POINT.md (scripts/reference_fixed_point.py, NumPy,
# integers only) against qgru's golden vectors, every code of every intermediate:
#   1. the committed golden vectors of the bundled digits model (int8 preset), of a committed random
#      2-layer bidirectional model (int8, int16-activations and int8 with multiplier scales) and of a 2-layer
#      ONNX linear_before_reset = 0 model (int8 and int16-activations presets each);
#   2. qgru itself regenerates golden vectors from the committed artifacts and input codes and they equal
#      the committed ones (the integer path did not drift);
#   3. a fresh random 2-layer bidirectional model, H = 33 (PyTorch layout, written with numpy), and the
#      bidirectional ONNX linear_before_reset = 0 fixture: calibrate, quantize with both presets and with both
#      presets' multiplier-scale form (docs/FIXED_POINT.md §1a), dump golden vectors with
#      `qgru run --dump-intermediates`, compare;
#      (2 and 3 run `qgru run --dump-intermediates` on float input and on integer codes)
#   4. the comparison can fail: one code changed in a copy of a golden file, a wrong rounding mode in a
#      copy of the reference, a copy whose linear_before_reset = 0 cell multiplies R_n with h instead of
#      r ⊙ h, or a copy that drops the multipliers of a multiplier-scale model, must be reported as a mismatch.
# Usage: golden_reference.sh <qgru> <scratch-dir> <source-root>. Needs python3 with numpy only.
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
reference="$root/scripts/reference_fixed_point.py"
data="$root/test/data/golden_fixed"
find_python

# ---- 1. committed golden vectors against the independent reference ------------------------------------
checked=0
for case_dir in "$data"/*/; do
  for golden in "$case_dir"golden*.safetensors; do
    [ -e "$golden" ] || continue
    artifact="$case_dir$(basename "$golden" .safetensors | sed 's/^golden/model/').qgru.json"
    [ -e "$artifact" ] || artifact="${case_dir}model.qgru.json"
    "$python" "$reference" --quiet --artifact "$artifact" --golden "$golden" \
      || fail "reference differs from committed $golden"
    checked=$((checked + 1))
  done
done
[ "$checked" -ge 6 ] || fail "expected at least 6 committed golden files under $data, found $checked"
echo "committed golden files equal to the reference: $checked"

# ---- 2. qgru regenerates the committed golden vectors ------------------------------------------------------
# (compares every tensor, not the metadata: the tool version may move on)
cat >"$scratch/same_tensors.py" <<'EOF'
import sys
sys.path.insert(0, sys.argv[3])
from reference_fixed_point import read_safetensors
import numpy as np
a, _ = read_safetensors(sys.argv[1])
b, _ = read_safetensors(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit(f"tensor names differ: {sorted(set(a) ^ set(b))}")
for k in sorted(a):
    if a[k].shape != b[k].shape or not np.array_equal(a[k].astype(np.int64), b[k].astype(np.int64)):
        sys.exit(f"{k} differs")
print(f"{len(a)} tensors identical")
EOF
cat >"$scratch/codes_to_npy.py" <<'EOF'
# input.q_x of a golden file -> float32 .npy whose quantization gives exactly those codes:
# x = (q - zp_x) * 2^-shift_x is exactly representable (|q - zp| < 2^17, a power-of-two scale); with a real scale
# (mantissa, docs/FIXED_POINT.md §1a) x * 2^shift / mantissa lies within 2^-7 of q - zp, which rounds back to it.
import json, sys
sys.path.insert(0, sys.argv[4])
from reference_fixed_point import read_safetensors
import numpy as np
golden, _ = read_safetensors(sys.argv[1])
cells = json.load(open(sys.argv[2]))["cells"]
x = [c for c in cells if c["layer"] == 0 and c["direction"] == 0][0]["tensors"]["x"]
q = golden["input.q_x"].astype(np.int64)
np.save(sys.argv[3], np.ldexp((q - x["zp"]).astype(np.float64) * x.get("mantissa", 1.0), -x["shift"]).astype(np.float32))
np.save(sys.argv[3].replace(".npy", "_codes.npy"), q.astype(np.int32))  # the integer-input path of qgru run
EOF
"$qgru" run --help 2>&1 | grep -q -- "--dump-intermediates" || fail "qgru run has no --dump-intermediates"

dump() {  # dump <artifact> <x.npy> <out.safetensors>
  "$qgru" -q run --model "$1" --input "$2" --output "$(dirname "$3")/y_$(basename "$3" .safetensors).npy" \
    --dump-intermediates "$3" >/dev/null
}

regenerated=0
for case_dir in "$data"/*/; do
  for golden in "$case_dir"golden*.safetensors; do
    [ -e "$golden" ] || continue
    artifact="$case_dir$(basename "$golden" .safetensors | sed 's/^golden/model/').qgru.json"
    [ -e "$artifact" ] || artifact="${case_dir}model.qgru.json"
    name="$(basename "$case_dir")_$(basename "$golden" .safetensors)"
    "$python" "$scratch/codes_to_npy.py" "$golden" "$artifact" "$scratch/x_$name.npy" "$root/scripts"
    for input in "$scratch/x_$name.npy" "$scratch/x_${name}_codes.npy"; do  # float input, then integer codes
      dump "$artifact" "$input" "$scratch/regen_$name.safetensors"
      "$python" "$scratch/same_tensors.py" "$golden" "$scratch/regen_$name.safetensors" "$root/scripts" >/dev/null \
        || fail "qgru run --dump-intermediates on $(basename "$input") does not reproduce $golden"
      regenerated=$((regenerated + 1))
    done
  done
done
echo "qgru run --dump-intermediates reproduced the committed golden files: $regenerated runs"

# ---- 3. a fresh random 2-layer bidirectional model --------------------------------------------------------
cat >"$scratch/make_model.py" <<'EOF'
# A random nn.GRU(C=5, H, num_layers=2, bidirectional=True) state_dict in safetensors (PyTorch names),
# calibration data and test input, all with numpy. Arguments: out-dir [seed H]; the committed
# test/data/golden_fixed/random_l2_bidir was made with the defaults (seed 1234, H = 7).
import json, struct, sys
import numpy as np
out = sys.argv[1]
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1234
rng = np.random.RandomState(seed)
C, H, L = 5, (int(sys.argv[3]) if len(sys.argv) > 3 else 7), 2
tensors = {}
for l in range(L):
    for suffix in ("", "_reverse"):
        c_in = C if l == 0 else 2 * H
        tensors[f"weight_ih_l{l}{suffix}"] = rng.uniform(-0.6, 0.6, (3 * H, c_in)).astype(np.float32)
        tensors[f"weight_hh_l{l}{suffix}"] = rng.uniform(-0.6, 0.6, (3 * H, H)).astype(np.float32)
        tensors[f"bias_ih_l{l}{suffix}"] = rng.uniform(-0.4, 0.4, (3 * H,)).astype(np.float32)
        tensors[f"bias_hh_l{l}{suffix}"] = rng.uniform(-0.4, 0.4, (3 * H,)).astype(np.float32)
header, blobs, offset = {}, [], 0
for name in sorted(tensors):
    raw = tensors[name].tobytes()
    header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(f"{out}/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
np.save(f"{out}/calib.npy", rng.normal(0, 1.0, (9, 40, C)).astype(np.float32))
# Test input wider than the calibration data, so that saturation is exercised too.
np.save(f"{out}/x.npy", rng.normal(0, 1.6, (6, 4, C)).astype(np.float32))
EOF
fresh="$scratch/fresh"
mkdir -p "$fresh"
# Another seed and H = 33 (a hidden size that fills no block of 32), not the committed model's.
"$python" "$scratch/make_model.py" "$fresh" 20261122 33
"$qgru" -q calibrate --model "$fresh/model.safetensors" --data "$fresh/calib.npy" -o "$fresh/stats.json" >/dev/null
# The presets' multiplier-scale forms (docs/FIXED_POINT.md §1a): the preset with "scales": "multiplier".
for preset in int8 int16-activations; do
  "$python" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["scales"] = "multiplier"; json.dump(c, open(sys.argv[2], "w"))' \
    "$root/configs/$preset.json" "$fresh/$preset-multiplier.json"
done
for preset in int8 int16-activations int8-multiplier int16-activations-multiplier; do
  config="$preset"
  [ -e "$fresh/$preset.json" ] && config="$fresh/$preset.json"
  "$qgru" -q quantize --model "$fresh/model.safetensors" --stats "$fresh/stats.json" --config "$config" \
    -o "$fresh/$preset.qgru.json"
  dump "$fresh/$preset.qgru.json" "$fresh/x.npy" "$fresh/golden_$preset.safetensors"
  "$python" "$reference" --quiet --artifact "$fresh/$preset.qgru.json" --golden "$fresh/golden_$preset.safetensors" \
    || fail "reference differs from fresh golden vectors ($preset)"
  echo "fresh 2-layer bidirectional model (H = 33), $preset: equal"
done
# The linear_before_reset = 0 cell, bidirectional with biases (an ONNX fixture; its own x as calibration data).
lbr0="$root/test/data/onnx/lbr0_bidir_lengths"
"$qgru" -q calibrate --model "$lbr0/model.onnx" --data "$lbr0/x.npy" -o "$fresh/stats_lbr0.json" >/dev/null
for preset in int8 int16-activations int8-multiplier; do
  config="$preset"
  [ -e "$fresh/$preset.json" ] && config="$fresh/$preset.json"
  "$qgru" -q quantize --model "$lbr0/model.onnx" --stats "$fresh/stats_lbr0.json" --config "$config" -o "$fresh/lbr0_$preset.qgru.json"
  dump "$fresh/lbr0_$preset.qgru.json" "$lbr0/x.npy" "$fresh/golden_lbr0_$preset.safetensors"
  "$python" "$reference" --quiet --artifact "$fresh/lbr0_$preset.qgru.json" --golden "$fresh/golden_lbr0_$preset.safetensors" \
    || fail "reference differs from fresh golden vectors of the linear_before_reset = 0 cell ($preset)"
  echo "fresh bidirectional linear_before_reset = 0 model, $preset: equal"
done
# A float model has no codes to dump: said, not ignored.
if "$qgru" -q run --model "$fresh/model.safetensors" --input "$fresh/x.npy" --output "$scratch/yf.npy" \
  --dump-intermediates "$scratch/float.safetensors" >/dev/null 2>"$scratch/float.err"; then
  fail "--dump-intermediates with a float model was accepted"
fi
grep -q "quantized artifact" "$scratch/float.err" || fail "unhelpful error: $(cat "$scratch/float.err")"

# ---- 4. the comparison can fail -----------------------------------------------------------------------------
first_golden="$data/digits_int8/golden.safetensors"
cat >"$scratch/corrupt.py" <<'EOF'
# Copy a golden file with one code of one tensor changed by +1 (same size, same header).
import json, struct, sys
src, dst, tensor = sys.argv[1], sys.argv[2], sys.argv[3]
data = bytearray(open(src, "rb").read())
(n,) = struct.unpack("<Q", data[:8])
entry = json.loads(data[8:8 + n])[tensor]
assert entry["dtype"] == "I32"
at = 8 + n + entry["data_offsets"][0] + 4 * 37
struct.pack_into("<i", data, at, struct.unpack_from("<i", data, at)[0] + 1)
open(dst, "wb").write(bytes(data))
EOF
"$python" "$scratch/corrupt.py" "$first_golden" "$scratch/corrupt.safetensors" "l0.d0.q_new_gate_input"
if "$python" "$reference" --quiet --artifact "$data/digits_int8/model.qgru.json" --golden "$scratch/corrupt.safetensors" \
  2>"$scratch/corrupt.err"; then
  fail "a changed code in l0.d0.q_new_gate_input was not detected"
fi
grep -q "l0.d0.q_new_gate_input" "$scratch/corrupt.err" || fail "the mismatch message does not name the tensor: $(cat "$scratch/corrupt.err")"
# A reference that rounds ties toward +inf (floor(v/2^s + 1/2)) instead of away from zero must differ.
sed 's/rounded = np.where(v < 0, -rounded, rounded)/rounded = np.right_shift(v + np.left_shift(np.int64(1), right - 1), right)/' \
  "$reference" >"$scratch/wrong_rounding.py"
grep -q "np.right_shift(v + np.left_shift" "$scratch/wrong_rounding.py" || fail "could not make the wrong-rounding copy"
wrong_detected=0
for case_dir in "$data"/*/; do
  for golden in "$case_dir"golden*.safetensors; do
    artifact="$case_dir$(basename "$golden" .safetensors | sed 's/^golden/model/').qgru.json"
    [ -e "$artifact" ] || artifact="${case_dir}model.qgru.json"
    if ! "$python" "$scratch/wrong_rounding.py" --quiet --artifact "$artifact" --golden "$golden" 2>/dev/null; then
      wrong_detected=$((wrong_detected + 1))
    fi
  done
done
[ "$wrong_detected" -ge 1 ] || fail "a reference rounding ties toward +inf matched every golden file: the goldens do not pin the tie rule"
# A reference whose second GEMM multiplies R_n with h instead of r ⊙ h (the other cell's operand) must differ.
sed 's/gemm_h\[:, 2 \* H:\] = q_reset_hidden @ self.R/gemm_h[:, 2 * H:] = q_h_prev @ self.R/' "$reference" >"$scratch/wrong_cell.py"
grep -q "= q_h_prev @ self.R" "$scratch/wrong_cell.py" || fail "could not make the wrong-operand copy"
if "$python" "$scratch/wrong_cell.py" --quiet --artifact "$data/onnx_lbr0_l2/model_int8.qgru.json" \
  --golden "$data/onnx_lbr0_l2/golden_int8.safetensors" 2>"$scratch/wrong_cell.err"; then
  fail "a reference multiplying R_n with h matched the linear_before_reset = 0 golden vectors"
fi
grep -q "gemm_h" "$scratch/wrong_cell.err" || fail "the wrong-operand mismatch does not name gemm_h: $(cat "$scratch/wrong_cell.err")"
# A reference that drops the multipliers (every rescale a pure shift) must differ on the multiplier-scale golden vectors.
sed 's/return multiply_rshift_round(v, self.multiplier\[name\], self.d\[name\])/return rshift_round(v, self.d[name])/' \
  "$reference" >"$scratch/no_multiplier.py"
grep -q "return rshift_round(v, self.d\[name\])" "$scratch/no_multiplier.py" || fail "could not make the shift-only copy"
if "$python" "$scratch/no_multiplier.py" --quiet --artifact "$data/random_l2_bidir/model_int8-multiplier.qgru.json" \
  --golden "$data/random_l2_bidir/golden_int8-multiplier.safetensors" 2>/dev/null; then
  fail "a reference without the scalar multipliers matched the multiplier-scale golden vectors"
fi
echo "negative controls: changed code detected, wrong tie rule detected in $wrong_detected of $checked files, wrong second-GEMM operand detected, dropped multipliers detected"
echo "golden_reference: OK"
