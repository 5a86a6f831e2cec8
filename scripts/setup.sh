#!/usr/bin/env bash
# Install what qgru needs to build and test, from Debian packages. Idempotent: apt-get runs only when a
# package is missing. The CUDA toolkit is optional (its targets are skipped without it).
set -euo pipefail
packages=(cmake g++ make libcli11-dev nlohmann-json3-dev libspdlog-dev doctest-dev libopenblas-dev
          liblapacke-dev libbenchmark-dev libonnx-dev libprotobuf-dev python3 python3-numpy python3-pytest python3-venv
          python3-dev chromium clang libclang-rt-14-dev ccache)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
else
  echo "setup: all packages present" >&2
fi
