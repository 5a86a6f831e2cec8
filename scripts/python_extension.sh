#!/usr/bin/env bash
# Builds the Python package's extension (qgru._qgru) for another Python interpreter than the one the tests use,
# linked against a build tree's libraries as scripts/test_python.sh links it (`cmake --install` into a scratch
# prefix, QGRU_PREFIX; CUDA inside when the build has it): what scripts/gpu_pack.sh carries for a GPU machine
# whose python3 is another version. Output: BUILD/python-wheel-cpXY/_qgru.cpython-XY-*.so (nothing installed).
# The interpreter gets a private venv (BUILD/python-venv-cpXY) with the build requirements test_python.sh pins,
# from PyPI through pip's cache.
# Usage: scripts/python_extension.sh BUILD-DIR PYTHON
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:?usage: python_extension.sh BUILD-DIR PYTHON}" && pwd)"
python="${2:?usage: python_extension.sh BUILD-DIR PYTHON}"
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])') ||
  { echo "python_extension: $python does not run" >&2; exit 1; }
build_requirements=$(sed -n 's/^build_requirements=(\(.*\))$/\1/p' "$root/scripts/test_python.sh")
[ -n "$build_requirements" ] || { echo "python_extension: no build_requirements in scripts/test_python.sh" >&2; exit 1; }
venv="$build/python-venv-$tag"
if ! "$venv/bin/python" -c "import scikit_build_core, nanobind" 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  # shellcheck disable=SC2086 # the pinned requirements, one word each
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $build_requirements
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
launcher="$(sed -n 's/^CMAKE_CXX_COMPILER_LAUNCHER:[A-Z]*=//p' "$build/CMakeCache.txt")"
cmake_defines=(--config-settings=cmake.define.QGRU_PREFIX="$scratch/prefix")
[ -n "$launcher" ] && cmake_defines+=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER="$launcher")
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
