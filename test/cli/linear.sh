#!/usr/bin/env bash
# qgru linear end to end: GPTQ checkpoints made by `qgru gptq` (4-bit act-order with a bias; 2-bit v1 with
# zero points of 0; 3-bit v2), run on the CPU and compared with an independent numpy dequantization of the
# checkpoint file by the clients' rules (float64; v1 zero points by GPTQModel's whole-word arithmetic), the
# bias added unless --no-bias; --device cuda either matches the
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
N, K = 32, 96
W = rng.standard_normal((N, K)).astype(np.float32)
W[::2, :] = np.abs(W[::2, :])  # every other row >= 0: asymmetric zero points of 0
b = rng.standard_normal(N).astype(np.float32)
header = {"fc.weight": {"dtype": "F32", "shape": [N, K], "data_offsets": [0, W.nbytes]},
          "fc.bias": {"dtype": "F32", "shape": [N], "data_offsets": [W.nbytes, W.nbytes + b.nbytes]}}
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open("w.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + W.tobytes() + b.tobytes())
np.save("calib.npy", rng.standard_normal((256, K)).astype(np.float32))
np.save("x.npy", rng.standard_normal((7, K)).astype(np.float32))
np.save("x_bad.npy", rng.standard_normal((7, K + 1)).astype(np.float32))
PY

"$qgru" -q gptq --weights w.safetensors --tensor fc.weight --activations calib.npy --bits 4 --group-size 32 \
  --act-order -o ckpt.safetensors >/dev/null || fail "qgru gptq could not make the checkpoint"
"$qgru" -q linear --checkpoint ckpt.safetensors --layer fc --input x.npy --output y_cpu.npy >linear.stdout \
  || fail "qgru linear --device cpu failed"
grep -q "bias=yes" linear.stdout || fail "qgru linear did not report the bias: $(cat linear.stdout)"
grep -q "device=cpu engine=cpu-f32 " linear.stdout || fail "qgru linear did not name its engine: $(cat linear.stdout)"
# --help says how the CUDA engine is chosen, every value of the variable
"$qgru" linear --help >help.stdout || fail "qgru linear --help failed"
for value in legacy stripes auto wgmma; do
  grep -q "QGRU_CUDA_LINEAR_KERNEL" help.stdout && grep -q "$value" help.stdout ||
    fail "qgru linear --help does not explain QGRU_CUDA_LINEAR_KERNEL=$value: $(cat help.stdout)"
done
"$qgru" -q linear --checkpoint ckpt.safetensors --layer fc --input x.npy --output y_nobias.npy --no-bias >/dev/null \
  || fail "qgru linear --no-bias failed"
mkdir -p v1_2bit v2_3bit
"$qgru" -q gptq --weights w.safetensors --tensor fc.weight --activations calib.npy --bits 2 --group-size 32 \
  -o v1_2bit/ckpt.safetensors >/dev/null 2>v1_2bit.stderr || fail "qgru gptq 2-bit failed"
grep -q "zero point(s) are 0" v1_2bit.stderr || fail "the 2-bit case should hold zero points of 0: $(cat v1_2bit.stderr)"
"$qgru" -q linear --checkpoint v1_2bit/ckpt.safetensors --layer fc --input x.npy --output y_2bit.npy >/dev/null \
  || fail "qgru linear 2-bit failed"
"$qgru" -q gptq --weights w.safetensors --tensor fc.weight --activations calib.npy --bits 3 --group-size 32 --sym \
  --format gptq_v2 -o v2_3bit/ckpt.safetensors >/dev/null || fail "qgru gptq 3-bit failed"
"$qgru" -q linear --checkpoint v2_3bit/ckpt.safetensors --layer fc --input x.npy --output y_3bit.npy >/dev/null \
  || fail "qgru linear 3-bit failed"

# compare.py CHECKPOINT OUTPUT TOLERANCE_REL [fp16-input] [no-bias]: y against x · Ŵᵀ + b from the checkpoint
# bytes, in float64, decoded as GPTQModel 7.7.0 decodes them (docs/GPTQ.md, "Clients").
cat >compare.py <<'PY'
import json, os, struct, sys
import numpy as np
ckpt, out, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
fp16, with_bias = "fp16" in sys.argv[4:], "no-bias" not in sys.argv[4:]
raw = open(ckpt, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
def tensor(name):
    meta = header[name]
    dt = {"I32": np.int32, "F16": np.float16, "F32": np.float32}[meta["dtype"]]
    a, b = meta["data_offsets"]
    return np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt).reshape(meta["shape"])
config = json.load(open(os.path.join(os.path.dirname(ckpt) or ".", "quantize_config.json")))
bits = config["bits"]
mask = (1 << bits) - 1
def stream(words, count):  # little-endian bit stream of uint32 words along axis 0 -> count codes
    bitpos = np.arange(count) * bits
    lo = words[bitpos // 32].astype(np.uint64) >> (bitpos % 32)[:, None].astype(np.uint64)
    spill = (bitpos % 32) + bits > 32
    hi = np.zeros_like(lo)
    nxt = np.minimum(bitpos // 32 + 1, words.shape[0] - 1)
    hi[spill] = words[nxt[spill]].astype(np.uint64) << (32 - (bitpos[spill] % 32))[:, None].astype(np.uint64)
    return ((lo | hi) & mask).astype(np.int64)
qweight, qzeros = tensor("fc.qweight").view(np.uint32), tensor("fc.qzeros").view(np.uint32).copy()
scales, g_idx = tensor("fc.scales").astype(np.float64), tensor("fc.g_idx")
K, N = qweight.shape[0] * 32 // bits, qweight.shape[1]
codes = stream(qweight, K)  # [K, N]
v1 = config.get("checkpoint_format", config.get("format", "gptq")) == "gptq"
if v1 and bits != 3:  # GPTQModel: qzeros += 0x55555555 / 0x11111111 / 0x01010101 on whole int32 words
    qzeros = (qzeros.astype(np.uint64) + {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}[bits]) & 0xFFFFFFFF
    qzeros = qzeros.astype(np.uint32)
zeros = stream(qzeros.T, N).T  # [G, N]
if v1 and bits == 3:  # GPTQModel: each 3-bit field + 1, mod 8
    zeros = (zeros + 1) & 7
W = scales[g_idx, :] * (codes - zeros[g_idx, :])  # [K, N]
x = np.load("x.npy").astype(np.float64)
if fp16:
    x = x.astype(np.float16).astype(np.float64)
ref = x @ W
if with_bias:
    ref = ref + tensor("fc.bias").astype(np.float64)
y = np.load(out).astype(np.float64)
assert y.shape == ref.shape, (y.shape, ref.shape)
err = np.abs(y - ref).max()
scale = np.abs(ref).max()
assert scale > 0
print(f"{out}: max |err| {err:.3g}, max |ref| {scale:.3g}")
sys.exit(0 if err <= tol * scale else 1)
PY
"$python" compare.py ckpt.safetensors y_cpu.npy 1e-5 || fail "CPU linear differs from the numpy reference"
"$python" compare.py ckpt.safetensors y_nobias.npy 1e-5 no-bias || fail "CPU linear --no-bias differs from the reference"
"$python" compare.py v1_2bit/ckpt.safetensors y_2bit.npy 1e-5 || fail "2-bit v1 linear differs from the clients' decoding"
"$python" compare.py v2_3bit/ckpt.safetensors y_3bit.npy 1e-5 || fail "3-bit v2 linear differs from the reference"
# The intended Ŵ of the 2-bit layer (the float weights it approximates) is close: a misread zero point would
# move whole groups by one step.
"$python" - <<'PY' || fail "2-bit v1 output error is not what GPTQ's own report says"
import numpy as np, json, struct
y = np.load("y_2bit.npy").astype(np.float64)
raw = open("w.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
def tensor(name):
    a, b = header[name]["data_offsets"]
    return np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(header[name]["shape"])
x = np.load("x.npy").astype(np.float64)
ref = x @ tensor("fc.weight").astype(np.float64).T + tensor("fc.bias").astype(np.float64)
rel = np.sum((y - ref) ** 2) / np.sum((ref - tensor("fc.bias")) ** 2)
print(f"2-bit v1: relative output error {rel:.3f} on fresh inputs")
assert rel < 0.5, rel
PY

# A v1 file of qgru's earlier writer ((zero − 1) & maxq in each field; meta.quantizer the plain string "qgru"):
# read as that writer meant it (the same Ŵ as the current file of the same layer), with a line on stderr
# saying the clients read it differently.
mkdir -p old_v1
"$python" - <<'PY'
import json, struct
import numpy as np
raw = open("v1_2bit/ckpt.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
a, b = header["fc.qzeros"]["data_offsets"]
words = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.uint32).copy()
v2 = (words.astype(np.uint64) + 0x55555555) & 0xFFFFFFFF  # the clients' reading: the zero points
fields = np.stack([(v2 >> np.uint64(2 * i)) & np.uint64(3) for i in range(16)], axis=-1)
old = ((fields.astype(np.int64) - 1) & 3).astype(np.uint64)  # the earlier writer, field by field
packed = np.zeros_like(v2)
for i in range(16):
    packed |= old[..., i] << np.uint64(2 * i)
assert np.any(fields == 0), "the 2-bit layer should hold zero points of 0"
body = bytearray(raw)
body[8 + n + a:8 + n + b] = packed.astype(np.uint32).tobytes()
open("old_v1/ckpt.safetensors", "wb").write(bytes(body))
config = json.load(open("v1_2bit/quantize_config.json"))
config["meta"] = {"quantizer": "qgru"}
json.dump(config, open("old_v1/quantize_config.json", "w"))
PY
"$qgru" linear --checkpoint old_v1/ckpt.safetensors --layer fc --input x.npy --output y_old.npy >/dev/null 2>old.stderr \
  || fail "qgru linear on an earlier qgru v1 file failed: $(cat old.stderr)"
"$python" -c "import numpy as np, sys; sys.exit(0 if np.array_equal(np.load('y_old.npy'), np.load('y_2bit.npy')) else 1)" \
  || fail "an earlier qgru v1 file does not read as the same layer"
grep -q "read with qgru's earlier per-field v1 arithmetic.*GPTQModel and transformers read differently" old.stderr ||
  fail "no log line about the interpretation used: $(cat old.stderr)"

set +e
"$qgru" linear --checkpoint ckpt.safetensors --layer fc --input x.npy --output y_cuda.npy --device cuda >out.txt 2>err.txt
rc=$?
set -e
if [ $rc -eq 0 ]; then
  "$python" compare.py ckpt.safetensors y_cuda.npy 2e-3 fp16 || fail "CUDA linear differs from the numpy reference"
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
