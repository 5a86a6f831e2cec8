#!/usr/bin/env bash
# The Python package's tests (ctest python_package; docs in python/README.md): build the wheel from python/,
# install it into a private venv and run pytest (python/tests) with the CLI of the same build beside it.
# The wheel links the libraries the main build has just compiled (`cmake --install` into a scratch prefix,
# QGRU_PREFIX), so CI compiles only the extension's own sources and nanobind's.
# The venv ($QGRU_PYTHON_VENV, default <build-dir>/python-venv) is made from Debian's python3 with its
# system packages (NumPy and pytest come from Debian, scripts/setup.sh); scikit-build-core and nanobind come
# from PyPI through pip's cache (~/.cache/pip), pinned.
# The extension compiles through the build's own compiler launcher (ccache, scripts/compiler_cache.sh).
# Usage: test_python.sh <build-dir> <scratch-dir> <source-root>
set -euo pipefail
build="$(cd "$1" && pwd)"
root="$(cd "$3" && pwd)"
source "$root/test/cli/common.bash"
source "$root/scripts/python_extension_settings.bash"
rm -rf "$2"
mkdir -p "$2"
scratch="$(cd "$2" && pwd)"
venv="${QGRU_PYTHON_VENV:-$build/python-venv}"

started=$SECONDS
if ! "$venv/bin/python" -c "import scikit_build_core, nanobind, numpy, pytest" 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${python_build_requirements[@]}"
fi
"$venv/bin/python" -c "import numpy, pytest" || fail "$venv: no numpy or pytest (scripts/setup.sh installs python3-numpy and python3-pytest)"
echo "python: venv ready in $((SECONDS - started)) s" >&2

started=$SECONDS
prefix="$scratch/prefix"
extension_cmake_defines "$build" "$prefix"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall \
  --config-settings=build-dir="$build/python-wheel" "${cmake_defines[@]}" "$root/python" > "$scratch/wheel.log" 2>&1 ||
  { cat "$scratch/wheel.log"; fail "pip install ./python"; }
echo "python: wheel built and installed in $((SECONDS - started)) s" >&2
# The installed module needs nothing of the build: no run path, no library from the build or the prefix.
module="$("$venv/bin/python" -c 'import qgru._qgru as m; print(m.__file__)')"
! readelf -d "$module" | grep -Eq "RPATH|RUNPATH" || fail "$module has a run path: $(readelf -d "$module" | grep -E 'RPATH|RUNPATH')"
! ldd "$module" | grep -Fq -e "$build" -e "$root" || fail "$module loads a library of the build tree: $(ldd "$module")"

# From the scratch folder, so that `import qgru` is the installed wheel, not python/src.
cd "$scratch"
QGRU_CLI="$build/apps/qgru/qgru" QGRU_SOURCE_DIR="$root" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$root/python/tests"
