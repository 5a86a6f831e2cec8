#!/usr/bin/env bash
# End-to-end test of `qgru calibrate` on the bundled example (examples/digits): statistics, the range table,
# merging shards (equals one run over both files), and refusals (truncated statistics, NaN in data) that exit 1
# with one line and write nothing.
# Usage: bash calibrate.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
QGRU=$qgru
SCRATCH=$scratch
ROOT=$root
MODEL=$ROOT/examples/digits/gru.safetensors
CALIB=$ROOT/examples/digits/calib.npy
OTHER=$ROOT/examples/digits/test.npy
cd "$SCRATCH"

# 1. One run: the table has one row per observed tensor, the JSON names the schema and the model shape.
"$QGRU" calibrate --model "$MODEL" --data "$CALIB" --method kl -o stats.json > table.txt 2> log.txt ||
  fail "calibrate exited $?: $(cat log.txt)"
[ "$(grep -c '^0 ' table.txt)" -eq 10 ] || fail "expected 10 table rows, got: $(cat table.txt)"
grep -q 'update_gate_output .* u8 ' table.txt || fail "sigmoid output not u8 in the table"
python3 - stats.json <<'PY' || fail "stats.json content"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["schema"] == "qgru.calibration_stats" and s["schema_version"] == 1, s["schema"]
m = s["model"]
assert (m["num_layers"], m["num_directions"], m["input_size"]) == (1, 1, 8), m
assert s["method"]["name"] == "kl"
assert len(s["tensors"]) == 10
assert s["data_files"][0]["sequences"] == 1000 and s["data_files"][0]["time_steps"] == 8
for t in s["tensors"]:
    total = sum(sum(run[1:]) for run in t["histogram"]["runs"])
    assert total == t["count"] - t["zero_count"], (t["tensor"], total)
    assert t["count"] > 0
PY

# 2. Shards: stats of calib.npy and of test.npy merged (in either order) equal one run over both files.
"$QGRU" calibrate --model "$MODEL" --data "$CALIB" --data "$OTHER" --method kl -o both.json > /dev/null 2>&1
cp stats.json shard_a.json  # 1.'s command: the same model, data and method (calibrate is deterministic)
"$QGRU" calibrate --model "$MODEL" --data "$OTHER" --method kl -o shard_b.json > /dev/null 2>&1
"$QGRU" calibrate --merge shard_a.json shard_b.json -o merged_ab.json > merged_table.txt 2> merge_log.txt ||
  fail "merge exited $?: $(cat merge_log.txt)"
"$QGRU" calibrate --merge shard_b.json shard_a.json -o merged_ba.json > /dev/null 2>&1
cmp -s <(tail -n +2 merged_table.txt) <("$QGRU" calibrate --merge shard_a.json shard_b.json -o again.json 2>/dev/null | tail -n +2) ||
  fail "merge table not reproducible"
python3 - both.json merged_ab.json merged_ba.json <<'PY' || fail "merged statistics differ from one run"
import json, sys
single, ab, ba = (json.load(open(p)) for p in sys.argv[1:4])
exact = ["count", "zero_count", "min", "max", "histogram"]
for merged, in_order in ((ab, True), (ba, False)):
    assert len(merged["tensors"]) == len(single["tensors"])
    for s, m in zip(single["tensors"], merged["tensors"]):
        for key in exact:
            assert s[key] == m[key], (s["tensor"], key)
        assert s["ema"]["steps"] == m["ema"]["steps"]
        if in_order:  # the EMA is order-dependent: equal (up to rounding) only in the files' order
            for key in ("min", "max"):
                assert abs(s["ema"][key] - m["ema"][key]) <= 1e-9 * max(1.0, abs(s["ema"][key])), (s["tensor"], key)
    assert [f["sha256"] for f in merged["data_files"]] == ([f["sha256"] for f in single["data_files"]]
        if in_order else [f["sha256"] for f in reversed(single["data_files"])])
assert ab["model"] == single["model"]
PY

# 3. Truncated statistics: exit 1, one line naming the file, nothing written.
head -c 2000 stats.json > truncated.json
set +e
"$QGRU" -q calibrate --merge truncated.json stats.json -o bad_merge.json > /dev/null 2> err.txt
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "truncated stats: exit $rc, expected 1"
[ "$(wc -l < err.txt)" -eq 1 ] || fail "truncated stats: expected one line, got: $(cat err.txt)"
grep -q 'truncated.json: not valid JSON' err.txt || fail "truncated stats: message does not name the file: $(cat err.txt)"
[ ! -e bad_merge.json ] || fail "truncated stats: output written"

# 4. NaN in data: exit 1, one line naming the file and the position, nothing written.
python3 - nan.npy <<'PY'
import struct, sys
T, N, C = 3, 2, 8
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d, %d), }" % (T, N, C)
header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
values = [0.25] * (T * N * C)
values[(2 * N + 1) * C + 5] = float("nan")  # t=2, n=1, c=5
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<%df" % len(values), *values))
PY
set +e
"$QGRU" -q calibrate --model "$MODEL" --data "$CALIB" --data nan.npy -o nan_stats.json > /dev/null 2> err.txt
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "NaN data: exit $rc, expected 1"
[ "$(wc -l < err.txt)" -eq 1 ] || fail "NaN data: expected one line, got: $(cat err.txt)"
grep -q 'nan.npy: non-finite value nan .*(t=2, n=1, c=5)' err.txt || fail "NaN data: message: $(cat err.txt)"
[ ! -e nan_stats.json ] || fail "NaN data: output written"

