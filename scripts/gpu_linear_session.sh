#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, the quantized linear's GPU checks in one go, in the order
# they should be trusted: the self-test (every engine against the CPU reference, determinism, no host copy, the
# C API's resident weights), racecheck over the stripes kernel, then the benchmark (markdown and JSON). Takes
# the archive of scripts/gpu_linear_bundle.sh (made where the project builds) and writes its logs and the JSON
# to OUT-DIR. Exit status: the self-test's.
# Usage: scripts/gpu_linear_session.sh [bundle] [out-dir]   (defaults: .gpu/linear_bundle.tar.gz, $OUT or /tmp/linear_out)
set -uo pipefail
bundle="${1:-.gpu/linear_bundle.tar.gz}"
out="${2:-${OUT:-/tmp/linear_out}}"
mkdir -p "$out"
work=$(mktemp -d)
tar -C "$work" -xzf "$bundle" || { echo "gpu_linear_session: cannot unpack $bundle" >&2; exit 1; }
# libcublas from PyTorch's CUDA 13 wheels when the system has none
cublas_dir=$(python3 -c 'import nvidia, os; print(os.path.join(os.path.dirname(nvidia.__path__[0]), "nvidia", "cu13", "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$work/lib:${cublas_dir}:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
"$work/bin/test_cuda_gpu" --require-gpu 2>&1 | tee "$out/selftest.log"
status=${PIPESTATUS[0]}
if command -v compute-sanitizer >/dev/null 2>&1; then
  timeout 240 compute-sanitizer --tool racecheck --kernel-name kns=stripe_linear "$work/bin/test_cuda_gpu" --require-gpu \
    >"$out/racecheck.log" 2>&1
  echo "racecheck (stripe_linear kernels): exit $?; $(grep -cE 'RACECHECK SUMMARY|hazard' "$out/racecheck.log") summary lines" |
    tee -a "$out/selftest.log"
fi
mkdir -p "$work/build/test"
cp "$work/bin/bench_cuda_linear" "$work/build/test/"
export QGRU_COMMIT="${QGRU_COMMIT:-$(cat "$work/commit.txt" 2>/dev/null || echo unknown)}"
PYTHONUNBUFFERED=1 bash "$work/scripts/bench_cuda_linear.sh" "$work/build" 20 --json "$out/bench_linear.json" 2>&1 |
  tee "$out/bench.log"
exit "$status"
