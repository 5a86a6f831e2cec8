#!/usr/bin/env bash
# Install what qgru needs, from Debian packages. Idempotent: apt-get runs only when a package is missing. The
# CUDA toolkit is optional (its targets are skipped without it).
# Usage: scripts/setup.sh [cli|all]
#   cli: what the qgru command-line tool builds with and the bundled example runs with (scripts/example.sh);
#   all (default): that, and what the tests need (scripts/test.sh): doctest, Google Benchmark, pytest and a venv
#        for the Python package, Chromium for the HTML report test, clang and its sanitizer runtime.
set -euo pipefail
profile="${1:-all}"
cli_packages=(cmake g++ make ninja-build libcli11-dev nlohmann-json3-dev libspdlog-dev libopenblas-dev liblapacke-dev
              libonnx-dev libprotobuf-dev python3 python3-numpy ccache)
test_packages=(doctest-dev libbenchmark-dev python3-pytest python3-venv python3-dev chromium clang libclang-rt-14-dev)
case "$profile" in
  cli) packages=("${cli_packages[@]}") ;;
  all) packages=("${cli_packages[@]}" "${test_packages[@]}") ;;
  *) echo "setup: unknown profile '$profile' (cli or all)" >&2; exit 2 ;;
esac
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
  echo "setup: all packages present ($profile)" >&2
fi
