#!/usr/bin/env bash
# End-to-end test of `qgru quantize` on the bundled example (examples/digits): the artifact of every preset
# (by name and by path), its JSON (schema, sha256 of the tensor file, provenance), the results on stdout (the
# parameter table, the overflow proof, one summary line last; --json: the artifact's keys; -q hides neither),
# the integer model tracking the float one (verify), and refusals (a malformed config, a config that could
# overflow, statistics of another model) that exit 1 with one line and write nothing.
# Usage: bash quantize.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
QGRU=$qgru
SCRATCH=$scratch
ROOT=$root
MODEL=$ROOT/examples/digits/gru.safetensors
CALIB=$ROOT/examples/digits/calib.npy
TEST=$ROOT/examples/digits/test.npy
cd "$SCRATCH"

"$QGRU" calibrate --model "$MODEL" --data "$CALIB" -o stats.json > /dev/null 2> calibrate.log ||
  fail "calibrate exited $?: $(cat calibrate.log)"

# 1. The default config is the int8 preset; the results (parameter table, overflow proof, summary line last) go
# to stdout, the log to stderr, and -q hides the log only.
"$QGRU" quantize --model "$MODEL" --stats stats.json -o int8.qgru.json > out.txt 2> log.txt ||
  fail "quantize exited $?: $(cat log.txt)"
[ -f int8.qgru.safetensors ] || fail "no tensor file beside the JSON"
grep -Eq 'update_gate_output +u8 asym +8 +0 ' out.txt || fail "table lacks update_gate_output u8: $(cat out.txt)"
grep -Eq '^  shift_reset_mul_hh_to_new_gate_input +[0-9]+$' out.txt || fail "table lacks the derived shifts: $(cat out.txt)"
grep -q '^overflow proof: [0-9]* checks passed' out.txt || fail "stdout does not report the overflow proof: $(cat out.txt)"
tail -n 1 out.txt | grep -q "^wrote int8.qgru.json and int8.qgru.safetensors: config 'int8', .*int8 GEMM possible$" ||
  fail "the last line of stdout is not the summary: $(tail -n 1 out.txt)"
grep -q "wrote int8.qgru.json and int8.qgru.safetensors in" log.txt || fail "log lacks the timing line: $(cat log.txt)"
grep -q "shift_reset_mul_hh_to_new_gate_input" log.txt && fail "the table went to the log too: $(cat log.txt)"
"$QGRU" -q quantize --model "$MODEL" --stats stats.json -o quiet.qgru.json > quiet.txt 2> quiet.log ||
  fail "quantize -q exited $?: $(cat quiet.log)"
[ -s quiet.log ] && fail "-q left log lines: $(cat quiet.log)"
diff <(sed 's/quiet\.qgru/int8.qgru/g' quiet.txt) out.txt > /dev/null || fail "-q changed the results on stdout"
# --json: one JSON object, the artifact's own parameter keys and values.
"$QGRU" -q quantize --model "$MODEL" --stats stats.json -o json.qgru.json --json > json.txt || fail "--json exited $?"
python3 - json.txt json.qgru.json <<'PY' || fail "--json output: $(head -c 600 json.txt)"
import json, sys
printed, artifact = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert printed["artifact"] == "json.qgru.json" and printed["tensor_file"] == "json.qgru.safetensors", printed
assert printed["config"] == "int8"
for key in ("shapes", "gemm_operands_fit_int8", "cells"):
    assert printed[key] == artifact[key], key
proof = dict(printed["overflow_proof"]); tightest = proof.pop("tightest")
assert proof == artifact["overflow_proof"], (proof, artifact["overflow_proof"])
assert len(tightest) == 4 and tightest[0]["log2_limit"] - tightest[0]["log2_bound"] == min(
    t["log2_limit"] - t["log2_bound"] for t in tightest), tightest
PY
# The linear_before_reset = 0 cell's table names that cell's own rescale shifts (docs/FIXED_POINT.md §3a).
LBR0=$ROOT/test/data/models/waves_lbr0_l2
"$QGRU" -q calibrate --model "$LBR0/model.onnx" --data "$LBR0/calib.npy" -o lbr0_stats.json > /dev/null ||
  fail "calibrate of the linear_before_reset = 0 model exited $?"
"$QGRU" -q quantize --model "$LBR0/model.onnx" --stats lbr0_stats.json -o lbr0.qgru.json > lbr0.txt ||
  fail "quantize of the linear_before_reset = 0 model exited $?"
grep -q '^layer 1 direction 0 (.*, linear_before_reset = 0)$' lbr0.txt || fail "lbr0 table lacks its cells: $(cat lbr0.txt)"
grep -Eq '^  shift_reset_mul_h_to_h +-?[0-9]+$' lbr0.txt || fail "lbr0 table lacks shift_reset_mul_h_to_h: $(cat lbr0.txt)"
grep -Eq '^  shift_weight_hh_linear_to_new_gate_input +-?[0-9]+$' lbr0.txt ||
  fail "lbr0 table lacks shift_weight_hh_linear_to_new_gate_input: $(cat lbr0.txt)"
grep -q 'shift_reset_mul_hh_to_new_gate_input' lbr0.txt && fail "lbr0 table names the other cell's shift: $(cat lbr0.txt)"

