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
# qgru's rows go straight to the output file, rewritten whole after every shape (bench_cuda_linear's atomic
# writer): a run cut by a time limit keeps what it measured. tinygemm's rows are added to them at the end.
status=0
rm -f "$json"  # a file from an earlier run must not pass for this one's
"$bench" --bits 4,8 --iters "$iters" --commit "$commit" --json "$json" "$@" || status=$?
echo
if python3 -c "import torch" 2>/dev/null; then
  python3 "$(dirname "$0")/bench_linear_torch.py" --iters "$iters" --commit "$commit" --json "$work/torch.json" || status=$?
else
  echo "tinygemm: NOT RUN (python3 cannot import torch here)"
fi
# tinygemm's rows appended to qgru's, the file replaced whole (a temporary file and a rename); nothing measured,
# nothing written.
[[ -e "$json" || -e "$work/torch.json" ]] || exit $status
python3 - "$json" "$work" <<'PY'
import json, os, sys
target, work = sys.argv[1], sys.argv[2]
rows = []
for path in (target, os.path.join(work, "torch.json")):
    if os.path.exists(path):
        with open(path) as f:
            rows += json.load(f)
temporary = target + ".partial"
with open(temporary, "w") as f:
    json.dump(rows, f, indent=1)
os.replace(temporary, target)
print(f"\n{len(rows)} JSON rows in {target}")
PY
exit $status
