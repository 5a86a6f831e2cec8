#!/usr/bin/env bash
# Packs what the quantized linear's GPU checks need into one archive for a GPU machine that lacks this build's
# libraries: test_cuda_gpu and bench_cuda_linear from BUILD-DIR, the shared libraries `ldd` names that are
# neither the C library's nor CUDA's (the GPU machine brings libcublas through PyTorch's nvidia/cu13 wheels),
# and the scripts the session runs. scripts/gpu_linear_session.sh unpacks and runs it there.
# Usage: scripts/gpu_linear_bundle.sh [build-dir] [output]   (defaults: build, .gpu/linear_bundle.tar.gz)
set -euo pipefail
build="${1:-build}"
out="${2:-.gpu/linear_bundle.tar.gz}"
for target in test_cuda_gpu bench_cuda_linear; do
  if [[ ! -x "$build/test/$target" ]]; then
    echo "gpu_linear_bundle: $build/test/$target not found; build it with: cmake --build $build --target $target" >&2
    exit 1
  fi
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/scripts" "$(dirname "$out")"
cp "$build/test/test_cuda_gpu" "$build/test/bench_cuda_linear" "$stage/bin/"
cp "$(dirname "$0")"/{bench_cuda_linear.sh,bench_cuda.bash,bench_linear_torch.py} "$stage/scripts/"
ldd "$build/test/test_cuda_gpu" "$build/test/bench_cuda_linear" | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so|/cuda/|libcublas' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
git -C "$(dirname "$0")" rev-parse --short HEAD >"$stage/commit.txt" 2>/dev/null || echo unknown >"$stage/commit.txt"
tar -C "$stage" -czf "$out" .
echo "gpu_linear_bundle: $out ($(du -h "$out" | cut -f1)): $(ls "$stage/lib" | wc -l) libraries, 2 programs"
