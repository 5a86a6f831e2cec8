#!/usr/bin/env bash
# Client compatibility without the clients: every combination of bits (2, 3, 4, 8), sym/asym, format
# (gptq, gptq_v2), column order (natural, act-order, group-aware) and static groups, plus one group per row,
# written by `qgru gptq` for two layers, then checked by gptq_client_rules.py against the rules GPTQModel
# and transformers apply when loading (config keys, tensor layouts and g_idx of both layers) and decoded by
# their formula: fc1's Ŵ must equal qgru's (`qgru linear` on the identity) bit for bit, and every
# asymmetric v1 checkpoint must hold zero points of 0 (the borrow case). scripts/gptq_clients_check.sh does
# the same with the real clients installed. Usage: gptq_clients.sh <qgru> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
cd "$scratch"
find_python
# Two layers: fc1 F32 [64, 128] whose first 8 rows are >= 0 (asymmetric zero points of 0: the v1 borrow
# case), with a bias; fc2 F16 [32, 64]. Correlated activations, seeded.
"$python" - <<'PY'
import json, struct
import numpy as np
rng = np.random.default_rng(5)
fc1 = rng.standard_normal((64, 128)).astype(np.float32)
fc1[:8] = np.abs(fc1[:8])
tensors = {"fc1.weight": fc1, "fc1.bias": rng.standard_normal(64).astype(np.float32),
           "fc2.weight": rng.standard_normal((32, 64)).astype(np.float16)}
header, blobs, offset = {}, [], 0
for name, array in tensors.items():
    header[name] = {"dtype": "F16" if array.dtype == np.float16 else "F32", "shape": list(array.shape),
                    "data_offsets": [offset, offset + array.nbytes]}
    blobs.append(array.tobytes())
    offset += array.nbytes
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open("w.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
for name, k in (("x1", 128), ("x2", 64)):
    latent = rng.standard_normal((256, 8))
    x = latent @ rng.standard_normal((8, k)) + 0.05 * rng.standard_normal((256, k))
    np.save(f"{name}.npy", (x * np.exp(rng.standard_normal(k))).astype(np.float32))
json.dump([{"tensor": "fc1.weight", "activations": ["x1.npy"]}, {"tensor": "fc2.weight", "activations": ["x2.npy"]}],
          open("manifest.json", "w"))
np.save("eye_128.npy", np.eye(128, dtype=np.float32))
PY

folders=()
make_checkpoint() {  # NAME ARGS...: quantize fc1 (F32) and fc2 (F16) into NAME/ and dump qgru's Ŵᵀ of fc1
  local name=$1
  shift
  mkdir "$name"
  "$qgru" -q gptq --weights w.safetensors --manifest manifest.json "$@" \
    -o "$name/model.safetensors" >/dev/null 2>"$name.stderr" || fail "$name: qgru gptq failed: $(cat "$name.stderr")"
  "$qgru" -q linear --checkpoint "$name/model.safetensors" --layer fc1 --input eye_128.npy --output "$name/w_fc1.npy" \
    --no-bias >/dev/null || fail "$name: qgru linear fc1 failed"
  folders+=("$name")
}

# The Release stage writes every combination (docs/GPTQ.md's table says all 96 hold). The sanitizer stage (its
# processes several times slower; QGRU_SANITIZED) looks for memory errors on the same code paths with a covering
# subset: every bits x sym x format at natural order and dynamic groups (each packing width, 3 bits across
# words, each zero-point encoding, the v1 borrow at every width), then every order x static groups x sym (each
# g_idx and scale order, static groups before a reordering, symmetric and asymmetric zero points under each
# order), their bits cycling 2, 3, 4, 8 and their format alternating so that each order meets v1 and v2 and the
# asymmetric v1 borrow. 26 combinations instead of 96; every branch of the writer and the rules is reached.
every_combination=1
if [ -n "${QGRU_SANITIZED:-}" ] || grep -q -a -m1 __asan_init "$qgru"; then every_combination=0; fi
checkpoint_for() {  # BITS SYM FORMAT ORDER STATIC
  local args=(--bits "$1" --format "$3" --order "$4" --group-size 32)
  [ "$2" = sym ] && args+=(--sym)
  [ "$5" = static ] && args+=(--static-groups)
  make_checkpoint "b${1}_${2}_${3}_${4}_${5}" "${args[@]}"
}
row=0
for bits in 2 3 4 8; do
  for sym in asym sym; do
    for format in gptq gptq_v2; do
      for order in natural act-order group-aware; do
        for static in dynamic static; do
          if [ "$every_combination" = 1 ] || { [ "$order" = natural ] && [ "$static" = dynamic ]; }; then
            checkpoint_for "$bits" "$sym" "$format" "$order" "$static"
          fi
        done
      done
    done
  done
done
if [ "$every_combination" = 0 ]; then
  formats=(gptq gptq_v2)
  bit_widths=(2 3 4 8)
  for order in natural act-order group-aware; do
    for static in dynamic static; do
      for sym in asym sym; do
        [ "$order" = natural ] && [ "$static" = dynamic ] && { row=$((row + 1)); continue; }  # written above
        checkpoint_for "${bit_widths[row % 4]}" "$sym" "${formats[(row + row / 2) % 2]}" "$order" "$static"
        row=$((row + 1))
      done
    done
  done
fi
make_checkpoint per_row_v1 --bits 4 --group-size -1
make_checkpoint per_row_v2_2bit --bits 2 --group-size -1 --format gptq_v2

"$python" "$root/test/cli/gptq_client_rules.py" "${folders[@]}" >table.md || { cat table.md >&2; fail "see above"; }
tail -1 table.md
