#!/usr/bin/env bash
# qgru run on float models: the bundled example end to end, a golden case through the CLI (batch-first, h0,
# h_n), and the failure contract: bad input -> exit 1, one line on stderr, no output file; usage -> exit 2.
# Usage: run_float.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
example="$root/examples/digits"
golden="$root/test/data/golden"
find_python

# 1. The bundled example: float accuracy of the digits classifier from the CLI's output.
"$qgru" run --model "$example/gru.safetensors" --input "$example/test.npy" --output "$scratch/y.npy" \
  >"$scratch/stdout"
grep -q "^output .*y.npy: \[8, 597, 64\] float32" "$scratch/stdout" || fail "summary: $(cat "$scratch/stdout")"
grep -q "^time: " "$scratch/stdout" || fail "no time in the summary"
accuracy="$("$python" "$root/scripts/example_accuracy.py" "$scratch/y.npy" --model "$example/gru.safetensors" \
  --labels "$example/test_labels.npy")"
echo "digits example: $accuracy"
"$python" -c "import sys; a = float(sys.argv[1]); sys.exit(0 if a >= 0.97 else 1)" "$(echo "$accuracy" | awk '{print $2}')" ||
  fail "float accuracy below 0.97: $accuracy"

# 2. Golden cases through the CLI: batch-first layout, h0 and h_n, haste layout; torch's numbers within 1e-5.
"$qgru" -q run --model "$golden/batch_first/model.safetensors" --input "$golden/batch_first/x.npy" --batch-first \
  --output "$scratch/bf.npy" >/dev/null
"$qgru" -q run --model "$golden/hidden_33/model.safetensors" --input "$golden/hidden_33/x.npy" \
  --h0 "$golden/hidden_33/h0.npy" --output "$scratch/h33.npy" --hn "$scratch/h33_hn.npy" >/dev/null
"$qgru" -q run --model "$golden/haste_layout/model.safetensors" --layout haste --input "$golden/haste_layout/x.npy" \
  --output "$scratch/haste.npy" >/dev/null
"$python" - "$scratch" "$golden" <<'EOF' || fail "CLI outputs differ from torch"
import sys
import numpy as np
scratch, golden = sys.argv[1], sys.argv[2]
pairs = [("bf.npy", "batch_first/y.npy"), ("h33.npy", "hidden_33/y.npy"), ("h33_hn.npy", "hidden_33/hn.npy"),
         ("haste.npy", "haste_layout/y.npy")]
for ours, theirs in pairs:
    a, b = np.load(f"{scratch}/{ours}"), np.load(f"{golden}/{theirs}")
    assert a.shape == b.shape and a.dtype == np.float32, (ours, a.shape, b.shape, a.dtype)
    diff = float(np.abs(a - b).max())
    assert diff <= 1e-5, (ours, diff)
EOF

# 3. Bad inputs: exit 1, one line naming the file, no output.
head -c 100 "$example/test.npy" >"$scratch/truncated.npy"
expect_failure 1 "$scratch/out1.npy" "truncated.npy" -- run --model "$example/gru.safetensors" \
  --input "$scratch/truncated.npy" --output "$scratch/out1.npy"
expect_failure 1 "$scratch/out2.npy" "x.npy: expected \[T, N, 8\] with C = 8, got \[6, 3, 5\]" -- run \
  --model "$example/gru.safetensors" --input "$golden/one_layer/x.npy" --output "$scratch/out2.npy"
expect_failure 1 "$scratch/out3.npy" "h0.npy: expected h0" -- run --model "$example/gru.safetensors" \
  --input "$example/test.npy" --h0 "$golden/h0/h0.npy" --output "$scratch/out3.npy"
head -c 300 "$example/gru.safetensors" >"$scratch/truncated.safetensors"
expect_failure 1 "$scratch/out4.npy" "truncated.safetensors" -- run --model "$scratch/truncated.safetensors" \
  --input "$example/test.npy" --output "$scratch/out4.npy"
expect_failure 1 "$scratch/out5.npy" "no haste GRU tensors" -- run --model "$example/gru.safetensors" \
  --layout haste --input "$example/test.npy" --output "$scratch/out5.npy"
# --device cuda without a usable GPU (or without CUDA in the build): one line naming the cause. With a GPU it
# runs (test/cli/device_cuda.sh compares the GPU's results with the CPU's).
"$qgru" run --model "$example/gru.safetensors" --input "$example/test.npy" --output "$scratch/auto.npy" \
  --device auto >/dev/null 2>"$scratch/auto.err"
if ! grep -q "using CUDA" "$scratch/auto.err"; then
  expect_failure 1 "$scratch/out6.npy" "--device cuda: no usable CUDA device: " -- run \
    --model "$example/gru.safetensors" --input "$example/test.npy" --output "$scratch/out6.npy" --device cuda
fi
rm -f "$scratch/out6.npy" "$scratch/auto.npy"
expect_failure 1 "$scratch/out7.npy" "a float model has no integer codes" -- run \
  --model "$example/gru.safetensors" --input "$example/test.npy" --output "$scratch/out7.npy" --codes "$scratch/c.npy"
expect_failure 1 "$scratch/out8.npy" "missing.npy" -- run --model "$example/gru.safetensors" \
  --input "$scratch/missing.npy" --output "$scratch/out8.npy"

# 4. Usage errors: exit 2.
expect_failure 2 "$scratch/out9.npy" "" -- run --model "$example/gru.safetensors" --input "$example/test.npy"
expect_failure 2 "$scratch/out9.npy" "" -- run --model "$example/gru.safetensors" --input "$example/test.npy" \
  --output "$scratch/out9.npy" --layout cudnn
expect_failure 2 "$scratch/out9.npy" "" -- run --model "$example/gru.safetensors" --input "$example/test.npy" \
  --output "$scratch/out9.npy" --device tpu
echo "run_float: all checks passed"
