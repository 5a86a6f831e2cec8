#!/usr/bin/env bash
# qgru run --h0-codes / --hn-codes, the state as a hardware team holds it: a sequence split in two runs, the first
# run's h_n codes fed back as the second's h0 codes, must give the codes of one run over the whole sequence (output
# codes of the second part, h_n), for one layer (the bundled example, int8 and 16-bit activations) and two layers
# (denoise_l2); the codes are the golden vectors' (input.q_h0, output.q_h_n); and the options' refusals.
# Usage: run_state_codes.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
find_python
work="$scratch/work"  # expect_refusal leaves its notes in $scratch, beside the folder it checks
mkdir -p "$work"
cd "$work"

split() {  # x.npy first.npy second.npy T1: x[:T1] and x[T1:] (time-major)
  "$python" -c "import sys, numpy as np
x = np.load(sys.argv[1]); t = int(sys.argv[4])
np.save(sys.argv[2], x[:t]); np.save(sys.argv[3], x[t:])" "$@"
}

same_codes() {  # whole.codes.npy second.codes.npy T1 whole.hn.npy second.hn.npy: codes of x[T1:] and h_n equal
  "$python" -c "import sys, numpy as np
whole, second, t = np.load(sys.argv[1]), np.load(sys.argv[2]), int(sys.argv[3])
hn_whole, hn_second = np.load(sys.argv[4]), np.load(sys.argv[5])
assert whole.dtype == second.dtype and hn_whole.dtype == hn_second.dtype, (whole.dtype, second.dtype)
assert hn_whole.dtype.kind in 'iu', hn_whole.dtype
assert np.array_equal(whole[t:], second), 'output codes of the second part differ'
assert np.array_equal(hn_whole, hn_second), 'h_n codes differ'
assert not np.array_equal(whole[:second.shape[0]], second) or t == 0, 'the state made no difference'" "$@"
}

check_split() {  # name model input.npy T1
  local name=$1 model=$2 input=$3 t1=$4
  split "$input" "$name.first.npy" "$name.second.npy" "$t1"
  "$qgru" -q run --model "$model" --input "$input" --output "$name.y.npy" --codes "$name.codes.npy" \
    --hn-codes "$name.hn_codes.npy" > /dev/null
  "$qgru" -q run --model "$model" --input "$name.first.npy" --output "$name.y1.npy" --hn-codes "$name.hn1.npy" > /dev/null
  "$qgru" -q run --model "$model" --input "$name.second.npy" --h0-codes "$name.hn1.npy" --output "$name.y2.npy" \
    --codes "$name.codes2.npy" --hn-codes "$name.hn2.npy" > "$name.out"
  grep -q "h_n codes $name.hn2.npy" "$name.out" || fail "$name: run does not report --hn-codes: $(cat "$name.out")"
  same_codes "$name.codes.npy" "$name.codes2.npy" "$t1" "$name.hn_codes.npy" "$name.hn2.npy" ||
    fail "$name: two runs joined by --hn-codes/--h0-codes differ from one run"
  echo "$name: a run split at t = $t1 gives the codes of the whole run"
}

example=$root/examples/digits
"$qgru" -q calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o digits.stats.json > /dev/null
for preset in int8 int16-activations; do
  "$qgru" -q quantize --model "$example/gru.safetensors" --stats digits.stats.json --config $preset \
    -o digits_$preset.qgru.json > /dev/null
  check_split "digits_$preset" "digits_$preset.qgru.json" "$example/test.npy" 5
done
"$python" -c "import numpy as np; assert np.load('digits_int8.hn_codes.npy').dtype == np.int8
assert np.load('digits_int16-activations.hn_codes.npy').dtype == np.int16" || fail "--hn-codes not in the narrowest dtype"

denoise=$root/test/data/models/denoise_l2
"$qgru" -q calibrate --model "$denoise/gru.safetensors" --data "$denoise/calib.npy" -o denoise.stats.json > /dev/null
"$qgru" -q quantize --model "$denoise/gru.safetensors" --stats denoise.stats.json -o denoise.qgru.json > /dev/null
check_split denoise_l2 denoise.qgru.json "$denoise/test.npy" 13

# The golden vectors start from the codes given and end at the codes --hn-codes writes.
"$python" -c "import numpy as np; np.save('x3.npy', np.load('denoise_l2.second.npy')[:, :3])
np.save('h3.npy', np.load('denoise_l2.hn1.npy')[:, :3])"
"$qgru" -q run --model denoise.qgru.json --input x3.npy --h0-codes h3.npy --output y3.npy --hn-codes hn3.npy \
  --dump-intermediates golden3.safetensors > /dev/null
"$python" - golden3.safetensors h3.npy hn3.npy <<'PY' || fail "golden vectors and --h0-codes/--hn-codes disagree"
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
size = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + size])
def tensor(name):
    entry = header[name]
    begin, end = entry["data_offsets"]
    assert entry["dtype"] == "I32", entry
    return np.frombuffer(raw[8 + size + begin:8 + size + end], "<i4").reshape(entry["shape"])
assert np.array_equal(tensor("input.q_h0"), np.load(sys.argv[2]))
assert np.array_equal(tensor("output.q_h_n"), np.load(sys.argv[3]))
PY

# Refusals: one line, the right exit code, nothing written.
"$python" -c "import numpy as np
h = np.load('digits_int8.hn1.npy'); bad = h.astype(np.int32); bad[0, 2, 7] = 200; np.save('h0_out_of_range.npy', bad)
np.save('h0_floats.npy', h.astype(np.float32)); np.save('h0_wrong_shape.npy', h[:, :5])" || fail "making the bad states"
set +e  # expect_refusal checks each exit code itself
expect_refusal 1 "h0_out_of_range.npy: h0 code 200 at \[0, 2, 7\] is outside the h code range \[-128, 127\]" \
  run --model digits_int8.qgru.json --input digits_int8.second.npy --h0-codes h0_out_of_range.npy --output r.npy
expect_refusal 1 "h0_floats.npy: expected integer h0 codes" \
  run --model digits_int8.qgru.json --input digits_int8.second.npy --h0-codes h0_floats.npy --output r.npy
expect_refusal 1 "h0_wrong_shape.npy: expected h0 codes \[L\*D, N, H\] = \[1, 597, 64\], got \[1, 5, 64\]" \
  run --model digits_int8.qgru.json --input digits_int8.second.npy --h0-codes h0_wrong_shape.npy --output r.npy
expect_refusal 2 "excludes" \
  run --model digits_int8.qgru.json --input digits_int8.second.npy --h0 h0_floats.npy --h0-codes digits_int8.hn1.npy \
  --output r.npy
expect_refusal 2 "--hn-codes" \
  run --model digits_int8.qgru.json --input digits_int8.second.npy --output r.npy --hn-codes r.npy
expect_refusal 1 "--hn-codes r_hn.npy: a float model has no integer codes" \
  run --model "$example/gru.safetensors" --input digits_int8.second.npy --output r.npy --hn-codes r_hn.npy
expect_refusal 1 "--h0-codes digits_int8.hn1.npy: a float model has no integer codes" \
  run --model "$example/gru.safetensors" --input digits_int8.second.npy --output r.npy --h0-codes digits_int8.hn1.npy
echo "run_state_codes.sh: OK ($refusals refusals)"
