#!/usr/bin/env bash
# Everything a lent GPU machine should run, in two calls of at most 10 minutes each, in order of what matters most
# when time runs out. Binaries come from scripts/gpu_pack.sh (built where the project builds, carried there);
# nothing is compiled on the GPU machine.
#   check: the card, the driver and the toolkit; the GPU self-test (test_cuda_gpu --require-gpu: every CUDA path
#          against the CPU reference, code for code; the linear's engines within their bound; the whole call on the
#          device and streaming on the GPU); qgru verify --device cuda and run cpu|cuda byte for byte on the bundled
#          example (every preset; again with the persistent recurrence and with QGRU_CUDA_GRU_FLOW=device); the whole self-test
#          again with the persistent GRU recurrence forced (QGRU_CUDA_GRU_PATH=persistent), and once more with its
#          cluster barrier asked for and once with the exchange in shared memory (QGRU_CUDA_GRU_SYNC=cluster,
#          cluster-dsmem; the self-test's own persistent list checks all three every time); compute-sanitizer
#          memcheck and racecheck over the persistent kernel's short list (--filter persistent-small),
#          racecheck and memcheck over the linear's kernels (--filter linear; the stripes kernel's cp.async reads
#          and half2 stores) and memcheck over the device flow's short list (--filter device-flow-small).
#   bench: the GRU executors against torch.nn.GRU on cuDNN fp32 / fp16 (scripts/bench_cuda_gru_peers.py) and the
#          quantized linear against cuBLAS fp16 and tinygemm (scripts/bench_cuda_linear.sh), the wgmma engine beside
#          cuBLAS fp16 in a process of its own (cuda-linear-wgmma.json), each writing its
#          markdown table and JSON rows (docs/benchmarks/cuda-gru.json, cuda-linear.json take them); the streaming
#          step's latency per frame on the GPU beside the CPU's (bench_cuda_gru --streaming) and the whole call on
#          the host chaining and on the device (--flow host|device), both in cuda-stream.md (JSON rows inside);
#          last, the sweeps of the defaults that are guesses (sweeps.md): the persistent kernel's units per block and
#          barrier (grid or cluster), the stripes partition's blocks per SM, the wgmma row block.
#   first: one call that gives the most when only one fits (15 minutes of device time, the machine's start
#          included, hold one full call and part of another): the card, the self-test, verify and run cpu|cuda,
#          the self-test with the persistent recurrence forced, the persistent kernel's meetings (bench_cuda_barrier:
#          grid counter and cluster barrier, ns per phase), the GRU side by side (2 rounds), the linear side
#          by side, memcheck and racecheck over the persistent kernel's short list, the wgmma linear and GPTQ's
#          benchmark; the session budget cuts what does not fit. Then check, bench and gptq as
#          time allows.
#   quick: the card, the self-test and verify (about a minute): a rerun after a fix.
#   gptq:  GPTQ on the GPU alone: its check against the CPU path (test_cuda_gpu --filter gptq; qgru gptq --device
#          cuda against --device cpu on test/data/gptq, every order), the Python package's qgru.Hessian, qgru.gptq
#          and qgru.QuantLinear on cuda against cpu (the pack's extension, scripts/check_quant_linear_cuda.py), its
#          qgru.Hessian on cuda fed CUDA tensors in place (scripts/check_hessian_cuda.py) and GPTQ's benchmark
#          (bench_cuda_gptq: 4096 × 4096 and 4096 × 11008 from 262,144 rows, docs/benchmarks/gptq-cuda.json takes
#          the JSON). Its own mode: check's and bench's limits already fill a call of 590 s each.
# Afterwards, on the development machine: scripts/collect_gpu_results.py FILES_AT checks the JSON rows a call brought
# back and merges them into docs/benchmarks (cuda-gru.json, cuda-linear.json, gptq-cuda.json; cuda-meetings.json from
# the meetings' "JSON {...}" lines in session.log; cuda-stream.json from the streaming rows' lines in cuda-stream.md).
# Each step has a time limit and its exit status is logged; a failing step does not stop the later ones; the
# script's status is the first failure's. Results land in OUT_DIR (at most 8 files come back from the device
# tool: session.log and the benchmarks' tables and JSON).
# Usage (on the GPU machine, in the repository root):  bash scripts/gpu_session.sh PACK OUT_DIR [check|bench|quick|gptq]
# PACK: the folder gpu_pack.sh wrote (.gpu, holding pack.tar.xz), the archive itself, or an unpacked folder.
# With the device tool: carry [".gpu"], command "bash scripts/gpu_session.sh .gpu $OUT first", timeout_s 590; then
# check, bench and gptq as the device time left allows (QGRU_GPU_SESSION_BUDGET, default 575 s, bounds each call).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
usage="usage: gpu_session.sh PACK OUT_DIR [first|check|bench|quick|gptq]"
pack_arg="${1:?$usage}"
if [ -f "$pack_arg" ]; then  # scripts/gpu_pack.sh's archive
  pack="$(mktemp -d)"
  trap 'rm -rf "$pack"' EXIT
  tar -C "$pack" -xJf "$pack_arg" || { echo "gpu_session: cannot unpack $pack_arg" >&2; exit 1; }
