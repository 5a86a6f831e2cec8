#!/usr/bin/env bash
# qgru linear end to end: a GPTQ checkpoint made by `qgru gptq`, run on the CPU and compared with an
# independent numpy dequantization of the checkpoint file (float64); --device cuda either matches the
# same reference within fp16 tolerance (GPU present) or fails cleanly with "no CUDA device: <reason>",
# exit 1 and no output file (no GPU, or a CPU-only build). Bad input shape: exit 1, one line, no file.
# Usage: linear.sh <qgru-binary> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
cd "$scratch"
find_python

"$python" - <<'PY'
import json, struct
import numpy as np
rng = np.random.default_rng(0)
N, K = 24, 96
W = rng.standard_normal((N, K)).astype(np.float32)
header = {"fc.weight": {"dtype": "F32", "shape": [N, K], "data_offsets": [0, W.nbytes]}}
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open("w.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + W.tobytes())
np.save("calib.npy", rng.standard_normal((256, K)).astype(np.float32))
np.save("x.npy", rng.standard_normal((7, K)).astype(np.float32))
np.save("x_bad.npy", rng.standard_normal((7, K + 1)).astype(np.float32))
PY

"$qgru" -q gptq --weights w.safetensors --tensor fc.weight --activations calib.npy --bits 4 --group-size 32 \
  --act-order -o ckpt.safetensors >/dev/null || fail "qgru gptq could not make the checkpoint"
"$qgru" -q linear --checkpoint ckpt.safetensors --layer fc --input x.npy --output y_cpu.npy >/dev/null \
  || fail "qgru linear --device cpu failed"

# compare.py OUTPUT TOLERANCE_REL [fp16-input]: y against x · Ŵᵀ from the checkpoint bytes, in float64.
cat >compare.py <<'PY'
import json, struct, sys
import numpy as np
out, tol, fp16 = sys.argv[1], float(sys.argv[2]), len(sys.argv) > 3
raw = open("ckpt.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
def tensor(name):
    meta = header[name]
    dt = {"I32": np.int32, "F16": np.float16, "F32": np.float32}[meta["dtype"]]
    a, b = meta["data_offsets"]
    return np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt).reshape(meta["shape"])
config = json.load(open("quantize_config.json"))
bits = config["bits"]
qweight, qzeros = tensor("fc.qweight").view(np.uint32), tensor("fc.qzeros").view(np.uint32)
scales, g_idx = tensor("fc.scales").astype(np.float64), tensor("fc.g_idx")
per = 32 // bits
mask = (1 << bits) - 1
K, N = qweight.shape[0] * per, qweight.shape[1]
codes = np.zeros((K, N), dtype=np.int64)
for i in range(per):
    codes[i::per, :] = (qweight >> (bits * i)) & mask
zeros = np.zeros((qzeros.shape[0], N), dtype=np.int64)
for i in range(per):
    zeros[:, i::per] = (qzeros >> (bits * i)) & mask
if config.get("checkpoint_format", "gptq") == "gptq":
    zeros = zeros + 1  # v1 stores zero - 1
W = scales[g_idx, :] * (codes - zeros[g_idx, :])  # [K, N]
x = np.load("x.npy").astype(np.float64)
if fp16:
    x = x.astype(np.float16).astype(np.float64)
ref = x @ W
y = np.load(out).astype(np.float64)
assert y.shape == ref.shape, (y.shape, ref.shape)
err = np.abs(y - ref).max()
scale = np.abs(ref).max()
assert scale > 0
print(f"{out}: max |err| {err:.3g}, max |ref| {scale:.3g}")
sys.exit(0 if err <= tol * scale else 1)
PY
"$python" compare.py y_cpu.npy 1e-5 || fail "CPU linear differs from the numpy reference"

set +e
"$qgru" linear --checkpoint ckpt.safetensors --layer fc --input x.npy --output y_cuda.npy --device cuda >out.txt 2>err.txt
rc=$?
set -e
if [ $rc -eq 0 ]; then
  "$python" compare.py y_cuda.npy 2e-3 fp16 || fail "CUDA linear differs from the numpy reference"
else
  [ $rc -eq 1 ] || fail "--device cuda without success should exit 1, got $rc"
  grep -q "^qgru: error: no CUDA device: " err.txt || fail "--device cuda failure must say 'no CUDA device: <reason>': $(cat err.txt)"
  [ ! -e y_cuda.npy ] || fail "--device cuda failed but wrote an output file"
  echo "cuda: $(cat err.txt)"
fi

set +e
"$qgru" linear --checkpoint ckpt.safetensors --layer fc --input x_bad.npy --output y_bad.npy >/dev/null 2>err.txt
rc=$?
set -e
[ $rc -eq 1 ] || fail "bad input shape should exit 1, got $rc"
[ "$(wc -l <err.txt)" -eq 1 ] || fail "bad input shape should print one line: $(cat err.txt)"
grep -q "expected \[M, 96\]" err.txt || fail "bad input message should name the expected shape: $(cat err.txt)"
[ ! -e y_bad.npy ] || fail "bad input wrote an output file"
echo "linear.sh: OK"
