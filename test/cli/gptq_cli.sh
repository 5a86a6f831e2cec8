#!/usr/bin/env bash
# End-to-end `qgru gptq`: single tensor and manifest runs, equivalent inputs giving identical checkpoints
# (two activation files vs a saved Hessian; [M, K] vs [K, M]), checkpoints sharing a folder only when their
# quantize_config.json agrees, the v1 zero-point warning, the column order options, and malformed inputs
# refused with one line, exit 1 and nothing written. Usage: gptq_cli.sh <qgru> <scratch-dir> <source-root>
set -u
QGRU=$1
SCRATCH=$2
DATA=$3/test/data/gptq
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
cd "$SCRATCH" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_error NAME PATTERN ARGS...: exit 1, exactly one stderr line that starts "qgru: error:" and contains
# PATTERN, and no file left in the output folder.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  rm -rf "err_$name" && mkdir "err_$name"
  "$QGRU" -q gptq "$@" -o "err_$name/out.safetensors" >"err_$name.stdout" 2>"err_$name.stderr"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1"
  [ "$(wc -l <"err_$name.stderr")" -eq 1 ] || fail "$name: stderr is not one line: $(cat "err_$name.stderr")"
  grep -q "^qgru: error: .*$pattern" "err_$name.stderr" || fail "$name: stderr lacks '$pattern': $(cat "err_$name.stderr")"
  [ -z "$(ls -A "err_$name")" ] || fail "$name: files written: $(ls -A "err_$name")"
  [ ! -s "err_$name.stdout" ] || fail "$name: stdout not empty"
}

# 1. One tensor, two activation files; the stdout table says GPTQ beats round-to-nearest.
mkdir a b c d
"$QGRU" gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --activations "$DATA/x1.npy" \
  --activations "$DATA/x2.npy" --group-size 32 --save-hessian a/h.npy -o a/out.safetensors >a.stdout 2>a.stderr ||
  fail "single tensor run: exit $?: $(cat a.stderr)"
[ -s a/out.safetensors ] || fail "no checkpoint written"
grep -q '"checkpoint_format": "gptq"' a/quantize_config.json || fail "quantize_config.json lacks the format"
grep -q '"group_size": 32' a/quantize_config.json || fail "quantize_config.json lacks group_size 32"
[ "$(head -1 a.stdout | cut -f1)" = "layer" ] || fail "stdout header missing: $(cat a.stdout)"
awk -F'\t' 'NR == 2 { ok = ($1 == "fc1.weight" && $4 == 256 && $5 > 0 && $5 < $6 && $7 < 0.5) } END { exit !ok }' a.stdout ||
  fail "stdout row wrong (expected 256 tokens and GPTQ error well below RTN): $(cat a.stdout)"
grep -q "fc1.weight" a.stderr || fail "no progress on stderr"
for t in fc1.qweight fc1.qzeros fc1.scales fc1.g_idx fc1.bias; do
  grep -aq "\"$t\"" a/out.safetensors || fail "checkpoint lacks $t"
done

# 2. The saved Hessian reproduces the checkpoint byte for byte.
"$QGRU" -q gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --hessian a/h.npy --group-size 32 \
  -o b/out.safetensors >/dev/null || fail "--hessian run failed"
cmp -s a/out.safetensors b/out.safetensors || fail "--hessian checkpoint differs from the activations one"

# 3. [K, M] activations with --activations-kmajor give the same checkpoint as [M, K].
"$QGRU" -q gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --activations "$DATA/x1.npy" --act-order \
  -o c/out.safetensors >/dev/null || fail "token-major run failed"
"$QGRU" -q gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --activations "$DATA/x1_kmajor.npy" \
  --activations-kmajor --act-order -o d/out.safetensors >/dev/null || fail "feature-major run failed"
cmp -s c/out.safetensors d/out.safetensors || fail "--activations-kmajor checkpoint differs"
grep -q '"desc_act": true' c/quantize_config.json || fail "desc_act not recorded"

# 4. A manifest of two layers (F32 and F16 weights), gptq_v2, 8 bits, one group per row.
mkdir m
"$QGRU" -q gptq --weights "$DATA/model.safetensors" --manifest "$DATA/manifest.json" --format gptq_v2 --bits 8 \
  --group-size -1 -o m/out.safetensors >m.stdout || fail "manifest run failed"
[ "$(wc -l <m.stdout)" -eq 3 ] || fail "manifest stdout should have a header and 2 rows: $(cat m.stdout)"
grep -q '"checkpoint_format": "gptq_v2"' m/quantize_config.json || fail "gptq_v2 not recorded"
grep -aq '"fc2.qweight"' m/out.safetensors || fail "fc2 missing from the manifest checkpoint"

