#!/usr/bin/env bash
# The measurement behind qgru gptq's default column order and damping (docs/GPTQ.md, "Defaults"): trains a
# small character-level Llama, then compares order x damp on its 28 layers (scripts/gptq_defaults_study.py).
# Not run by CI; takes about 40 minutes on 2 cores. Usage: scripts/gptq_defaults_study.sh [--steps N] [--bits 4,3,2]
set -euo pipefail
source "$(dirname "$0")/gptq_clients_venv.bash"
work="$clients_build/gptq-defaults-study"
mkdir -p "$work"
: >"$work.log"
"$venv_python" "$clients_root/scripts/gptq_defaults_study.py" --qgru "$qgru_binary" --work "$work" "$@" 2>>"$work.log" |
  tee -a "$work.log" | grep --line-buffered -E '^(\||step|float model)' | tee "$work.md"
