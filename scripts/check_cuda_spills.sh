#!/usr/bin/env bash
# Static check of the CUDA kernels (no GPU needed): compiles every cuda/src/*.cu for sm_80 and sm_90 with
# `nvcc -cubin -Xptxas -v` (device code only), prints each kernel's registers, shared memory, stack frame
# and spills, and fails if any function spills registers or uses a stack frame, if a kernel passes its register
# ceiling (the list below), if nvcc fails, or if no kernel was found at all (never a silent pass).
# With QGRU_PTXAS set (scripts/check_cuda12.sh) the same check runs on another toolkit's assembler: nvcc -ptx, the
# PTX's ISA header set to QGRU_PTX_ISA (the newest that ptxas reads), then $QGRU_PTXAS -v.
# Usage: scripts/check_cuda_spills.sh [source-root] [nvcc]
set -euo pipefail
source "$(dirname "$0")/cuda_check.bash"
cuda_check_init "${1:-}" "${2:-}"
demangle() { if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi; }

shopt -s nullglob
sources=("$root"/cuda/src/*.cu)
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "check_cuda_spills: no .cu files under $root/cuda/src" >&2
  exit 1
fi

: >"$work/table"
for src in "${sources[@]}"; do
  # A file whose kernels exist on Hopper only as sm_90a code (wgmma: QGRU_WGMMA_DEVICE) is checked there; its
  # sm_90 build is the trap the layer never launches.
  archs=(80 90)
  if grep -q "QGRU_WGMMA_DEVICE" "$src"; then archs=(80 90a); fi
  for arch in "${archs[@]}"; do
    log="$work/$(basename "$src").sm_$arch.log"
    includes=(-I"$root/lib/include" -I"$root/cuda/include" -I"$root/cuda/src")
    if [[ -n "${QGRU_PTXAS:-}" ]]; then
      if ! "$nvcc" -ptx -arch="sm_$arch" -std=c++17 --expt-relaxed-constexpr "${includes[@]}" -o "$work/out.ptx" "$src" \
          >"$log" 2>&1; then
        cat "$log" >&2
        echo "check_cuda_spills: nvcc -ptx failed on $src for sm_$arch" >&2
        exit 1
      fi
      sed -i "s/^\.version [0-9.]*/.version ${QGRU_PTX_ISA:?QGRU_PTX_ISA must name the PTX ISA QGRU_PTXAS reads}/" "$work/out.ptx"
      if ! "$QGRU_PTXAS" -arch="sm_$arch" -v -o "$work/out.cubin" "$work/out.ptx" >>"$log" 2>&1; then
        cat "$log" >&2
        echo "check_cuda_spills: $QGRU_PTXAS failed on $src for sm_$arch" >&2
        exit 1
      fi
    elif ! "$nvcc" -cubin -arch="sm_$arch" -std=c++17 --expt-relaxed-constexpr -Xptxas=-v "${includes[@]}" \
        -o "$work/out.cubin" "$src" >"$log" 2>&1; then
      cat "$log" >&2
      echo "check_cuda_spills: nvcc failed on $src for sm_$arch" >&2
      exit 1
    fi
    # ptxas serializes the wgmma of a function where a register one of them reads is written while they run
    # (C7513): correct, and the tensor cores' throughput gone. Fail rather than time it.
    if grep -q "wgmma.mma_async instructions are serialized" "$log"; then
      grep "serialized" "$log" >&2
      echo "check_cuda_spills: ptxas serialized the wgmma of $src for sm_$arch" >&2
      exit 1
    fi
    # ptxas -v prints, per function:
    #   ptxas info    : Function properties for NAME
    #       S bytes stack frame, T bytes spill stores, L bytes spill loads
    #   ptxas info    : Used R registers, ... B bytes smem, ...        (entry functions only)
    awk -v arch="sm_$arch" -v file="$(basename "$src")" '
      /Function properties for/ { name = $NF; next }
      /bytes stack frame/ { stack[name] = $1; stores[name] = $5; loads[name] = $9; order[++n] = name; next }
      /Used [0-9]+ registers/ {
        regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
        smem = 0; if ($0 ~ /bytes smem/) { smem = $0; sub(/ bytes smem.*/, "", smem); sub(/.*, /, "", smem) }
        r[name] = regs; s[name] = smem; next
      }
      END {
        for (i = 1; i <= n; ++i) {
          k = order[i]
          printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", arch, file, (k in r ? r[k] : "-"), (k in s ? s[k] : "-"),
                 stack[k], stores[k], loads[k], k
        }
      }' "$log" >>"$work/table"
  done
done

count=$(wc -l <"$work/table")
if [[ "$count" -eq 0 ]]; then
  echo "check_cuda_spills: ptxas reported no functions; is -Xptxas -v output format changed?" >&2
  exit 1
fi
printf "%-6s %-26s %5s %7s %6s %7s %7s  %s\n" arch file regs smem_B stack spill_st spill_ld function
bad=0
capped=0
# Register ceilings where a kernel's launch bounds allow more registers than the blocks per SM it is meant to run:
# "pattern (an extended regex on the printed name)|most registers|why".
ceilings=(
  "stripe_linear_kernel<[48], 1>|128|the one-fragment stripes kernel runs four blocks of 128 threads an SM (quant_linear_stripes.cu, stripe_min_blocks)"
)
while IFS=$'\t' read -r arch file regs smem stack stores loads name; do
  pretty=$(echo "$name" | demangle | sed -e 's/qgru::cuda::(anonymous namespace):://' -e 's/(qgru::cuda::QuantLinearArgs)//')
  printf "%-6s %-26s %5s %7s %6s %7s %7s  %s\n" "$arch" "$file" "$regs" "$smem" "$stack" "$stores" "$loads" "$pretty"
  if [[ "$stack" != "0" || "$stores" != "0" || "$loads" != "0" ]]; then
    echo "  ^ FAIL: stack frame or register spills in $pretty ($arch)" >&2
    bad=1
  fi
  for ceiling in "${ceilings[@]}"; do
    IFS='|' read -r pattern most why <<<"$ceiling"
    if [[ "$pretty" =~ $pattern ]]; then
      capped=$((capped + 1))
      if [[ "$regs" == "-" || "$regs" -gt "$most" ]]; then
        echo "  ^ FAIL: $regs registers, more than $most: $why" >&2
        bad=1
      fi
    fi
  done
done <"$work/table"
if [[ $capped -eq 0 ]]; then  # the ceilings' patterns must still name kernels: never a silent pass
  echo "check_cuda_spills: no kernel matched a register ceiling's pattern (${ceilings[*]})" >&2
  exit 1
fi
if [[ $bad -ne 0 ]]; then
  echo "check_cuda_spills: FAILED (a kernel spills registers, uses a stack frame or passes its register ceiling)" >&2
  exit 1
fi
assembler="ptxas of $nvcc"
[[ -z "${QGRU_PTXAS:-}" ]] || assembler="$("$QGRU_PTXAS" --version | tail -n 1) (PTX ISA ${QGRU_PTX_ISA})"
echo "check_cuda_spills: OK, $count function(s) on sm_80 and sm_90 (sm_90a for the wgmma kernels), no stack frames, no spills, no serialized wgmma, $capped within their register ceilings ($assembler)"
