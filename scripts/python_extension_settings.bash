# Sourced by scripts/test_python.sh and scripts/python_extension.sh: how both build the Python package's extension
# against a build tree, so the two builds cannot drift apart.
# The build requirements, pinned (from PyPI through pip's cache).
python_build_requirements=(scikit-build-core==1.1.2 nanobind==3.1.0)
# extension_cmake_defines BUILD PREFIX: installs BUILD's libraries into PREFIX (`cmake --install`, its log in
# PREFIX.install.log) and fills the array cmake_defines with pip's --config-settings that link the extension against
# them (QGRU_PREFIX) and compile it through BUILD's compiler launcher (ccache, scripts/compiler_cache.sh), if any.
extension_cmake_defines() {
  local build="$1" prefix="$2" launcher
  cmake --install "$build" --prefix "$prefix" > "$prefix.install.log"
  launcher="$(sed -n 's/^CMAKE_CXX_COMPILER_LAUNCHER:[A-Z]*=//p' "$build/CMakeCache.txt")"
  cmake_defines=(--config-settings=cmake.define.QGRU_PREFIX="$prefix")
  if [ -n "$launcher" ]; then cmake_defines+=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER="$launcher"); fi
}
