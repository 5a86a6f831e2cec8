#!/usr/bin/env bash
# The Python package with PyTorch (python/tests_torch): torch.nn.GRU / GRUCell / Linear modules and torch tensors
# given to qgru equal their state dicts and arrays, the README's Python example prints the CLI's SQNR, and
# qgru.gptq_model quantizes tiny random transformers Llama / Qwen2 models (transformers pinned too).
# Not run by CI: PyPI's torch wheel pulls the CUDA runtime packages (gigabytes; docs in python/README.md), so
# CI's check of the model path is the state-dict one (python/tests). Run it after scripts/test_python.sh, which
# built the wheel: this installs the same build into a second venv ($QGRU_TORCH_VENV, default
# <build-dir>/python-torch-venv) with torch pinned.
# Usage: test_python_torch.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-${QGRU_BUILD_DIR:-$root/build}}" && pwd)"
venv="${QGRU_TORCH_VENV:-$build/python-torch-venv}"
torch_pin=torch==2.15.0
transformers_pin=transformers==5.24.0
source "$root/test/cli/common.bash"
source "$root/scripts/python_extension_settings.bash"
[ -d "$build/python-wheel" ] || fail "no $build/python-wheel: run scripts/test_python.sh (ctest -R python_package) first"

started=$SECONDS
if ! "$venv/bin/python" -c "import torch, transformers, scikit_build_core, nanobind, pytest" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$torch_pin" "$transformers_pin" \
    "${python_build_requirements[@]}"
fi
echo "python-torch: venv ready in $((SECONDS - started)) s ($("$venv/bin/python" -c 'import torch; print(torch.__version__)'))" >&2
prefix="$build/python-torch-prefix"
extension_cmake_defines "$build" "$prefix"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall \
  --config-settings=build-dir="$build/python-wheel" "${cmake_defines[@]}" "$root/python"
scratch="$build/python-torch-scratch"
rm -rf "$scratch" && mkdir -p "$scratch" && cd "$scratch"
QGRU_CLI="$build/apps/qgru/qgru" QGRU_SOURCE_DIR="$root" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$root/python/tests_torch"
