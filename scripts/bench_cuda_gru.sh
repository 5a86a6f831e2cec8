#!/usr/bin/env bash
# Times the CUDA GRU executors (quantized: int8, int16-activations, int16; float) for (C = H, T, N) in
# (64,100,1), (256,100,1), (256,100,64), (512,50,32), (1024,50,1), one layer, one direction: CUDA events
# around each call, warm-up, median of N runs, a markdown table for docs/benchmarks/cuda.md.
# Needs a CUDA build (test target bench_cuda_gru). Without a GPU it prints "no usable GPU: <reason>" and
# exits 77 (no table).
# Usage: scripts/bench_cuda_gru.sh [build-dir] [runs]    (build-dir defaults to ./build, runs to 20)
set -euo pipefail
source "$(dirname "$0")/bench_cuda.bash"
runs="${2:-20}"
find_cuda_bench "${1:-build}" bench_cuda_gru
exec "$bench" --runs "$runs" --warmup 3
