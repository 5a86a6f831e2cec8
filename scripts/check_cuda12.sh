#!/usr/bin/env bash
# The CUDA 12 checks (CI runs them after the CUDA 13 build; docs/CUDA.md "Toolkits and drivers"). PyPI's CUDA 12
# wheels carry no nvcc front end (scripts/cuda12_toolchain.sh), so this checks what the CUDA 12 pieces can:
#   1. host code: every host translation unit that includes CUDA or cuBLAS headers (cuda/src/*.cpp, the C APIs'
#      CUDA devices, the GPU self-test's host files) compiles against the CUDA 12.4 headers with the project's
#      warnings as errors;
#   2. linking: every CUDA runtime symbol those objects use and every cuBLAS function the table of
#      cuda/include/qgru_cuda/cublas_library.h resolves (cuBLAS is loaded at first use) is exported by CUDA 12's
#      libcudart.so.12 and libcublas.so.12 (an API that exists only in CUDA 13 fails here);
#   3. device code: ptxas 12.4 assembles the PTX of every kernel (from nvcc 13's front end, its ISA header set to
#      8.4, which ptxas 12.4 reads) for sm_80 and sm_90 with no spill and no stack frame (check_cuda_spills.sh).
# What it cannot check: the .cu files' host stubs and the front end (cicc) of a CUDA 12 nvcc.
# Usage: scripts/check_cuda12.sh <build-dir of the CUDA 13 build>   (needs its lib/generated headers)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: check_cuda12.sh <build-dir>}"
started=$SECONDS
cuda12=$(bash "$root/scripts/cuda12_toolchain.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every host file of the CUDA library and the GPU self-test, and every other host file that includes a CUDA
# runtime or cuBLAS header itself (the C APIs' CUDA devices, the CLI).
mapfile -t sources < <({ ls "$root"/cuda/src/*.cpp "$root"/test/cuda/*.cpp
  grep -rlE '#include <(cuda_runtime|cuda_runtime_api|cublas_v2|cuda_fp16)\.h>' "$root/lib/src" "$root/apps" --include='*.cpp'
} | sort -u)
flags=(-std=c++17 -O1 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror
       -DQGRU_CAPI_WITH_CUDA=1 -DQGRU_EXECUTOR_WITH_CUDA=1 -DQGRU_WITH_CUDA=1 -DQGRU_CUDART_STATIC=1 -I"$root/lib/include" -I"$build/lib/generated"
       -I"$root/cuda/include" -I"$root/cuda/src" -I"$root/lib/src/gptq/capi" -I"$root/test/unit/support"
       -isystem "$cuda12/include")
objects=()
pids=()
for src in "${sources[@]}"; do
  obj="$work/$(basename "$src").o"
  objects+=("$obj")
  c++ "${flags[@]}" -c "$src" -o "$obj" 2> "$obj.log" &
  pids+=($!)
  if (( ${#pids[@]} >= $(nproc) )); then wait "${pids[0]}" || true; pids=("${pids[@]:1}"); fi
done
wait || true
failed=0
for i in "${!sources[@]}"; do
  if [[ ! -f "${objects[$i]}" ]]; then
    cat "${objects[$i]}.log" >&2
    echo "check_cuda12: ${sources[$i]#$root/} does not compile against the CUDA 12.4 headers" >&2
    failed=1
  fi
done
[[ $failed -eq 0 ]] || exit 1
echo "check_cuda12: ${#sources[@]} host files compile against the CUDA 12.4 headers (-Werror)"

nm -D --defined-only "$cuda12"/lib64/libcudart.so.12 "$cuda12"/lib64/libcublas.so.12 | awk 'NF >= 3 {print $3}' |
  sed 's/@.*//' | sort -u > "$work/exported"
nm -u "${objects[@]}" 2>/dev/null | awk '{print $NF}' | grep -E '^(cuda|cublas)[A-Z]' | sort -u > "$work/used"
[[ -s "$work/used" ]] || { echo "check_cuda12: no CUDA symbol found in the host objects (is nm's format changed?)" >&2; exit 1; }
# cuBLAS is loaded at first use (cuda/include/qgru_cuda/cublas_library.h): the objects reference none of its
# symbols, so the names its function table resolves are what libcublas.so.12 must export.
sed -nE 's/^ *X\((cublas[A-Za-z0-9_]+),.*/\1/p' "$root/cuda/include/qgru_cuda/cublas_library.h" > "$work/cublas_table"
[[ -s "$work/cublas_table" ]] || { echo "check_cuda12: no cuBLAS name read from cublas_library.h (its table's format changed?)" >&2; exit 1; }
sort -u "$work/used" "$work/cublas_table" -o "$work/used"
missing=$(comm -23 "$work/used" "$work/exported")
if [[ -n "$missing" ]]; then
  echo "check_cuda12: symbols the CUDA 12 libraries do not export:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "check_cuda12: all $(wc -l < "$work/used") CUDA runtime / cuBLAS symbols (the $(wc -l < "$work/cublas_table") of cuBLAS's table included) resolve in libcudart.so.12 and libcublas.so.12"

QGRU_PTXAS="$cuda12/bin/ptxas" QGRU_PTX_ISA=8.4 bash "$root/scripts/check_cuda_spills.sh" "$root" "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
echo "check_cuda12: OK in $((SECONDS - started)) s"
