#!/usr/bin/env bash
# Times the GPU quantized linear (W4A16 and W8A16, group 128) against cuBLAS fp16 GEMM of the dequantized
# weight for K=4096, N in {4096, 11008}, M in {1, 16, 64, 256}: CUDA events, 10 warm-up runs, median of
# --iters runs, a markdown table with the ratio. Needs a CUDA build (test target bench_cuda_linear).
# Without a GPU it says "no usable GPU: <reason>" and exits 1.
# Usage: scripts/bench_cuda_linear.sh [build-dir] [iters]    (build-dir defaults to ./build)
set -euo pipefail
source "$(dirname "$0")/bench_cuda.bash"
iters="${2:-50}"
find_cuda_bench "${1:-build}" bench_cuda_linear
status=0
for bits in 4 8; do
  "$bench" --bits "$bits" --iters "$iters" || status=$?
  [[ $status -eq 0 ]] || exit "$status"
  echo
done
