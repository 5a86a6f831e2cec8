#!/usr/bin/env bash
# GPTQ benchmark and reference comparison (run by hand; needs /usr/bin/python3 with numpy and torch).
#   scripts/bench_gptq.sh <qgru-binary> <work-dir> [N K M kind]     defaults: 4096 4096 2048 corr
# Makes W [N, K] and activations [M, K] (kind iso|corr) with scripts/gptq_reference.py, runs `qgru gptq -v`
# (group 128, 4 bits, v1) and the PyTorch reference (float32, 2 threads) on the same data, one after the
# other, and prints both JSON/TSV results: errors, ratio to RTN, our error over the reference's, code
# agreement, times. Record the machine's load (uptime) with the figures: the times are wall clock.
set -euo pipefail
QGRU=$1
WORK=$2
N=${3:-4096}
K=${4:-4096}
M=${5:-2048}
KIND=${6:-corr}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
mkdir -p "$WORK"
cd "$WORK"
[ -f weights.safetensors ] && [ -f x.npy ] || "$PY" "$HERE/gptq_reference.py" make-data --out . --n "$N" --k "$K" --m "$M" --kind "$KIND"
echo "== machine: $(nproc) cores; load: $(uptime | sed 's/.*load average: //')"
echo "== qgru gptq"
/usr/bin/time -f "qgru wall %e s, max RSS %M KB" "$QGRU" -v gptq --weights weights.safetensors --tensor layer.weight \
  --activations x.npy --group-size 128 -o qgru.safetensors
echo "== reference (torch float32, 2 threads)"
"$PY" "$HERE/gptq_reference.py" run --weights weights.safetensors --tensor layer.weight --activations x.npy \
  --group-size 128 --threads 2 --ours qgru.safetensors --ours-format gptq
echo "== load after: $(uptime | sed 's/.*load average: //')"