# 5. --batch-first reads [N, T, C]: the same NaN is now at t=1, n=2.
set +e
"$QGRU" -q calibrate --model "$MODEL" --data nan.npy --batch-first -o nan_stats.json > /dev/null 2> err.txt
set -e
grep -q 'nan.npy: non-finite value nan .*(t=1, n=2, c=5)' err.txt || fail "--batch-first NaN position: $(cat err.txt)"

# 6. --data-dir gives the same statistics as naming the file; --max-samples keeps the first sequences;
#    --method percentile with --percentile is stored as percentile:P.
mkdir -p data_dir
cp "$CALIB" data_dir/a.npy
"$QGRU" -q calibrate --model "$MODEL" --data-dir data_dir --method kl -o dir_stats.json > /dev/null
"$QGRU" -q calibrate --model "$MODEL" --data "$CALIB" --max-samples 300 --method percentile --percentile 99.9 \
  -o small.json > small_table.txt
grep -q 'percentile:99.9 ' small_table.txt || fail "percentile method not in the table: $(cat small_table.txt)"
python3 - stats.json dir_stats.json small.json <<'PY' || fail "--data-dir / --max-samples"
import json, sys
full, from_dir, small = (json.load(open(p)) for p in sys.argv[1:4])
assert full["tensors"] == from_dir["tensors"]
assert small["data_files"][0]["sequences"] == 300
assert small["method"]["name"] == "percentile:99.9"
x = small["tensors"][0]
assert x["tensor"] == "x" and x["count"] == 8 * 300 * 8, x["count"]
PY

# 7. +pow2: the shift the library chose (debug detail "-> shift N", from calib's restatement of the grid rule)
#    is the shift quant_from_range gives the returned range (the table), for every tensor and method. The first
#    300 sequences: the rule and both sides of the comparison are the same code whatever the data's size.
for method in mse+pow2 kl+pow2 minmax+pow2 percentile:99.9+pow2; do
  "$QGRU" -v calibrate --model "$MODEL" --data "$CALIB" --max-samples 300 --method "$method" -o pow2.json \
    > pow2_table.txt 2> pow2_log.txt
  sed -n 's/.*layer 0 direction 0 \([a-z_]*\):.*-> shift \(-\{0,1\}[0-9]*\)$/\1 \2/p' pow2_log.txt > chosen.txt
  awk 'NR > 1 { print $3, $(NF - 1) }' pow2_table.txt > table_shifts.txt
  [ "$(wc -l < chosen.txt)" -eq 10 ] || fail "$method: expected 10 pow2 details, got $(cat chosen.txt)"
  diff chosen.txt table_shifts.txt > /dev/null || fail "$method: pow2 shifts differ from quant_from_range: $(paste chosen.txt table_shifts.txt)"
done

# 8. x is one space per layer, shared by its directions: in a bidirectional model, calibrate's table gives both
#    directions' x rows the same range, shift and zero point (the union of the directions' ema ranges, which differ:
#    the reverse direction visits t = T-1 .. 0), and quantize's artifact holds exactly those x parameters.
BIDIR=$ROOT/test/data/models/digits_l2_bidir/gru.safetensors
"$QGRU" -q calibrate --model "$BIDIR" --data "$CALIB" --method ema -o bidir.json > bidir_table.txt
"$QGRU" -q quantize --model "$BIDIR" --stats bidir.json --config int8 -o bidir.qgru.json > /dev/null
python3 - bidir_table.txt bidir.json bidir.qgru.json <<'PY' || fail "x of a bidirectional layer: $(grep ' x ' bidir_table.txt)"
import json, sys
rows = {}
for line in open(sys.argv[1]).read().splitlines()[1:]:
    f = line.split()
    if f[2] == "x":
        rows[(int(f[0]), int(f[1]))] = (float(f[7]), float(f[8]), int(f[10]), int(f[11]))
stats = {(t["layer"], t["direction"]): t["ema"] for t in json.load(open(sys.argv[2]))["tensors"] if t["tensor"] == "x"}
artifact = json.load(open(sys.argv[3]))
for layer in (0, 1):
    assert rows[(layer, 0)] == rows[(layer, 1)], (layer, rows)
    printed = lambda value: float(f"{value:.6g}")  # the table's %.6g
    assert printed(min(stats[(layer, d)]["min"] for d in (0, 1))) == rows[(layer, 0)][0], (layer, rows)
    assert printed(max(stats[(layer, d)]["max"] for d in (0, 1))) == rows[(layer, 0)][1], (layer, rows)
    for cell in artifact["cells"]:
        if cell["layer"] == layer:
            x = cell["tensors"]["x"]
            assert (x["shift"], x["zp"]) == rows[(layer, 0)][2:], (layer, x, rows[(layer, 0)])
# The directions' own EMA ranges differ on layer 1 (else this test would prove nothing).
assert stats[(1, 0)] != stats[(1, 1)], stats
PY

# 9. Usage errors exit 2: an unknown option and --merge with --model.
set +e
"$QGRU" calibrate --model "$MODEL" --merge stats.json -o x.json > /dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--merge with --model: exit $rc, expected 2"
echo "calibrate.sh: all checks passed"