# 4b. --keep-other-tensors carries the rest of the model (unquantized tensors unchanged, fc1.weight replaced).
mkdir w
"$QGRU" -q gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --activations "$DATA/x1.npy" --keep-other-tensors \
  -o w/whole.safetensors >/dev/null || fail "--keep-other-tensors run failed"
for t in fc1.qweight fc1.bias fc2.weight bad.int odd.weight; do
  grep -aq "\"$t\"" w/whole.safetensors || fail "--keep-other-tensors output lacks $t"
done
! grep -aq '"fc1.weight"' w/whole.safetensors || fail "--keep-other-tensors kept the float fc1.weight"
# ... and layer-by-layer runs chain into the same folder (same options, so its quantize_config.json agrees):
# quantizing fc2 of that output keeps fc1's quantized tensors.
"$QGRU" -q gptq --weights w/whole.safetensors --tensor fc2.weight --activations "$DATA/x_fc2.npy" --keep-other-tensors \
  -o w/whole2.safetensors >/dev/null || fail "chained --keep-other-tensors run failed"
for t in fc1.qweight fc2.qweight fc2.g_idx odd.weight; do
  grep -aq "\"$t\"" w/whole2.safetensors || fail "chained output lacks $t"
done

# 4c. A checkpoint whose quantize_config.json would disagree with the one already in its folder is refused:
# exit 1, one line naming both files, the first checkpoint's files unchanged, nothing else left behind.
before=$(cd m && sha256sum * | sort)
"$QGRU" gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --activations "$DATA/x1.npy" \
  -o m/second.safetensors >m2.stdout 2>m2.stderr
rc=$?
[ "$rc" -eq 1 ] || fail "disagreeing config in a shared folder: exit $rc, expected 1"
[ "$(wc -l <m2.stderr)" -eq 1 ] || fail "disagreeing config: stderr is not one line: $(cat m2.stderr)"
grep -q "^qgru: error: m/quantize_config.json describes the checkpoints already in that folder (bits 4 here, 8 there.*m/second.safetensors would change how they are read" m2.stderr ||
  fail "disagreeing config: message should name both files and the difference: $(cat m2.stderr)"
[ "$(cd m && sha256sum * | sort)" = "$before" ] || fail "disagreeing config: the folder's files changed or a file was left"
[ ! -s m2.stdout ] || fail "disagreeing config: stdout not empty"
# The same in the other direction (v1 into a folder of v2), and a damping change alone.
expect_refused() {
  local name=$1
  shift
  local snapshot
  snapshot=$(cd m && sha256sum * | sort)
  "$QGRU" -q gptq "$@" >/dev/null 2>"$name.stderr"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, expected 1"
  grep -q "^qgru: error: m/quantize_config.json describes" "$name.stderr" || fail "$name: $(cat "$name.stderr")"
  [ "$(cd m && sha256sum * | sort)" = "$snapshot" ] || fail "$name: the folder's files changed"
}
expect_refused damp_differs --weights "$DATA/model.safetensors" --manifest "$DATA/manifest.json" --format gptq_v2 \
  --bits 8 --group-size -1 --damp 0.1 -o m/third.safetensors
# An agreeing checkpoint may be written beside the first, which stays as it was.
first=$(sha256sum m/out.safetensors)
"$QGRU" -q gptq --weights "$DATA/model.safetensors" --tensor fc2.weight --activations "$DATA/x_fc2.npy" \
  --format gptq_v2 --bits 8 --group-size -1 -o m/beside.safetensors >/dev/null || fail "agreeing checkpoint refused"
[ "$(sha256sum m/out.safetensors)" = "$first" ] || fail "writing beside changed the first checkpoint"

# 5. Zero points of 0 (all weights >= 0): v1 carries them exactly for the clients (whole-word arithmetic) but
# not for readers that add 1 to each field, so the run says exactly that; v2 is silent.
mkdir z z2
"$QGRU" gptq --weights "$DATA/nonneg.safetensors" --tensor pos.weight --activations "$DATA/x_pos.npy" --group-size -1 \
  -o z/v1.safetensors >/dev/null 2>z.v1.stderr || fail "non-negative weights, v1: exit $?"
grep -q "8 zero point(s) are 0: GPTQModel, transformers and qgru read every zero point of this v1 file exactly, but readers that add 1 to each 4-bit field without carrying (vLLM's gptq kernel, exllama-style kernels) read those as 16;" z.v1.stderr ||
  fail "no exact warning about v1 zero points: $(cat z.v1.stderr)"
