#!/usr/bin/env bash
# Everything a lent GPU machine should run, in one call, in order of what matters most when time runs out:
#   1. the card, the driver, the toolkit a binary was built with;
#   2. the GPU self-test (test_cuda_gpu --require-gpu: every CUDA path against the CPU reference, code for code);
#   3. qgru verify --device cuda and run cpu|cuda on the bundled example (every preset);
#   4. compute-sanitizer memcheck over the whole self-test and racecheck over qgru's own kernels;
#   5. the side-by-side benchmarks: the GRU executors against torch.nn.GRU on cuDNN (fp32, fp16), the quantized
#      linear against cuBLAS fp16 and tinygemm, each writing its JSON rows.
# Each step has a time limit and its exit status is logged; a failing step does not stop the later ones, and the
# script's own status is the first failure's. Results land in OUT_DIR (at most 8 files: session.log, the JSON
# rows and the benchmark tables), ready for docs/benchmarks/cuda.md, cuda-gru.json and cuda-linear.json.
# Binaries come from scripts/gpu_pack.sh (built here, carried there); nothing is compiled on the GPU machine.
# Usage (on the GPU machine, in the repository root):
#   bash scripts/gpu_session.sh PACK_DIR OUT_DIR [check|bench|quick]
#   check (default): steps 1-4 (about 5 minutes); bench: steps 1 and 5 (about 5 minutes); quick: steps 1-3
#   (about a minute, a rerun after a fix). A device call runs 10 minutes at most, so check and bench are two calls.
# With the device tool: carry [".gpu"], command "bash scripts/gpu_session.sh .gpu $OUT check", timeout_s 560;
# then the same with bench.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pack="$(cd "${1:?usage: gpu_session.sh PACK_DIR OUT_DIR [quick]}" && pwd)"
out="${2:?usage: gpu_session.sh PACK_DIR OUT_DIR [quick]}"
mode="${3:-check}"
case "$mode" in check | bench | quick) ;; *) echo "gpu_session: mode must be check, bench or quick" >&2; exit 2 ;; esac
mkdir -p "$out"
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$pack/bin"
log="$out/session.log"
: >"$log"
first_failure=0
started=$(date +%s)

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output appended to the log (and to stdout).
step() {
  local name="$1" limit="$2"
  shift 2
  local t0=$(date +%s)
  echo "=== $name (limit ${limit} s) $(date -u +%H:%M:%S)" | tee -a "$log"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
  local status=${PIPESTATUS[0]}
  echo "=== $name: exit $status after $(($(date +%s) - t0)) s" | tee -a "$log"
  if [ "$status" != 0 ] && [ "$first_failure" = 0 ]; then first_failure=$status; fi
  return 0
}

step "machine" 30 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; \
  cat '$pack/MANIFEST' | head -2; '$bin/qgru' --version; python3 -c 'import torch; print(\"torch\", torch.__version__, \"cudnn\", torch.backends.cudnn.version())'"
if [ "$mode" != bench ]; then
step "self-test" 200 "$bin/test_cuda_gpu" --require-gpu

example="$root/examples/digits"
scratch="$(mktemp -d)"
verify_all() {
  set -o pipefail
  local q="$bin/qgru" status=0
  "$q" -q calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o "$scratch/stats.json" || return 1
  for preset in int8 int16-activations int16; do
    "$q" -q quantize --model "$example/gru.safetensors" --stats "$scratch/stats.json" --config "$preset" \
      -o "$scratch/$preset.qgru.json" >/dev/null || return 1
    "$q" verify --model "$example/gru.safetensors" --artifact "$scratch/$preset.qgru.json" --input "$example/test.npy" \
      --device cuda | tail -n 4 || status=1
    for device in cpu cuda; do
      "$q" -q run --model "$scratch/$preset.qgru.json" --input "$example/test.npy" --device "$device" \
        --output "$scratch/$preset.$device.npy" --codes "$scratch/$preset.$device.codes.npy" || status=1
    done
    if cmp -s "$scratch/$preset.cpu.codes.npy" "$scratch/$preset.cuda.codes.npy" && cmp -s "$scratch/$preset.cpu.npy" "$scratch/$preset.cuda.npy"; then
      echo "run --device cpu|cuda, $preset: byte-identical codes and outputs"
    else
      echo "run --device cpu|cuda, $preset: FILES DIFFER"
      status=1
    fi
  done
  return $status
}
export -f verify_all
export bin example scratch
step "verify and run cpu|cuda (bundled example)" 90 bash -c verify_all
fi

if [ "$mode" = check ]; then
  if command -v compute-sanitizer >/dev/null; then
    step "memcheck (whole self-test)" 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/test_cuda_gpu" --require-gpu
    step "racecheck (qgru kernels)" 90 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 \
      --kernel-name regex:'(persistent|gru_step|wide_gemm|quant_linear|w4a16|w8a16|linear)' "$bin/test_cuda_gpu" --require-gpu
  else
    echo "=== compute-sanitizer not found on this machine: memcheck and racecheck not run" | tee -a "$log"
    [ "$first_failure" != 0 ] || first_failure=1
  fi
fi
if [ "$mode" = bench ]; then
  if [ -f "$root/scripts/bench_cuda_gru_peers.py" ]; then
    step "GRU side by side (qgru, cuDNN fp32/fp16)" 270 python3 "$root/scripts/bench_cuda_gru_peers.py" \
      --bench "$bin/bench_cuda_gru" --json "$out/cuda-gru.json" --markdown "$out/cuda-gru.md"
  else
    step "GRU executors (qgru only: scripts/bench_cuda_gru_peers.py is missing)" 270 "$bin/bench_cuda_gru" --runs 20 --warmup 3
  fi
  if [ -f "$root/scripts/bench_cuda_linear_peers.py" ]; then
    step "linear side by side (qgru, cuBLAS fp16, tinygemm)" 270 python3 "$root/scripts/bench_cuda_linear_peers.py" \
      --bench "$bin/bench_cuda_linear" --json "$out/cuda-linear.json" --markdown "$out/cuda-linear.md"
  else
    step "quantized linear (qgru vs cuBLAS fp16: scripts/bench_cuda_linear_peers.py is missing)" 270 \
      bash -c "'$bin/bench_cuda_linear' --bits 4 --iters 50 && '$bin/bench_cuda_linear' --bits 8 --iters 50"
  fi
fi
rm -rf "$scratch"
echo "=== gpu_session: $mode, $(($(date +%s) - started)) s, first failing status ${first_failure}" | tee -a "$log"
exit "$first_failure"
