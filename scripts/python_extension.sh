#!/usr/bin/env bash
# Builds the Python package's extension (qgru._qgru) for another Python interpreter than the one the tests use,
# linked against a build tree's libraries as scripts/test_python.sh links it (`cmake --install` into a scratch
# prefix, QGRU_PREFIX; CUDA inside when the build has it): what scripts/gpu_pack.sh carries for a GPU machine
# whose python3 is another version. Output: BUILD/python-wheel-cpXY/_qgru.cpython-XY-*.so (nothing installed).
# The interpreter gets a private venv (BUILD/python-venv-cpXY) with the build requirements scripts/python_extension_settings.bash pins,
# from PyPI through pip's cache.
# Usage: scripts/python_extension.sh BUILD-DIR PYTHON
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:?usage: python_extension.sh BUILD-DIR PYTHON}" && pwd)"
python="${2:?usage: python_extension.sh BUILD-DIR PYTHON}"
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])') ||
  { echo "python_extension: $python does not run" >&2; exit 1; }
source "$root/scripts/python_extension_settings.bash"
venv="$build/python-venv-$tag"
if ! "$venv/bin/python" -c "import scikit_build_core, nanobind" 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${python_build_requirements[@]}"
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
extension_cmake_defines "$build" "$scratch/prefix"
started=$SECONDS
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  --target "$scratch/site" --config-settings=build-dir="$build/python-wheel-$tag" "${cmake_defines[@]}" \
  "$root/python" >"$scratch/wheel.log" 2>&1 || { cat "$scratch/wheel.log" >&2; exit 1; }
module=$(ls "$build/python-wheel-$tag"/_qgru.*.so)
# The module must load in its interpreter (its libraries resolved; the package's Python files need NumPy, which
# this venv does without).
"$venv/bin/python" -c 'import importlib.util, sys
spec = importlib.util.spec_from_file_location("_qgru", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("python_extension: loads; gptq devices", module.gptq_devices())' "$module" >&2 ||
  { echo "python_extension: the $tag extension does not load" >&2; exit 1; }
echo "python_extension: $module ($((SECONDS - started)) s)" >&2
