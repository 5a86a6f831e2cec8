#!/usr/bin/env bash
# Sourced by scripts/build.sh and scripts/configure_sanitized.sh: sets the array compiler_cache_args to the CMake
# arguments that put ccache in front of the C, C++ and CUDA compilers when ccache is installed (scripts/setup.sh
# installs it) and QGRU_CCACHE is not 0. CCACHE_BASEDIR is the checkout, so paths inside it are hashed relative
# to it and two clones of the same tree (CI's clean clone, a developer's checkout) share cache entries;
# CCACHE_NOHASHDIR leaves the build directory's path out of the hash. A cache hit replays the compiler's
# output and warnings; ccache compiles for real whenever it cannot cache a call. Expects $root to be set.
compiler_cache_args=()
if [ "${QGRU_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  launcher="env;CCACHE_BASEDIR=$root;CCACHE_NOHASHDIR=true;ccache"
  compiler_cache_args=("-DCMAKE_C_COMPILER_LAUNCHER=$launcher" "-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher"
                       "-DCMAKE_CUDA_COMPILER_LAUNCHER=$launcher")
  echo "build: compiler cache ccache ($(ccache --version | head -n 1); QGRU_CCACHE=0 turns it off)" >&2
fi
