#!/usr/bin/env bash
# Times the GPU quantized linear (W4A16 and W8A16, group 128) against cuBLAS fp16 GEMM of the dequantized
# weight for K=4096, N in {4096, 11008}, M in {1, 16, 64, 256}: CUDA events, 10 warm-up runs, median of
# --iters runs, a markdown table with the ratio. Needs a CUDA build (test target bench_cuda_linear).
# Without a GPU it says "no GPU present: <reason>" and exits 1.
# Usage: scripts/bench_cuda_linear.sh [build-dir] [iters]    (build-dir defaults to ./build)
set -euo pipefail
build="${1:-build}"
iters="${2:-50}"
bench="$build/test/bench_cuda_linear"
if [[ ! -x "$bench" ]]; then
  echo "bench_cuda_linear.sh: $bench not found; build it with: cmake --build $build --target bench_cuda_linear" >&2
  exit 1
fi
status=0
for bits in 4 8; do
  "$bench" --bits "$bits" --iters "$iters" || status=$?
  [[ $status -eq 0 ]] || exit "$status"
  echo
done
