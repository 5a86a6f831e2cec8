#!/usr/bin/env bash
# qgru run and qgru verify on quantized artifacts of the bundled example: task accuracy of the integer model
# against the float one (targets: int8 within 0.5 points, int16-activations within 0.1), integer codes
# in and out (codes given as input reproduce the float-input run exactly), the verify report and its SQNR
# gate, and clean refusals (--device cuda without a GPU, a tampered tensor file).
# Usage: run_quantized.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
qgru="$1"
scratch="$2"
root="$3"
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch"
example="$root/examples/digits"
fail() { echo "FAIL: $*" >&2; exit 1; }

python=""
for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$candidate" ] && "$candidate" -c "import numpy" 2>/dev/null; then python="$candidate"; break; fi
done
[ -n "$python" ] || fail "no python3 with numpy found (run scripts/setup.sh)"

accuracy() {  # output.npy -> accuracy in percent
  "$python" "$root/scripts/example_accuracy.py" --model "$example/gru.safetensors" --labels "$example/test_labels.npy" "$1" |
    sed -E 's/^accuracy ([0-9.]+).*/\1/'
}

"$qgru" -q calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o stats.json > /dev/null
"$qgru" -q run --model "$example/gru.safetensors" --input "$example/test.npy" --output float.npy > /dev/null
float_accuracy=$(accuracy float.npy)

for preset in int8 int16-activations; do
  "$qgru" -q quantize --model "$example/gru.safetensors" --stats stats.json --config "$preset" -o "$preset.qgru.json"
  "$qgru" -q run --model "$preset.qgru.json" --input "$example/test.npy" --output "$preset.npy" --codes "$preset.codes.npy" \
    --hn "$preset.hn.npy" > "$preset.out"
  grep -q "integer executor" "$preset.out" || fail "$preset: run summary missing: $(cat "$preset.out")"
  [ -f "$preset.codes.npy" ] && [ -f "$preset.hn.npy" ] || fail "$preset: --codes/--hn not written"
  grep -q "fast (avx2)\|fast (avx512-vnni)\|reference (fast path" "$preset.out" || fail "$preset: executor not reported: $(cat "$preset.out")"
  # Every fast level the CPU has computes the same codes (QGRU_FAST_ISA forces one; a level the CPU lacks
  # runs the reference and says so).
  for level in avx2 avx512-vnni; do
    QGRU_FAST_ISA=$level "$qgru" -q run --model "$preset.qgru.json" --input "$example/test.npy" --output "$preset.$level.npy" \
      --codes "$preset.$level.codes.npy" > "$preset.$level.out"
    cmp -s "$preset.codes.npy" "$preset.$level.codes.npy" || fail "$preset: QGRU_FAST_ISA=$level changes the codes"
  done
  # The reference executor computes the very same codes as the default (fast) one.
  "$qgru" -q run --model "$preset.qgru.json" --input "$example/test.npy" --output "$preset.ref.npy" \
    --codes "$preset.ref.codes.npy" --executor reference > /dev/null
  cmp -s "$preset.codes.npy" "$preset.ref.codes.npy" || fail "$preset: fast and reference executors differ"
  quant_accuracy=$(accuracy "$preset.npy")
  bound=0.005
  [ "$preset" = int16-activations ] && bound=0.001
  "$python" -c "import sys; f, q, b = map(float, sys.argv[1:]); sys.exit(0 if f - q <= b else 1)" \
    "$float_accuracy" "$quant_accuracy" "$bound" ||
    fail "$preset: accuracy $quant_accuracy vs float $float_accuracy (allowed loss $bound)"
  echo "$preset: accuracy $quant_accuracy (float $float_accuracy)"
done