elif [ -f "$pack_arg/pack.tar.xz" ] && [ ! -d "$pack_arg/bin" ]; then
  pack="$(mktemp -d)"
  trap 'rm -rf "$pack"' EXIT
  tar -C "$pack" -xJf "$pack_arg/pack.tar.xz" || { echo "gpu_session: cannot unpack $pack_arg/pack.tar.xz" >&2; exit 1; }
else
  pack="$(cd "$pack_arg" && pwd)"
fi
out="${2:?$usage}"
mode="${3:-check}"
case "$mode" in first | check | bench | quick | gptq) ;; *) echo "gpu_session: $usage" >&2; exit 2 ;; esac
mkdir -p "$out"
# cuBLAS: the GPU image may carry it only inside PyTorch's CUDA wheels (nvidia/cu13/lib).
cublas_dir=$(python3 -c 'import nvidia, os; print(os.path.join(os.path.dirname(nvidia.__path__[0]), "nvidia", "cu13", "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$pack/lib${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export QGRU_COMMIT="$(sed -n 's/^commit //p' "$pack/MANIFEST" 2>/dev/null || echo unknown)"
bin="$pack/bin"
log="$out/session.log"
: >"$log"
first_failure=0
started=$(date +%s)

# The whole call's budget: a step never runs past it (its limit is cut to what is left, and a step that would get
# less than 15 s is logged NOT RUN and counts as a failure), so the script ends, with its log and files, before the
# device tool's own limit (timeout_s 590) cuts it off mid-step.
budget="${QGRU_GPU_SESSION_BUDGET:-575}"

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output appended to the log (and to stdout).
step() {
  local name="$1" limit="$2"
  shift 2
  local t0 left
  t0=$(date +%s)
  left=$((budget - (t0 - started)))
  if [ "$left" -lt 15 ]; then
    echo "=== $name: NOT RUN (${left} s of the session's ${budget} s left)" | tee -a "$log"
    if [ "$first_failure" = 0 ]; then first_failure=124; fi
    return 0
  fi
  if [ "$limit" -gt "$((left - 5))" ]; then limit=$((left - 5)); fi
  echo "=== $name (limit ${limit} s) $(date -u +%H:%M:%S)" | tee -a "$log"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
  local status=${PIPESTATUS[0]}
  # The closing line on a line of its own, also after output cut off mid-line (a step killed at its limit).
  if [ -s "$log" ] && [ -n "$(tail -c 1 "$log")" ]; then echo | tee -a "$log"; fi
  echo "=== $name: exit $status after $(($(date +%s) - t0)) s" | tee -a "$log"
  if [ "$status" != 0 ] && [ "$first_failure" = 0 ]; then first_failure=$status; fi
  return 0
}

step "machine" 20 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; \
  head -n 2 '$pack/MANIFEST'; '$bin/qgru' --version; \
  python3 -c 'import torch; print(\"torch\", torch.__version__, \"cudnn\", torch.backends.cudnn.version())'"

gptq_check() {
  step "GPTQ on the GPU against the CPU path (test_cuda_gpu --filter gptq)" 120 "$bin/test_cuda_gpu" --require-gpu \
    --filter gptq
  step "qgru gptq --device cuda against --device cpu (test/data/gptq)" 30 bash -c gptq_cli_devices
  step "qgru.Hessian, qgru.gptq and qgru.QuantLinear cuda against cpu (Python, the pack's extension)" 90 bash -c \
    "python_pack_check '$root/scripts/check_quant_linear_cuda.py'"
  step "qgru.Hessian cuda: CUDA tensors read in place (Python, PyTorch)" 60 bash -c \
    "python_pack_check '$root/scripts/check_hessian_cuda.py'"
}
# The pack's Python package (gpu_pack.sh: python/qgru), when it holds an extension for this python3, runs SCRIPT
# (its CUDA Hessian, GPTQ and QuantLinear against its CPU ones; its CUDA Hessian fed CUDA tensors). A missing or
# mismatched extension fails the step, saying so.
python_pack_check() {
  local tag held
  held=$(cd "$pack/python/qgru" 2>/dev/null && ls _qgru.*.so 2>/dev/null | tr '\n' ' ')
  [ -n "$held" ] || { echo "NOT RUN: the pack holds no Python extension (gpu_pack.sh found no current one)"; return 1; }
  tag=$(python3 -c 'import sys; print("cpython-%d%d" % sys.version_info[:2])')
  case " $held" in
    *" _qgru.$tag-"*) ;;
    *) echo "NOT RUN: the pack's extensions ($held) are not for this python3 ($tag): gpu_pack.sh QGRU_PACK_PYTHON"; return 1 ;;
  esac
  python3 -c 'import numpy' 2>/dev/null || { echo "NOT RUN: this python3 has no NumPy (the package needs it)"; return 1; }
  PYTHONPATH="$pack/python" python3 "$1"
}
export -f python_pack_check
export pack
# The CLI end to end on both devices (the Hessian from two activation files, every order): the stdout tables'
# gptq_rel_err (column 5) within a hundredth of each other, relative.
gptq_cli_devices() {
  local q="$bin/qgru" data="$root/test/data/gptq" s status=0
  s=$(mktemp -d)
  for order in group-aware act-order natural; do
    for device in cpu cuda; do
      mkdir -p "$s/$order-$device"
      "$q" -q gptq --weights "$data/model.safetensors" --tensor fc1.weight --activations "$data/x1.npy" \
        --activations "$data/x2.npy" --group-size 32 --order "$order" --device "$device" \
        -o "$s/$order-$device/out.safetensors" > "$s/$order-$device.tsv" || { echo "$order $device: failed"; status=1; }
    done
    paste "$s/$order-cpu.tsv" "$s/$order-cuda.tsv" | awk -F'\t' -v order="$order" 'NR == 2 {
      d = $5 - $13; if (d < 0) d = -d
      printf "%s: gptq_rel_err cpu %s cuda %s\n", order, $5, $13
      exit !(d <= 0.01 * $5) }' || { echo "$order: errors more than a hundredth apart"; status=1; }
  done
  rm -rf "$s"
  return $status
}
export -f gptq_cli_devices
export bin root
gptq_bench() {
  step "GPTQ on the GPU, Hessian to packed words (bench_cuda_gptq)" 240 bash -c \
    "'$bin/bench_cuda_gptq' --commit '$QGRU_COMMIT' --json '$out/gptq-cuda.json' > '$out/gptq-cuda.md'; \
     status=\$?; cat '$out/gptq-cuda.md'; exit \$status"
}
if [ "$mode" = gptq ]; then
  gptq_check
  gptq_bench
