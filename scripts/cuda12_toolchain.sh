#!/usr/bin/env bash
# Installs the CUDA 12 pieces PyPI ships (runtime and cuBLAS headers and libraries, CCCL, and from the nvcc wheel
# ptxas, libNVVM and the crt headers) into a private venv, assembles them as a toolkit-shaped folder (include/,
# lib64/, bin/ptxas) and prints that folder's path on stdout. Idempotent: a complete folder is reused; pip's
# download cache (~/.cache/pip) makes a reinstall cheap.
# What PyPI does NOT ship for CUDA 12 (checked for 12.2, 12.4, 12.6, 12.8, 12.9): the nvcc driver, cicc, cudafe++,
# fatbinary and nvlink. So no .cu file can be compiled by a CUDA 12 nvcc here; scripts/check_cuda12.sh checks
# what these pieces can check (docs/CUDA.md "Toolkits and drivers").
# Usage: scripts/cuda12_toolchain.sh   (QGRU_CUDA12_HOME overrides the folder, default ~/.cache/qgru/cuda12.4)
set -euo pipefail
version=12.4
home="${QGRU_CUDA12_HOME:-$HOME/.cache/qgru/cuda$version}"
packages=(nvidia-cuda-nvcc-cu12==12.4.131 nvidia-cuda-runtime-cu12==12.4.127 nvidia-cuda-cccl-cu12==12.4.127.post1
          nvidia-cublas-cu12==12.4.5.8)
stamp="$home/.complete-$(echo "${packages[*]}" | md5sum | cut -c1-12)"
if [[ ! -f "$stamp" ]]; then
  echo "cuda12_toolchain: installing ${packages[*]} into $home/venv" >&2
  rm -rf "$home"
  mkdir -p "$home"
  python3 -m venv "$home/venv" >&2
  "$home/venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}" >&2
  site=$("$home/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia
  root="$home/root"
  mkdir -p "$root/include" "$root/lib64" "$root/bin"
  for part in cuda_runtime cublas cuda_cccl cuda_nvcc; do
    for entry in "$site/$part/include"/*; do
      name=$(basename "$entry")
      [[ "$name" == __init__.py || "$name" == __pycache__ ]] && continue
      ln -sfn "$entry" "$root/include/$name"
    done
  done
  for lib in "$site"/cuda_runtime/lib/libcudart.so.12 "$site"/cublas/lib/libcublas.so.12 "$site"/cublas/lib/libcublasLt.so.12; do
    ln -sfn "$lib" "$root/lib64/$(basename "$lib")"
    ln -sfn "$lib" "$root/lib64/$(basename "$lib" .12)"
  done
  ln -sfn "$site/cuda_nvcc/bin/ptxas" "$root/bin/ptxas"
  [[ -f "$root/include/cuda_runtime.h" && -f "$root/include/cublas_v2.h" && -x "$root/bin/ptxas" ]] ||
    { echo "cuda12_toolchain: the wheels did not give cuda_runtime.h, cublas_v2.h and ptxas" >&2; exit 1; }
  touch "$stamp"
fi
echo "$home/root"
