#!/usr/bin/env bash
# Results are never silently wrong (docs/HARDENING.md, "Results never silently wrong"): statistics or an
# artifact made from other float weights are refused (--allow-model-mismatch: a warning); non-finite numeric
# options are usage errors; strict JSON everywhere (a duplicate key, anything after the value, a NUL); every
# error names its file and its tensor (x codes outside x's range, a range no shift can represent, an unknown
# range method in a config, non-finite GPTQ weights, activations and Hessians, a duplicate manifest layer);
# a GPTQ layer with no activation rows or an all-zero Hessian is refused, fewer rows than K warned about; mse
# on a constant tensor gives a valid range. Each refusal: its exit code, one line, every input unchanged
# (checksums) and no output or temporary file.
# Usage: results_never_silently_wrong.sh <qgru-binary> <scratch-dir> <source-root>
set -u
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
find_python
make_hazard_inputs
cp "$root/configs/int8.json" int8.json

"$python" - <<'PY' || fail "making the test inputs"
import json, struct
import numpy as np

def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]

def write_st(path, tensors):  # name -> float32 array
    header, data, offset = {}, b"", 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        data += b
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)

# Other weights of the same shape: one weight's lowest mantissa bit flipped.
raw = bytearray(open("gru.safetensors", "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
raw[8 + n] ^= 1
open("other.safetensors", "wb").write(raw)
header = json.loads(bytes(raw[8:8 + n]))
huge = bytearray(open("gru.safetensors", "rb").read())
at = 8 + n + header["gru.weight_ih_l0"]["data_offsets"][0]
huge[at:at + 4] = np.float32(1e15).tobytes()            # finite, but no 8-bit shift reaches 2^50
open("huge_weight.safetensors", "wb").write(huge)

x = np.load("x.npy")
codes = np.zeros(x.shape, np.int32)
codes[4, 2, 1] = 300                                   # outside any 8-bit code range
np.save("codes_outside.npy", codes)
np.save("big.npy", (x * 1e30).astype(np.float32))     # finite in float32, beyond any 8-bit grid's shift
np.save("constant.npy", np.full(x.shape, 0.5, np.float32))

text = open("stats.json").read()
open("stats_dup.json", "w").write(text.replace("{", '{"method": {"name": "minmax", "include_zeros": true}, ', 1))
open("stats_nul.json", "w").write(text.rstrip("\n") + "\0garbage")
open("stats_trailing.json", "w").write(text + "{}")
stats = json.loads(text)
for t in stats["tensors"]:
    if t["tensor"] == "x":
        t["ema"]["max"] = 1e30                          # the int8 preset's method (ema) now picks [.., 1e30]
json.dump(stats, open("stats_huge_range.json", "w"))

config = open("int8.json").read()
open("config_dup.json", "w").write(config.replace('"range_method": "ema",', '"range_method": "ema", "range_method": "kl",'))
c = json.loads(config)
c["tensors"]["reset_gate_input"]["range_method"] = "median"
json.dump(c, open("config_unknown_method.json", "w"))

artifact = open("gru.qgru.json").read()
open("dup.qgru.json", "w").write(artifact.replace('"tensor_file_sha256"', '"tool_version": "0", "tensor_file_sha256"', 1))
open("nul.qgru.json", "w").write(artifact + "\0")

json.dump([{"tensor": "fc.weight", "activations": ["acts.npy"]}, {"tensor": "fc.weight", "activations": ["acts.npy"]}],
          open("manifest_dup_layer.json", "w"))
open("manifest_dup_key.json", "w").write('[{"tensor": "fc.weight", "activations": ["acts.npy"], "tensor": "fc.bias"}]')

import os
os.mkdir("ckpt_dup")
os.link("ckpt/q.safetensors", "ckpt_dup/q.safetensors")
qc = open("ckpt/quantize_config.json").read()
open("ckpt_dup/quantize_config.json", "w").write(qc.replace('"bits": 4,', '"bits": 4, "bits": 8,'))

header, data = read_st("linear.safetensors")
w = np.frombuffer(data, np.float32).reshape(header["fc.weight"]["shape"]).copy()
w_nan = w.copy(); w_nan[3, 5] = np.nan
write_st("linear_nan.safetensors", {"fc.weight": w_nan})
a = np.load("acts.npy")
a_inf = a.copy(); a_inf[10, 7] = np.inf
np.save("acts_inf.npy", a_inf)
np.save("acts_no_rows.npy", np.zeros((0, a.shape[1]), np.float32))
np.save("acts_zero.npy", np.zeros_like(a))
np.save("acts_few.npy", a[:8])
K = a.shape[1]
H = 2.0 * a.astype(np.float64).T @ a.astype(np.float64)
h_nan = H.copy(); h_nan[2, 3] = np.nan
np.save("hessian_nan.npy", h_nan)
h_neg = H.copy(); h_neg[4, 4] = -1.0
np.save("hessian_negative.npy", h_neg)
np.save("hessian_zero.npy", np.zeros((K, K)))
PY
mkdir outdir

# ---- 1. provenance: statistics and artifacts belong to the weights they were made from -------------------------
other_weights="was made from other float weights \(sha256 [0-9a-f]{64}\) than --model other.safetensors \(sha256 [0-9a-f]{64}\)"
expect_refusal 1 "stats.json $other_weights.*--allow-model-mismatch" \
  quantize --model other.safetensors --stats stats.json -o outdir/a.qgru.json
expect_refusal 1 "artifact gru.qgru.json $other_weights" \
  verify --model other.safetensors --artifact gru.qgru.json --input x.npy
"$qgru" -q quantize --model other.safetensors --stats stats.json --allow-model-mismatch -o outdir/a.qgru.json \
  2>"$scratch/allow.err" || fail "quantize --allow-model-mismatch: exit $?"
grep -q "warning.*stats.json was made from other float weights.*--allow-model-mismatch: going on" "$scratch/allow.err" ||
  fail "quantize --allow-model-mismatch does not warn: $(cat "$scratch/allow.err")"
"$qgru" -q verify --model other.safetensors --artifact gru.qgru.json --input x.npy --allow-model-mismatch \
  >/dev/null 2>"$scratch/allow.err" || fail "verify --allow-model-mismatch: exit $?"
grep -q "warning.*artifact gru.qgru.json was made from other float weights" "$scratch/allow.err" ||
  fail "verify --allow-model-mismatch does not warn: $(cat "$scratch/allow.err")"
"$qgru" quantize --help | grep -q -- "--allow-model-mismatch" || fail "quantize --help does not state --allow-model-mismatch"
"$qgru" verify --help | grep -q -- "--allow-model-mismatch" || fail "verify --help does not state --allow-model-mismatch"
rm -f outdir/*

# ---- 2. non-finite numeric options are usage errors ---------------------------------------------------------------
for value in nan inf -inf NaN; do
  expect_refusal 2 "--fail-below-sqnr: expected a finite number, got '$value'" \
    verify --model gru.safetensors --artifact gru.qgru.json --input x.npy --fail-below-sqnr "$value"
done
expect_refusal 2 "--percentile: expected a finite number, got 'nan'" \
  calibrate --model gru.safetensors --data x.npy --method percentile --percentile nan -o outdir/s.json
expect_refusal 2 "--damp: expected a finite number, got 'inf'" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy --damp inf -o outdir/q.safetensors
# The gate still works with a finite threshold: far above any SQNR it fails (after its table), naming both.
"$qgru" -q verify --model gru.safetensors --artifact gru.qgru.json --input x.npy --fail-below-sqnr 1000 \
  >/dev/null 2>"$scratch/gate.err"
[ $? -eq 1 ] && grep -q "^qgru: error: output SQNR .* dB is below --fail-below-sqnr 1000" "$scratch/gate.err" ||
  fail "--fail-below-sqnr 1000 did not fail the gate: $(cat "$scratch/gate.err")"

# ---- 3. strict JSON in every reader -------------------------------------------------------------------------------
twice="appears twice in one object"
expect_refusal 1 "stats_dup.json: not valid JSON \(key 'method' $twice at the top level" \
  quantize --model gru.safetensors --stats stats_dup.json -o outdir/a.qgru.json
expect_refusal 1 "stats_nul.json: not valid JSON \(a NUL byte at offset [0-9]+; only whitespace may follow the value\)" \
  calibrate --merge stats_nul.json -o outdir/s.json
expect_refusal 1 "stats_trailing.json: not valid JSON" calibrate --merge stats_trailing.json -o outdir/s.json
expect_refusal 1 "bit-width config config_dup.json: not valid JSON \(key 'range_method' $twice" \
  quantize --model gru.safetensors --stats stats.json --config config_dup.json -o outdir/a.qgru.json
expect_refusal 1 "artifact dup.qgru.json: not valid JSON \(key 'tool_version' $twice at the top level" \
  run --model dup.qgru.json --input x.npy --output outdir/y.npy
expect_refusal 1 "artifact nul.qgru.json: not valid JSON \(a NUL byte" \
  verify --model gru.safetensors --artifact nul.qgru.json --input x.npy
expect_refusal 1 "manifest_dup_key.json: not valid JSON \(key 'tensor' $twice inside '\[\]'" \
  gptq --weights linear.safetensors --manifest manifest_dup_key.json -o outdir/q.safetensors
expect_refusal 1 "ckpt_dup/quantize_config.json: not valid JSON \(key 'bits' $twice" \
  linear --checkpoint ckpt_dup/q.safetensors --layer fc --input acts.npy --output outdir/y.npy

# ---- 4. every error names its file and its tensor -----------------------------------------------------------------
expect_refusal 1 "codes_outside.npy: x code 300 at \[4, 2, 1\] is outside x's code range \[-128, 127\]" \
  run --model gru.qgru.json --input codes_outside.npy --output outdir/y.npy
# A range no shift can represent: no statistics file and no table row on stdout (expect_refusal checks both).
expect_refusal 1 "big.npy: layer 0 direction 0 tensor x \(observed \[-8.99502e\+29, 9.98107e\+29\]\): range .* cannot be represented with 8 bits" \
  calibrate --model gru.safetensors --data big.npy -o outdir/s.json
expect_refusal 1 "stats_huge_range.json: layer 0 direction 0 tensor x .*cannot be represented with 8 bits" \
  quantize --model gru.safetensors --stats stats_huge_range.json -o outdir/a.qgru.json
expect_refusal 1 "bit-width config config_unknown_method.json: tensors.reset_gate_input.range_method: method 'median' is not one of" \
  quantize --model gru.safetensors --stats stats.json --config config_unknown_method.json -o outdir/a.qgru.json
expect_refusal 1 "bit-width config config_unknown_method.json: tensors.reset_gate_input.range_method" \
  calibrate --model gru.safetensors --data x.npy --config config_unknown_method.json -o outdir/s.json
expect_refusal 1 "manifest_dup_layer.json: entry 1: tensor 'fc.weight' is already listed in entry 0" \
  gptq --weights linear.safetensors --manifest manifest_dup_layer.json -o outdir/q.safetensors
expect_refusal 1 "linear_nan.safetensors: tensor 'fc.weight': element 101 is NaN; GPTQ needs finite weights" \
  gptq --weights linear_nan.safetensors --tensor fc.weight --activations acts.npy -o outdir/q.safetensors
expect_refusal 1 "acts_inf.npy \(activations of 'fc.weight'\): element 327 is infinite" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts.npy --activations acts_inf.npy -o outdir/q.safetensors
expect_refusal 1 "hessian_nan.npy: Hessian element 67 is NaN" \
  gptq --weights linear.safetensors --tensor fc.weight --hessian hessian_nan.npy -o outdir/q.safetensors
expect_refusal 1 "hessian_negative.npy: Hessian diagonal entry \[4, 4\] is -1" \
  gptq --weights linear.safetensors --tensor fc.weight --hessian hessian_negative.npy -o outdir/q.safetensors
expect_refusal 1 "acts.npy: Hessian has shape \[64, 32\], expected \[32, 32\]" \
  gptq --weights linear.safetensors --tensor fc.weight --hessian acts.npy -o outdir/q.safetensors
# A weight no shift can represent names the model and the tensor (with statistics of the ordinary model, by
# --allow-model-mismatch: calibration itself would stop at the activations' 1e15 ranges).
"$qgru" -q quantize --model huge_weight.safetensors --stats stats.json --allow-model-mismatch -o outdir/a.qgru.json \
  >/dev/null 2>"$scratch/huge.err"
[ $? -eq 1 ] || fail "a weight of 1e15: not refused: $(cat "$scratch/huge.err")"
[ "$(grep -c '^qgru: error:' "$scratch/huge.err")" -eq 1 ] &&
  grep -q "^qgru: error: quantize huge_weight.safetensors (config int8): layer 0 direction 0, tensor W: range .* cannot be represented" \
    "$scratch/huge.err" || fail "a weight of 1e15: the error does not name the model and tensor W: $(cat "$scratch/huge.err")"
[ -z "$(ls outdir)" ] || fail "a weight of 1e15: outputs left: $(ls outdir)"
# A message stays one line when a file name holds a newline.
cp stats_dup.json $'stats\nnewline.json'
expect_refusal 1 "stats\\\\x0anewline.json: not valid JSON" \
  quantize --model gru.safetensors --stats $'stats\nnewline.json' -o outdir/a.qgru.json
rm $'stats\nnewline.json'

# ---- 5. GPTQ on data that cannot make a layer -----------------------------------------------------------------------
expect_refusal 1 "acts_no_rows.npy \(data of 'fc.weight' in linear.safetensors\): 0 activation rows; GPTQ needs at least 1" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts_no_rows.npy -o outdir/q.safetensors
expect_refusal 1 "acts_zero.npy \(data of 'fc.weight' in linear.safetensors\): the Hessian is all zero" \
  gptq --weights linear.safetensors --tensor fc.weight --activations acts_zero.npy -o outdir/q.safetensors
expect_refusal 1 "hessian_zero.npy \(data of 'fc.weight' in linear.safetensors\): the Hessian is all zero" \
  gptq --weights linear.safetensors --tensor fc.weight --hessian hessian_zero.npy -o outdir/q.safetensors
"$qgru" -q gptq --weights linear.safetensors --tensor fc.weight --activations acts_few.npy -o outdir/q.safetensors \
  >/dev/null 2>"$scratch/few.err" || fail "gptq with 8 rows for K = 32: exit $?"
grep -q "warning.*acts_few.npy (data of 'fc.weight' in linear.safetensors): 8 activation rows for K = 32: the Hessian is singular" \
  "$scratch/few.err" || fail "gptq with rows < K does not warn: $(cat "$scratch/few.err")"
rm -f outdir/*

# ---- 6. a constant tensor is a valid case: every range method gives a valid range, and quantize and run work ----
for method in minmax ema kl percentile mse bounds; do
  "$qgru" -q calibrate --model gru.safetensors --data constant.npy --method "$method" -o "outdir/c_$method.json" \
    >"$scratch/const.out" 2>"$scratch/const.err" || fail "calibrate --method $method on a constant input: $(cat "$scratch/const.err")"
  awk 'NR > 1 && $3 == "x" { ok = ($8 <= 0.5 && $9 <= 0.5 && $9 >= 0.49) } END { exit !ok }' "$scratch/const.out" ||
    fail "--method $method: the range of the constant x (0.5) is not valid: $(grep ' x ' "$scratch/const.out")"
  "$qgru" -q quantize --model gru.safetensors --stats "outdir/c_$method.json" --range-method "$method" \
    -o "outdir/c_$method.qgru.json" || fail "quantize --range-method $method of a constant input: exit $?"
  "$qgru" -q run --model "outdir/c_$method.qgru.json" --input constant.npy --output outdir/y.npy >/dev/null ||
    fail "run after --range-method $method of a constant input: exit $?"
done

echo "results_never_silently_wrong: $refusals refusals checked: all passed"