# Codes in, codes out: quantize the input with x's parameters in NumPy (round half away from zero), feed the
# codes, and expect the very same output codes as the float-input run.
"$python" - int8.qgru.json "$example/test.npy" x_codes.npy <<'PY'
import json, sys
import numpy as np
artifact = json.load(open(sys.argv[1]))
x_quant = artifact["cells"][0]["tensors"]["x"]
bits, unsigned, shift, zp = x_quant["bits"], x_quant["unsigned"], x_quant["shift"], x_quant["zp"]
lo, hi = (0, 2**bits - 1) if unsigned else (-(2**(bits - 1)), 2**(bits - 1) - 1)
x = np.load(sys.argv[2]).astype(np.float64) * 2.0**shift
q = np.sign(x) * np.floor(np.abs(x) + 0.5) + zp
np.save(sys.argv[3], np.clip(q, lo, hi).astype(np.int32))
PY
"$qgru" -q run --model int8.qgru.json --input x_codes.npy --output from_codes.npy --codes from_codes.codes.npy > /dev/null
"$python" -c "
import sys, numpy as np
a, b = np.load('int8.codes.npy'), np.load('from_codes.codes.npy')
sys.exit(0 if a.dtype == np.int8 and np.array_equal(a, b) else 1)" || fail "codes input does not reproduce the float-input codes"
# --codes in the narrowest dtype holding h's codes: int8 for the int8 preset, int16 for 16-bit activations.
"$python" -c "
import sys, numpy as np
sys.exit(0 if np.load('int16-activations.codes.npy').dtype == np.int16 else 1)" || fail "int16-activations codes are not int16"

# verify: JSON report with every tensor, per-step SQNR, and the gate.
"$qgru" -q verify --model "$example/gru.safetensors" --artifact int8.qgru.json --input "$example/test.npy" \
  --report report.json > table.txt
grep -q "^l0.forward.update_gate_output" table.txt || fail "table lacks the update gate row: $(cat table.txt)"
"$python" - report.json <<'PY' || fail "report.json content"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["T"] == 8 and r["N"] == 597
names = {t["tensor"] for t in r["tensors"]}
assert {"x", "h", "weight_ih_linear", "weight_hh_linear", "update_gate_input", "update_gate_output",
        "reset_gate_input", "reset_gate_output", "new_gate_input", "new_gate_output"} <= names, names
assert len(r["output"]["per_step_sqnr_db"]) == 8
steps = r["output"]["per_step"]
for figure in ("count", "max_abs_error", "mean_abs_error", "nmse", "sqnr_db", "cosine"):
    assert len(steps[figure]) == 8, figure
assert sum(steps["count"]) == r["output"]["count"]
assert abs(max(steps["max_abs_error"]) - r["output"]["max_abs_error"]) < 1e-12
mean = sum(c * m for c, m in zip(steps["count"], steps["mean_abs_error"])) / r["output"]["count"]
assert abs(mean - r["output"]["mean_abs_error"]) < 1e-9 * max(1.0, mean)
assert r["output"]["sqnr_db"] >= 23.0, r["output"]["sqnr_db"]
assert 0.99 < r["output"]["cosine"] <= 1.0
PY
rc=0
"$qgru" -q verify --model "$example/gru.safetensors" --artifact int8.qgru.json --input "$example/test.npy" \
  --fail-below-sqnr 90 > /dev/null 2> gate.err || rc=$?
[ "$rc" = 1 ] || fail "--fail-below-sqnr 90 should exit 1, got $rc"
grep -q "below --fail-below-sqnr" gate.err || fail "gate message: $(cat gate.err)"

# Refusals: one line, exit 1, no output.
rc=0
"$qgru" run --model int8.qgru.json --input "$example/test.npy" --output cuda.npy --device cuda > /dev/null 2> cuda.err || rc=$?
if [ "$rc" = 1 ]; then
  [ "$(wc -l < cuda.err)" = 1 ] || fail "--device cuda: more than one line: $(cat cuda.err)"
  grep -q "^qgru: error: --device cuda" cuda.err || fail "--device cuda message: $(cat cuda.err)"
  [ ! -e cuda.npy ] || fail "--device cuda left an output"
fi
mkdir tampered
cp int8.qgru.json int8.qgru.safetensors tampered/
printf '\x01' | dd of=tampered/int8.qgru.safetensors bs=1 seek=200 conv=notrunc status=none
rc=0
"$qgru" run --model tampered/int8.qgru.json --input "$example/test.npy" --output tampered.npy > /dev/null 2> tampered.err || rc=$?
[ "$rc" = 1 ] || fail "tampered tensor file: exit $rc"
grep -q "sha256" tampered.err || fail "tampered tensor file message: $(cat tampered.err)"
[ ! -e tampered.npy ] || fail "tampered run left an output"
echo "run_quantized: ok"
