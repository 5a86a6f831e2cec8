#!/usr/bin/env bash
# The persistent GRU kernel's checks on a machine with a GPU, in order (docs/CUDA.md "On a machine with a GPU"):
#   1. test_cuda_gpu --filter persistent        the kernel against the CPU references, one line per case and path
#   2. compute-sanitizer memcheck, racecheck, synccheck over --filter persistent-small (the wait limit raised to
#      60 s: the tools slow every block); NOT RUN, said plainly, when compute-sanitizer is not found
#   3. test_cuda_gpu with QGRU_CUDA_GRU_PATH=persistent (every other GPU check on the persistent path too)
#   4. scripts/bench_cuda_gru_peers.py (qgru vs torch.nn.GRU on cuDNN), unless QGRU_SKIP_PEERS=1
# Logs and peers.json go to the output folder. Exit status: the number of failed steps (0: all passed).
# The first argument is a build tree (its test/ binaries) or a pack of scripts/gpu_pack.sh (bin/ and lib/, which
# then goes on LD_LIBRARY_PATH). scripts/gpu_session.sh's check and bench cover the same ground for the whole project;
# this runs the persistent kernel's checks alone, the sanitizers on its short list.
# Usage: scripts/check_cuda_persistent_gru.sh [build-or-pack-dir] [output-dir]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
if [[ -x "$build/bin/test_cuda_gpu" ]]; then  # a gpu_pack.sh pack
  bin="$build/bin"
  export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  bin="$build/test"
fi
selftest="$bin/test_cuda_gpu"
if [[ ! -x "$selftest" ]]; then
  echo "check_cuda_persistent_gru: $selftest not found (build the test_cuda_gpu and bench_cuda_gru targets)" >&2
  exit 1
fi
failed=0
step() {  # step NAME COMMAND...: runs, logs to $out/NAME.log, reports
  local name="$1"
  shift
  echo "== $name: $*"
  if "$@" 2>&1 | tee "$out/$name.log"; then
    echo "== $name: passed"
  else
    echo "== $name: FAILED"
    failed=$((failed + 1))
  fi
}

step selftest_persistent "$selftest" --require-gpu --filter persistent
sanitizer="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
if [[ -x "$sanitizer" ]]; then
  for tool in memcheck racecheck synccheck; do
    step "sanitizer_$tool" env QGRU_CUDA_GRU_SPIN_LIMIT_MS=60000 "$sanitizer" --tool "$tool" --error-exitcode 1 \
      "$selftest" --require-gpu --filter persistent-small
  done
else
  echo "== compute-sanitizer not found (looked for \$COMPUTE_SANITIZER, PATH, /usr/local/cuda/bin): sanitizer runs NOT RUN"
  failed=$((failed + 1))
fi
step selftest_all_persistent env QGRU_CUDA_GRU_PATH=persistent "$selftest" --require-gpu
if [[ "${QGRU_SKIP_PEERS:-0}" != 1 ]]; then
  step peers python3 "$root/scripts/bench_cuda_gru_peers.py" --bench "$bin/bench_cuda_gru" --json "$out/peers.json" \
    --markdown "$out/peers.md"
fi
echo "check_cuda_persistent_gru: $failed failed step(s); logs in $out"
exit "$failed"
