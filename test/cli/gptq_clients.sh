#!/usr/bin/env bash
# Client compatibility without the clients: every combination of bits (2, 3, 4, 8), sym/asym, format
# (gptq, gptq_v2), column order (natural, act-order, group-aware) and static groups, plus one group per row,
# written by `qgru gptq` for two layers, then checked by gptq_client_rules.py against the rules GPTQModel
# and transformers apply when loading (config keys, tensor layouts and g_idx of both layers) and decoded by
# their formula: fc1's Ŵ must equal qgru's (`qgru linear` on the identity) bit for bit. scripts/gptq_clients_check.sh does the same
# with the real clients installed. Usage: gptq_clients.sh <qgru> <scratch-dir> <source-root>
set -euo pipefail
source "$(dirname "$0")/common.bash"
start_cli_test "$@"
cd "$scratch"
find_python
data="$root/test/data/gptq"
"$python" -c "import numpy as np; np.save('eye_128.npy', np.eye(128, dtype=np.float32))"

folders=()
make_checkpoint() {  # NAME ARGS...: quantize fc1 (F32) and fc2 (F16) into NAME/ and dump qgru's Ŵᵀ of fc1
  local name=$1
  shift
  mkdir "$name"
  "$qgru" -q gptq --weights "$data/model.safetensors" --manifest "$data/manifest.json" "$@" \
    -o "$name/model.safetensors" >/dev/null 2>"$name.stderr" || fail "$name: qgru gptq failed: $(cat "$name.stderr")"
  "$qgru" -q linear --checkpoint "$name/model.safetensors" --layer fc1 --input eye_128.npy --output "$name/w_fc1.npy" \
    --no-bias >/dev/null || fail "$name: qgru linear fc1 failed"
  folders+=("$name")
}

for bits in 2 3 4 8; do
  for sym in asym sym; do
    for format in gptq gptq_v2; do
      for order in natural act-order group-aware; do
        for static in dynamic static; do
          args=(--bits "$bits" --format "$format" --order "$order" --group-size 32)
          [ "$sym" = sym ] && args+=(--sym)
          [ "$static" = static ] && args+=(--static-groups)
          make_checkpoint "b${bits}_${sym}_${format}_${order}_${static}" "${args[@]}"
        done
      done
    done
  done
done
make_checkpoint per_row_v1 --bits 4 --group-size -1
make_checkpoint per_row_v2_2bit --bits 2 --group-size -1 --format gptq_v2

"$python" "$root/test/cli/gptq_client_rules.py" "${folders[@]}" >table.md || { cat table.md >&2; fail "see above"; }
tail -1 table.md