"$QGRU" gptq --weights "$DATA/nonneg.safetensors" --tensor pos.weight --activations "$DATA/x_pos.npy" --group-size -1 \
  --format gptq_v2 -o z2/v2.safetensors >/dev/null 2>z.v2.stderr || fail "non-negative weights, v2: exit $?"
! grep -q "zero point" z.v2.stderr || fail "gptq_v2 warned about zero points"

# 5b. Column order: group-aware is the default and is recorded; --act-order and --order act-order are one
# thing (identical checkpoints), and they exclude each other.
grep -q '"act_group_aware": true' a/quantize_config.json || fail "default order not recorded as act_group_aware"
grep -q '"desc_act": false' a/quantize_config.json || fail "default order must not set desc_act"
mkdir o1 o2
"$QGRU" -q gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --activations "$DATA/x1.npy" --order act-order \
  -o o1/out.safetensors >/dev/null || fail "--order act-order failed"
cmp -s o1/out.safetensors c/out.safetensors || fail "--order act-order differs from --act-order"
grep -q '"act_group_aware": false' o1/quantize_config.json || fail "act-order recorded act_group_aware"
"$QGRU" gptq --weights "$DATA/model.safetensors" --tensor fc1.weight --activations "$DATA/x1.npy" --order natural \
  --act-order -o o2/out.safetensors >/dev/null 2>&1
[ $? -eq 2 ] || fail "--order with --act-order should be a usage error"

# 6. Malformed inputs: one line, exit 1, nothing written.
W=(--weights "$DATA/model.safetensors")
expect_error wrong_k "x_wrongk.npy.*expected" "${W[@]}" --tensor fc1.weight --activations "$DATA/x_wrongk.npy"
expect_error wrong_dtype "'bad.int' has dtype I32, expected F32, F16 or BF16" "${W[@]}" --tensor bad.int \
  --activations "$DATA/x1.npy"
expect_error missing_tensor "'nope.weight' not found" "${W[@]}" --tensor nope.weight --activations "$DATA/x1.npy"
expect_error odd_k "'odd.weight' is \[16, 20\].*multiples of 8" "${W[@]}" --tensor odd.weight --activations "$DATA/x1.npy"
expect_error hessian_shape "h.npy: Hessian has shape \[128, 128\], expected \[64, 64\]" "${W[@]}" --tensor fc2.weight \
  --hessian a/h.npy
expect_error kmajor_mismatch "expected \[K, M\] with K = 128" "${W[@]}" --tensor fc1.weight --activations "$DATA/x1.npy" \
  --activations-kmajor
expect_error not_npy "x" "${W[@]}" --tensor fc1.weight --activations "$DATA/model.safetensors"
expect_error damp_zero "--damp 0 is outside (0, 1)" "${W[@]}" --tensor fc1.weight --activations "$DATA/x1.npy" \
  --damp 0
# --device cuda without a usable device (the driver's answer stood in for by QGRU_TEST_CUDA_DRIVER_VERSION=0, so this
# holds on a GPU machine too; a build without CUDA says so in the same line).
QGRU_TEST_CUDA_DRIVER_VERSION=0 expect_error no_cuda_device "--device cuda: no usable CUDA device: " "${W[@]}" \
  --tensor fc1.weight --activations "$DATA/x1.npy" --device cuda
mkdir err_config && echo '{"bits": 4' >err_config/quantize_config.json
"$QGRU" -q gptq "${W[@]}" --tensor fc1.weight --activations "$DATA/x1.npy" -o err_config/out.safetensors 2>err_config.stderr
[ $? -eq 1 ] || fail "an unreadable quantize_config.json in the output folder should be refused"
grep -q "^qgru: error: err_config/quantize_config.json: exists and is not a GPTQ config" err_config.stderr ||
  fail "unreadable config message: $(cat err_config.stderr)"
[ "$(ls err_config)" = "quantize_config.json" ] || fail "unreadable config: files written: $(ls err_config)"

# 7. Usage errors are exit 2.
"$QGRU" gptq "${W[@]}" --tensor fc1.weight --activations "$DATA/x1.npy" --bits 5 -o e.safetensors >/dev/null 2>&1
[ $? -eq 2 ] || fail "--bits 5 should be a usage error (exit 2)"
[ ! -e e.safetensors ] || fail "usage error wrote a file"

if [ "$failures" -ne 0 ]; then
  echo "gptq_cli: $failures failure(s)" >&2
  exit 1
fi
echo "gptq_cli: all checks passed"
