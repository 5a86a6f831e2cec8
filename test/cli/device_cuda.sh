#!/usr/bin/env bash
# qgru run / verify with --device cuda|auto on a random 2-layer bidirectional GRU, every preset.
#   Without a usable GPU (or without CUDA in the build): --device cuda is one line naming the cause, exit 1,
#   no output; --device auto falls back to the CPU, says so, and computes the CPU's codes.
#   With a GPU: the CUDA integer codes (output and h_n) equal the CPU's one for one, the CUDA float GRU is
#   within 1e-4 of the CPU's, and verify --device cuda prints and reports the comparison.
# Which case applies is read from `--device auto`'s own log line, and the script says which one it ran.
# Usage: device_cuda.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
cd "$scratch"
model="$root/test/data/golden_fixed/random_l2_bidir/model.safetensors"  # nn.GRU(5, 7, num_layers=2, bidirectional)
find_python

"$python" - <<'PY'
import numpy as np
rng = np.random.default_rng(5)
np.save("calib.npy", rng.normal(size=(9, 6, 5)).astype(np.float32))
np.save("x.npy", (2.0 * rng.normal(size=(7, 4, 5))).astype(np.float32))  # wider than calibration: saturation
np.save("h0.npy", (0.3 * rng.normal(size=(4, 4, 7))).astype(np.float32))
PY
"$qgru" -q calibrate --model "$model" --data calib.npy -o stats.json > /dev/null
presets="int8 int16-activations int16"
for preset in $presets; do
  "$qgru" -q quantize --model "$model" --stats stats.json --config "$preset" -o "$preset.qgru.json"
done

# expect_failure OUTPUT PATTERN -- qgru args...: exit 1, one stderr line matching PATTERN, no output file.
expect_failure() {
  local output="$1" pattern="$2"
  shift 3
  local rc=0
  "$qgru" "$@" > stdout 2> stderr || rc=$?
  [ "$rc" = 1 ] || fail "expected exit 1, got $rc: qgru $* (stderr: $(cat stderr))"
  [ "$(wc -l < stderr)" = 1 ] || fail "expected one stderr line: qgru $*: $(cat stderr)"
  grep -q "^qgru: error: .*$pattern" stderr || fail "stderr lacks '$pattern': $(cat stderr)"
  [ -z "$output" ] || [ ! -e "$output" ] || fail "output $output exists after a failed run: qgru $*"
}

"$qgru" run --model int8.qgru.json --input x.npy --output auto.npy --device auto > auto.out 2> auto.err
if grep -q "device auto: using CUDA" auto.err; then
  echo "device_cuda: a GPU is usable: comparing the CUDA executors with the CPU"
  for preset in $presets; do
    "$qgru" -q run --model "$preset.qgru.json" --input x.npy --h0 h0.npy --output "$preset.cpu.npy" \
      --codes "$preset.cpu.codes.npy" --hn "$preset.cpu.hn.npy" --device cpu --executor reference > /dev/null
    "$qgru" -q run --model "$preset.qgru.json" --input x.npy --h0 h0.npy --output "$preset.cuda.npy" \
      --codes "$preset.cuda.codes.npy" --hn "$preset.cuda.hn.npy" --device cuda > "$preset.cuda.out"
    grep -q "integer executor, cuda" "$preset.cuda.out" || fail "$preset: executor not reported: $(cat "$preset.cuda.out")"
    cmp -s "$preset.cpu.codes.npy" "$preset.cuda.codes.npy" || fail "$preset: CUDA output codes differ from the CPU's"
    cmp -s "$preset.cpu.hn.npy" "$preset.cuda.hn.npy" || fail "$preset: CUDA h_n differs from the CPU's"
    "$qgru" -q verify --model "$model" --artifact "$preset.qgru.json" --input x.npy --h0 h0.npy --device cuda \
      --report "$preset.report.json" > "$preset.verify.out" || fail "$preset: verify --device cuda failed"
    grep -q "equal code for code" "$preset.verify.out" || fail "$preset: verify output: $(cat "$preset.verify.out")"
    "$python" -c "import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))['device_check']['passed'] else 1)" \
      "$preset.report.json" || fail "$preset: report's device_check did not pass"
    echo "$preset: CUDA codes equal the CPU's"
  done
  "$qgru" -q run --model "$model" --input x.npy --h0 h0.npy --output float.cpu.npy --hn float.cpu.hn.npy --device cpu > /dev/null
  "$qgru" -q run --model "$model" --input x.npy --h0 h0.npy --output float.cuda.npy --hn float.cuda.hn.npy --device cuda > /dev/null
  "$python" - <<'PY' || fail "CUDA float GRU outside 1e-4 of the CPU's"
import sys
import numpy as np
worst = max(float(np.max(np.abs(np.load(f"{name}.cpu{ext}") - np.load(f"{name}.cuda{ext}"))))
            for name, ext in (("float", ".npy"), ("float", ".hn.npy")))
print(f"float GRU: max |cuda - cpu| = {worst:.3g}")
sys.exit(0 if worst <= 1e-4 else 1)
PY
else
  grep -q "device auto: using the CPU (" auto.err || fail "--device auto did not say why it uses the CPU: $(cat auto.err)"
  echo "device_cuda: no usable GPU ($(sed -n 's/.*using the CPU (\(.*\))$/\1/p' auto.err)): checking the refusals and the fallback"
  "$qgru" -q run --model int8.qgru.json --input x.npy --output cpu.npy --device cpu > /dev/null
  cmp -s auto.npy cpu.npy || fail "--device auto's fallback differs from --device cpu"
  for preset in $presets; do
    expect_failure "$preset.cuda.npy" "--device cuda: no usable CUDA device: " -- run --model "$preset.qgru.json" \
      --input x.npy --output "$preset.cuda.npy" --device cuda
  done
  expect_failure float.cuda.npy "--device cuda: no usable CUDA device: " -- run --model "$model" --input x.npy \
    --output float.cuda.npy --device cuda
  expect_failure "" "--device cuda: no usable CUDA device: " -- verify --model "$model" --artifact int8.qgru.json \
    --input x.npy --device cuda
  "$qgru" verify --model "$model" --artifact int8.qgru.json --input x.npy --device auto > verify.out 2> verify.err ||
    fail "verify --device auto without a GPU failed: $(cat verify.err)"
  grep -q "device auto: using the CPU" verify.err || fail "verify --device auto did not say it fell back"
  ! grep -q "device check" verify.out || fail "verify printed a device check without a GPU"
fi
echo "device_cuda: ok"
