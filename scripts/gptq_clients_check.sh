#!/usr/bin/env bash
# qgru's GPTQ checkpoints loaded by the real clients (GPTQModel.load and transformers, CPU): every combination
# of bits, sym, format, column order and static groups (--quick: the default order only), compared layer by
# layer with qgru (scripts/gptq_clients_check.py says how). Not run by CI; results go to docs/GPTQ.md with
# the versions and the date. Usage: scripts/gptq_clients_check.sh [--quick] [--bits 2,3,4,8] [--sym asym,sym]
#   [--formats gptq,gptq_v2] [--orders natural,act-order,group-aware] [--static dynamic,static]
set -euo pipefail
source "$(dirname "$0")/gptq_clients_venv.bash"
work="$clients_build/gptq-clients-check"
rm -rf "$work"
# The clients log to stdout too: the table's lines go to $work.md and the terminal, the rest to $work.log.
: >"$work.log"
"$venv_python" "$clients_root/scripts/gptq_clients_check.py" --qgru "$qgru_binary" --work "$work" "$@" 2>>"$work.log" |
  tee -a "$work.log" | grep --line-buffered -E '^(\||clients:|[0-9]+ failure)' | tee "$work.md"
echo "table: $work.md; client logs: $work.log" >&2
