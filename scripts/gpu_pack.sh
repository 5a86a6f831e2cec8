#!/usr/bin/env bash
# Gathers what scripts/gpu_session.sh runs on a GPU machine that has the CUDA driver, PyTorch and nvcc but not
# qgru's Debian build dependencies: the CUDA-built binaries of a build tree and every shared library they load
# that the GPU image may lack (spdlog, fmt, ONNX, protobuf, OpenBLAS, LAPACKE, ...; not glibc, not the driver,
# not cuBLAS, which the image's CUDA toolkit provides), and the Python package's extension when the build has a current
# one. Output: PACK_DIR/bin, PACK_DIR/lib, PACK_DIR/python and a manifest.
# The folder is packed as PACK_DIR/pack.tar.xz (OpenBLAS alone is 36 MB unpacked; the archive about 13 MB), which
# travels beside the working tree (.gpu/ is git-ignored) when the device tool's carry list names PACK_DIR;
# gpu_session.sh takes the archive (or an unpacked folder) as its first argument.
# Usage: scripts/gpu_pack.sh [build-dir] [pack-dir]     (defaults: build, .gpu)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-$root/.gpu}"
pack="$(mktemp -d)"
trap 'rm -rf "$pack"' EXIT
binaries=(apps/qgru/qgru test/test_cuda_gpu test/bench_cuda_gru test/bench_cuda_linear test/bench_cuda_gptq
          test/bench_cuda_barrier)
for b in "${binaries[@]}"; do
  [ -x "$build/$b" ] || { echo "gpu_pack: $build/$b is missing: build with CUDA first (scripts/build.sh)" >&2; exit 1; }
done
mkdir -p "$pack/bin" "$pack/lib"
# Libraries the GPU image provides itself (glibc and the loader, the C++ runtime, the NVIDIA driver and the CUDA
# toolkit's libraries): loading ours instead could mismatch the driver.
# cuBLAS and cuSOLVER are loaded at run time (dlopen: by the first CUDA call, by GPTQ on the GPU), so ldd lists
# neither; they and what they load (cuBLASLt, cuSPARSE, nvJitLink) come with the image's CUDA wheels, which
# gpu_session.sh puts on LD_LIBRARY_PATH.
provided='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libcublas|libcublasLt|libcudart|libcusolver|libcusparse|libnvJitLink|libnvidia)'
copy_libraries() {
  ldd "$1" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    if ! [[ "$name" =~ $provided ]]; then cp -nL "$path" "$pack/lib/$name"; fi
  done
}
for b in "${binaries[@]}"; do
  cp "$build/$b" "$pack/bin/"
  copy_libraries "$build/$b"
done
# The Python package as the python_package test built it (build/python-wheel/_qgru.*.so, linked against this build's
# libraries: CUDA inside when they have it) with its Python files, under python/qgru: gpu_session.sh's mode gptq runs
# scripts/check_quant_linear_cuda.py on it (about 10 MB; it loads the libraries the CLI loads). Left out, with a
# warning, when missing or older than the toolchain archive it links.
# An extension loads only in the Python version it was built for, and the GPU image's python3 is 3.12 where this
# machine's is 3.11 (.library/device/KINDS.md): one more extension is built for each interpreter QGRU_PACK_PYTHON
# names (default: a python3.12 here, from PATH or pyenv, when there is one), by scripts/python_extension.sh.
pack_pythons="${QGRU_PACK_PYTHON-}"
if [ -z "$pack_pythons" ]; then
  if python3.12 -c pass 2>/dev/null; then pack_pythons=$(command -v python3.12)
  elif command -v pyenv >/dev/null; then pack_pythons=$(ls "$(pyenv root)"/versions/3.12*/bin/python3.12 2>/dev/null | tail -n 1 || true)
  fi
fi
for interpreter in $pack_pythons; do
  bash "$root/scripts/python_extension.sh" "$build" "$interpreter" ||
    echo "gpu_pack: warning: no Python extension for $interpreter (above); the pack goes without it" >&2
done
python_modules=()
for module in "$build"/python-wheel*/_qgru.*.so; do
  if [ -f "$module" ] && [ "$module" -nt "$build/libqgru_toolchain.a" ]; then python_modules+=("$module"); fi
done
if [ "${#python_modules[@]}" -gt 0 ]; then
  mkdir -p "$pack/python/qgru"
  cp "${python_modules[@]}" "$root"/python/src/qgru/*.py "$pack/python/qgru/"
  for module in "${python_modules[@]}"; do copy_libraries "$module"; done
else
  echo "gpu_pack: warning: no current Python extension in $build/python-wheel (ctest -R python_package builds it);" \
    "the pack goes without it and gpu_session.sh's QuantLinear step will say NOT RUN" >&2
fi
strip --strip-debug "$pack/bin/"* "$pack/lib/"* "$pack"/python/qgru/*.so 2>/dev/null || true
{
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $("$build/apps/qgru/qgru" --version | tr '\n' ' ')"
  (cd "$pack" && find bin lib python -type f 2>/dev/null | sort | xargs ls -l | awk '{print $5, $9}')
} >"$pack/MANIFEST"
mkdir -p "$out"
tar -C "$pack" -cJf "$out/pack.tar.xz.tmp" . && mv "$out/pack.tar.xz.tmp" "$out/pack.tar.xz"
size=$(du -sm "$out/pack.tar.xz" | cut -f1)
echo "gpu_pack: $out/pack.tar.xz, ${size} MiB ($(du -sm "$pack" | cut -f1) MiB unpacked; the device tool carries 64 MiB with the working tree)" >&2
if [ "$size" -gt 40 ]; then echo "gpu_pack: warning: over 40 MiB leaves little room for the working tree" >&2; fi