fi

if [ "$mode" != bench ] && [ "$mode" != gptq ]; then
  step "self-test" 120 "$bin/test_cuda_gpu" --require-gpu
  example="$root/examples/digits"
  scratch="$(mktemp -d)"
  verify_all() {
    set -o pipefail
    local q="$bin/qgru" status=0
    "$q" -q calibrate --model "$example/gru.safetensors" --data "$example/calib.npy" -o "$scratch/stats.json" >/dev/null || return 1
    for preset in int8 int16-activations int16; do
      "$q" -q quantize --model "$example/gru.safetensors" --stats "$scratch/stats.json" --config "$preset" \
        -o "$scratch/$preset.qgru.json" >/dev/null || return 1
      "$q" verify --model "$example/gru.safetensors" --artifact "$scratch/$preset.qgru.json" --input "$example/test.npy" \
        --device cuda | tail -n 4 || status=1
      for device in cpu cuda; do
        "$q" -q run --model "$scratch/$preset.qgru.json" --input "$example/test.npy" --device "$device" \
          --output "$scratch/$preset.$device.npy" --codes "$scratch/$preset.$device.codes.npy" || status=1
      done
      # floats only (no --codes): the executor's float entry point (with QGRU_CUDA_GRU_FLOW=device, x quantized on
      # the GPU and only the floats copied back)
      "$q" -q run --model "$scratch/$preset.qgru.json" --input "$example/test.npy" --device cuda \
        --output "$scratch/$preset.cuda-floats.npy" || status=1
      if cmp -s "$scratch/$preset.cpu.codes.npy" "$scratch/$preset.cuda.codes.npy" &&
         cmp -s "$scratch/$preset.cpu.npy" "$scratch/$preset.cuda.npy" &&
         cmp -s "$scratch/$preset.cpu.npy" "$scratch/$preset.cuda-floats.npy"; then
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
  step "verify and run cpu|cuda (bundled example)" 40 bash -c verify_all
  # The linear_before_reset = 0 cell (an ONNX GRU) with sequence lengths: verify's device check runs the CUDA float
  # GRU's second GEMM and its padded rows, and the integer codes with lengths, against the CPU.
  verify_lbr0_lengths() {
    set -o pipefail
    local q="$bin/qgru" d="$root/test/data/onnx/lbr0_bidir_lengths"
    "$q" -q calibrate --model "$d/model.onnx" --data "$d/x.npy" --lengths "$d/lengths.npy" -o "$scratch/lbr0.stats.json" \
      >/dev/null || return 1
    "$q" -q quantize --model "$d/model.onnx" --stats "$scratch/lbr0.stats.json" --config int8 \
      -o "$scratch/lbr0.qgru.json" >/dev/null || return 1
    "$q" verify --model "$d/model.onnx" --artifact "$scratch/lbr0.qgru.json" --input "$d/x.npy" \
      --lengths "$d/lengths.npy" --device cuda | tail -n 4
  }
  export -f verify_lbr0_lengths
  step "verify --device cuda, ONNX linear_before_reset = 0 with --lengths" 30 bash -c verify_lbr0_lengths
  if [ "$mode" != first ]; then
    step "verify and run cpu|cuda, persistent recurrence" 40 env QGRU_CUDA_GRU_PATH=persistent bash -c verify_all
    step "verify and run cpu|cuda, whole call on the device" 40 env QGRU_CUDA_GRU_FLOW=device bash -c verify_all
  fi
  rm -rf "$scratch"
fi

# cuBLAS is loaded at first use (cuda/include/qgru_cuda/cublas_library.h): with QGRU_CUBLAS_LIBRARY naming a file
# that does not exist, --device cuda is one line saying so (exit 1, nothing written) and --device auto runs on the
# CPU with that reason; without it, the run opens the image's libcublas (LD_DEBUG=files names the file).
cublas_at_first_use() {
  local q="$bin/qgru" s rc=0 status=0
  local model="$root/test/data/golden_fixed/random_l2_bidir/model_int8.qgru.json" missing=libqgru_no_such_cublas.so
  s=$(mktemp -d)
  python3 -c "import numpy as np; np.save('$s/x.npy', np.linspace(-1, 1, 30, dtype=np.float32).reshape(3, 2, 5))" || return 1
  QGRU_CUBLAS_LIBRARY=$missing "$q" run --model "$model" --input "$s/x.npy" --output "$s/y.npy" --device cuda \
    > "$s/cuda.out" 2> "$s/cuda.err" || rc=$?
  cat "$s/cuda.err"
  if [ "$rc" != 1 ] || [ "$(wc -l < "$s/cuda.err")" != 1 ] || [ -e "$s/y.npy" ] ||
     ! grep -q "^qgru: error: --device cuda: no usable CUDA device: cuBLAS ($missing) could not be loaded: " "$s/cuda.err"; then
    echo "--device cuda without cuBLAS: expected exit 1, one line and no output (exit $rc)"; status=1
  fi
  QGRU_CUBLAS_LIBRARY=$missing "$q" run --model "$model" --input "$s/x.npy" --output "$s/auto.npy" --device auto \
    > "$s/auto.out" 2> "$s/auto.err" || { echo "--device auto without cuBLAS failed: $(cat "$s/auto.err")"; status=1; }
  grep -q "using the CPU (cuBLAS ($missing) could not be loaded" "$s/auto.err" && [ -s "$s/auto.npy" ] ||
    { echo "--device auto without cuBLAS: no CPU fallback with the reason: $(cat "$s/auto.err")"; status=1; }
  LD_DEBUG=files LD_DEBUG_OUTPUT="$s/ld" "$q" run --model "$model" --input "$s/x.npy" --output "$s/gpu.npy" \
    --device cuda > /dev/null 2>&1 || { echo "--device cuda with cuBLAS failed"; status=1; }
  echo "opened: $(sed -nE 's/.*file=([^ ]*libcublas[^ ]*) \[0\];  dynamically loaded by.*/\1/p' "$s"/ld.* | sort -u | tr '\n' ' ')"
  cmp -s "$s/auto.npy" "$s/gpu.npy" || { echo "--device cuda and the CPU fallback differ"; status=1; }
  rm -rf "$s"
  return $status
}
export -f cublas_at_first_use

persistent_self_test() {
  step "self-test, persistent recurrence forced" 100 env QGRU_CUDA_GRU_PATH=persistent "$bin/test_cuda_gpu" --require-gpu
}
# Every check's cells and models on the persistent kernel with the cluster barrier where the plan can (the path of
# each line says which barrier it took, and why where not the cluster's).
cluster_self_test() {
  step "self-test, persistent recurrence forced, cluster barrier" 100 env QGRU_CUDA_GRU_PATH=persistent \
    QGRU_CUDA_GRU_SYNC=cluster "$bin/test_cuda_gpu" --require-gpu
  step "self-test, persistent recurrence forced, exchange in shared memory" 100 env QGRU_CUDA_GRU_PATH=persistent \
    QGRU_CUDA_GRU_SYNC=cluster-dsmem "$bin/test_cuda_gpu" --require-gpu
}
# The floor under a persistent step: the kernel's meetings (grid counter, cluster barrier) alone and around the
# smallest exchange of h (L2, or distributed shared memory), ns per phase; its rows ("JSON {...}") land in the log,
# where collect_gpu_results.py finds them.
# A staged code from the wrong phase fails the step: it is also the barriers' test on the card.
meetings() {
  step "persistent kernel's meetings, ns per phase (bench_cuda_barrier)" 30 "$bin/bench_cuda_barrier" --json-lines \
    --commit "$QGRU_COMMIT"
}
# compute-sanitizer memcheck and racecheck over the persistent kernel's short list (issue 35 asks for both on the new
# kernel in the one prepared run: `first` runs them after the figures, `check` first of its sanitizer steps). Status
# 1 and a NOT RUN line when the tool is missing.
sanitizer="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
persistent_sanitizers() {
  if [ ! -x "$sanitizer" ]; then
    echo "=== memcheck and racecheck (persistent-small): NOT RUN (compute-sanitizer not found)" | tee -a "$log"
    [ "$first_failure" != 0 ] || first_failure=1
    return 1
  fi
  # The tools slow every block down: the persistent kernel's wait limit is raised so a slow block is no timeout.
  step "memcheck (persistent-small)" 60 env QGRU_CUDA_GRU_SPIN_LIMIT_MS=60000 "$sanitizer" --tool memcheck \
    --error-exitcode 1 "$bin/test_cuda_gpu" --require-gpu --filter persistent-small
  step "racecheck (persistent-small)" 60 env QGRU_CUDA_GRU_SPIN_LIMIT_MS=60000 "$sanitizer" --tool racecheck \
    --error-exitcode 1 "$bin/test_cuda_gpu" --require-gpu --filter persistent-small
}
gru_side_by_side() {
  step "GRU side by side (qgru, cuDNN fp32 / fp16)" 240 python3 "$root/scripts/bench_cuda_gru_peers.py" \
    --bench "$bin/bench_cuda_gru" --json "$out/cuda-gru.json" --markdown "$out/cuda-gru.md" "$@"
}
linear_side_by_side() {
  step "quantized linear side by side (qgru, cuBLAS fp16, tinygemm)" 240 bash -c \
    "bash '$root/scripts/bench_cuda_linear.sh' '$pack' 20 --json '$out/cuda-linear.json' > '$out/cuda-linear.md'; \
     status=\$?; cat '$out/cuda-linear.md'; exit \$status"
}
# The wgmma engine (Hopper) beside cuBLAS fp16, in a process of its own (a fault of a kernel no GPU has run yet
# ends only this step): its JSON rows in cuda-linear-wgmma.json (docs/benchmarks/cuda-linear.json takes them with
# engine "qgru-wgmma"), its table in the log.
wgmma_side_by_side() {
  step "wgmma linear beside cuBLAS fp16 (M = 16-256)" 90 "$bin/bench_cuda_linear" --bits 4,8 --ms 16,64,128,256 \
    --engines qgru-wgmma,cublas-fp16 --commit "$QGRU_COMMIT" --json "$out/cuda-linear-wgmma.json"
}
if [ "$mode" = first ]; then
  persistent_self_test
  meetings
  gru_side_by_side --rounds 2
  linear_side_by_side
  persistent_sanitizers || true
  wgmma_side_by_side
  gptq_bench  # whatever the budget leaves: GPTQ's figures in the first call too, when the rest was quick
fi

if [ "$mode" = check ]; then
  step "cuBLAS at first use: one line without it, the CPU fallback, the image's file" 30 bash -c cublas_at_first_use
  persistent_self_test
  cluster_self_test
  if persistent_sanitizers; then
    step "racecheck (linear kernels)" 75 env QGRU_CUDA_LINEAR_KERNEL=auto "$sanitizer" --tool racecheck \
      --error-exitcode 1 --kernel-name regex:'(stripe|linear)' "$bin/test_cuda_gpu" --require-gpu --filter linear
    step "memcheck (linear kernels)" 60 env QGRU_CUDA_LINEAR_KERNEL=auto "$sanitizer" --tool memcheck \
      --error-exitcode 1 --kernel-name regex:'(stripe|gather|linear)' "$bin/test_cuda_gpu" --require-gpu --filter linear
    # Older compute-sanitizer versions misreport the size of wgmma's shared-memory operand reads: a report on an
    # HGMMA shared read of stripe_wgmma_kernel alone, with the plain self-test passing, points at the tool first.
    step "racecheck and memcheck (wgmma linear)" 120 bash -c "'$sanitizer' --tool racecheck --error-exitcode 1 \
      --kernel-name regex:'stripe_wgmma' '$bin/test_cuda_gpu' --require-gpu --filter linear_wgmma && \
      '$sanitizer' --tool memcheck --error-exitcode 1 --kernel-name regex:'(stripe|gather)' '$bin/test_cuda_gpu' \
      --require-gpu --filter linear_wgmma"
    step "memcheck (device-flow-small)" 40 env QGRU_CUDA_GRU_SPIN_LIMIT_MS=60000 "$sanitizer" --tool memcheck \
      --error-exitcode 1 "$bin/test_cuda_gpu" --require-gpu --filter device-flow-small
  fi
fi

# sweeps.md: the defaults that are guesses until measured. The persistent kernel's units per block (8, 16, 32)
# at N = 1, with the grid barrier, the cluster barrier and the exchange in shared memory (the plan's units; and at
# N = 64, 8 clusters), and the
# stripes partition's blocks per SM (0 = the occupancy calculator's count, then 1, 2, 4) where the
# column reduction and the pipeline depth trade against each other; the wgmma kernel's row block (64 rows, two
# blocks an SM, or 128, one) and blocks per SM at M = 64-256; rows stream into the file as they come.
sweeps() {
  step "sweeps: persistent units per block and barrier; stripes blocks per SM; wgmma row blocks" 200 bash -c \
    "{ for units in 8 16 32; do echo \"### QGRU_CUDA_GRU_UNITS=\$units\"; \
         QGRU_CUDA_GRU_UNITS=\$units '$bin/bench_cuda_gru' --recurrence persistent --preset int8 --shape 256,100,1 --runs 30; \
         QGRU_CUDA_GRU_UNITS=\$units '$bin/bench_cuda_gru' --recurrence persistent --preset int8 --shape 1024,50,1 --runs 30; \
       done; \
       for sync in grid cluster cluster-dsmem; do echo \"### QGRU_CUDA_GRU_SYNC=\$sync\"; \
         for shape in 256,100,1 1024,50,1 256,100,64; do \
           QGRU_CUDA_GRU_SYNC=\$sync '$bin/bench_cuda_gru' --recurrence persistent --preset int8 --shape \$shape --runs 30; \
         done; \
       done; \
       '$bin/bench_cuda_linear' --bits 4 --shapes 4096x11008,8192x8192 --ms 1,16,64 --engines qgru-stripes,cublas-fp16 \
         --blocks-per-sm 0,1,2,4 --rounds 5; \
       '$bin/bench_cuda_linear' --bits 4 --shapes 4096x4096,8192x8192 --ms 64,128,256 --engines qgru-wgmma,cublas-fp16 \
         --wgmma-rows 64,128 --blocks-per-sm 0,1 --rounds 5; } > '$out/sweeps.md' 2>&1; \
     status=\$?; cat '$out/sweeps.md'; exit \$status"
}

if [ "$mode" = bench ]; then
  meetings
  gru_side_by_side
  linear_side_by_side
  wgmma_side_by_side
  # cuda-stream.md: the streaming rows, then the whole call (int8, small shapes) on the host chaining and on the device
  step "streaming per frame (GPU beside CPU); whole call, host vs device flow" 60 bash -c \
    "{ '$bin/bench_cuda_gru' --streaming --runs 200 --warmup 20 --json-lines --commit '$QGRU_COMMIT' && \
       '$bin/bench_cuda_gru' --shapes small --preset int8 --flow host && \
       '$bin/bench_cuda_gru' --shapes small --preset int8 --flow device; } > '$out/cuda-stream.md'; \
     status=\$?; cat '$out/cuda-stream.md'; exit \$status"
  sweeps
fi
echo "=== gpu_session: $mode, $(($(date +%s) - started)) s, first failing status ${first_failure}" | tee -a "$log"
exit "$first_failure"
