#!/usr/bin/env bash
# The quantized-linear benchmark at HBM figures, in one command on a GPU machine: test/cuda/bench_linear.cpp
# (qgru's engines and cuBLAS fp16 alternating in one process, W4A16 and W8A16) and, where torch imports,
# scripts/bench_linear_torch.py (tinygemm, W4A16), each with a device-to-device copy measured in the same run;
# K x N in {4096x4096, 4096x11008, 11008x4096, 8192x8192}, M in {1, 4, 16, 64, 256}, weights rotated over more
# than twice the L2. Markdown tables on stdout; the JSON rows of both in one file.
# Without a GPU it says "no usable GPU: <reason>" and exits 1.
# Usage: scripts/bench_cuda_linear.sh [build-dir] [iters] [--json FILE] [-- extra bench_cuda_linear flags]
#   build-dir defaults to ./build, iters (calls per sample) to 20, FILE to build-dir/bench_linear.json.
set -euo pipefail
source "$(dirname "$0")/bench_cuda.bash"
build="build"
iters=20
json=""
if [[ $# -gt 0 && "$1" != --* ]]; then build="$1"; shift; fi
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then iters="$1"; shift; fi
if [[ $# -gt 1 && "$1" == "--json" ]]; then json="$2"; shift 2; fi
if [[ $# -gt 0 && "$1" == "--" ]]; then shift; fi
json="${json:-$build/bench_linear.json}"
find_cuda_bench "$build" bench_cuda_linear
commit="${QGRU_COMMIT:-$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bench" --bits 4,8 --iters "$iters" --commit "$commit" --json "$work/qgru.json" "$@"
echo
if python3 -c "import torch" 2>/dev/null; then
  python3 "$(dirname "$0")/bench_linear_torch.py" --iters "$iters" --commit "$commit" --json "$work/torch.json"
else
  echo "tinygemm: NOT RUN (python3 cannot import torch here)"
fi
python3 - "$json" "$work"/*.json <<'PY'
import json, sys
rows = []
for path in sys.argv[2:]:
    with open(path) as f:
        rows += json.load(f)
with open(sys.argv[1], "w") as f:
    json.dump(rows, f, indent=1)
print(f"\n{len(rows)} JSON rows in {sys.argv[1]}")
PY