TENSOR_SHA=$(sha256sum int8.qgru.safetensors | cut -d' ' -f1)
MODEL_SHA=$(sha256sum "$MODEL" | cut -d' ' -f1)
python3 - int8.qgru.json "$TENSOR_SHA" "$MODEL_SHA" <<'PY' || fail "int8.qgru.json content"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["schema"] == "qgru.artifact" and a["version"] == 1, (a["schema"], a["version"])
assert a["tensor_file"] == "int8.qgru.safetensors", a["tensor_file"]
assert a["tensor_file_sha256"] == sys.argv[2]
assert a["provenance"]["model"]["sha256"] == sys.argv[3]
assert a["config"]["name"] == "int8"
assert a["shapes"] == {"input_size": 8, "hidden_size": 64, "num_layers": 1, "num_directions": 1}, a["shapes"]
assert a["gemm_operands_fit_int8"] is True
assert a["overflow_proof"]["ok"] is True and a["overflow_proof"]["least_spare_bits"] > 0
cell = a["cells"][0]
assert cell["gemm_x_accumulator"] == "int32" and cell["gemm_h_accumulator"] == "int32"
t = cell["tensors"]
assert t["update_gate_output"]["unsigned"] and t["new_gate_output"]["zp"] == 0
d = cell["derived"]
assert d["shift_weight_ih_linear_to_update_gate_input"] == t["weight_ih_linear"]["shift"] - t["update_gate_input"]["shift"]
assert d["shift_new_gate_output_to_h"] == t["new_gate_output"]["shift"] - t["h"]["shift"]
assert d["quant_one_in_update_gate_scale"] == 2 ** t["update_gate_output"]["shift"] + t["update_gate_output"]["zp"]
PY

# 2. The other presets, by name and by path.
"$QGRU" quantize --model "$MODEL" --stats stats.json --config int16-activations -o i16a.qgru.json 2> log16a.txt ||
  fail "int16-activations exited $?: $(cat log16a.txt)"
"$QGRU" quantize --model "$MODEL" --stats stats.json --config "$ROOT/configs/int16.json" -o i16.qgru.json 2> log16.txt ||
  fail "configs/int16.json exited $?: $(cat log16.txt)"
python3 -c "import json; a = json.load(open('i16.qgru.json')); assert not a['gemm_operands_fit_int8']" ||
  fail "int16 artifact claims int8 GEMM operands"

# 3. The integer model tracks the float one (SQNR of the output over the held-out set).
if "$QGRU" verify --help > /dev/null 2>&1; then
  "$QGRU" verify --model "$MODEL" --artifact int8.qgru.json --input "$TEST" --fail-below-sqnr 23 > v8.txt 2> v8.log ||
    fail "int8 verify: $(cat v8.log) $(cat v8.txt)"
  "$QGRU" verify --model "$MODEL" --artifact i16a.qgru.json --input "$TEST" --fail-below-sqnr 40 > v16.txt 2> v16.log ||
    fail "int16-activations verify: $(cat v16.log) $(cat v16.txt)"
fi

# 4. Refusals: exit 1, one line on stderr naming what is wrong, no output written.
expect_refusal() {  # name, expected text, command...
  local name=$1 text=$2
  shift 2
  set +e
  "$@" > /dev/null 2> err.txt
  local rc=$?
  set -e
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1 ($(cat err.txt))"
  [ "$(grep -c . err.txt)" -eq 1 ] || fail "$name: expected one line on stderr, got: $(cat err.txt)"
  grep -q -- "$text" err.txt || fail "$name: stderr lacks '$text': $(cat err.txt)"
  [ ! -e refused.qgru.json ] && [ ! -e refused.qgru.safetensors ] || fail "$name: an output was written"
}
python3 - "$ROOT/configs/int8.json" bad_bits.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["tensors"]["h"]["bits"] = 17; json.dump(c, open(sys.argv[2], "w"))
PY
expect_refusal "bits 17" "bad_bits.json: key 'tensors.h.bits'" \
  "$QGRU" -q quantize --model "$MODEL" --stats stats.json --config bad_bits.json -o refused.qgru.json
python3 - "$ROOT/configs/int16.json" int32_acc.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["gemm_accumulator"] = "int32"; json.dump(c, open(sys.argv[2], "w"))
PY
expect_refusal "int32 accumulator of 16-bit operands" "overflow: layer 0 direction 0: gemm_x accumulator" \
  "$QGRU" -q quantize --model "$MODEL" --stats stats.json --config int32_acc.json -o refused.qgru.json
expect_refusal "unknown preset" "neither a preset" \
  "$QGRU" -q quantize --model "$MODEL" --stats stats.json --config int4 -o refused.qgru.json
python3 - stats.json other_stats.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["model"]["hidden_size"] = 32; json.dump(s, open(sys.argv[2], "w"))
PY
set +e
"$QGRU" -q quantize --model "$MODEL" --stats other_stats.json -o refused.qgru.json > /dev/null 2> err.txt
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "stats of another model: exit $rc ($(cat err.txt))"
[ ! -e refused.qgru.json ] || fail "stats of another model: an output was written"

# 5. A usage error exits 2.
set +e
"$QGRU" quantize --model "$MODEL" -o refused.qgru.json > /dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "missing --stats: exit $rc, expected 2"
echo "quantize.sh: OK"
