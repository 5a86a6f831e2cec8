#!/usr/bin/env bash
# Static check of the fast dequantization code generation (no GPU needed).
#  1. Compiles test/cuda/dequant_ptx_probe.cu (one extern "C" kernel per dequant entry point) to PTX for
#     sm_80 and asserts, per probe, that its body contains the instructions the trick is made of (prmt.b32
#     for 8-bit codes, lop3.b32 for 4-bit codes, packed-half sub/fma/mul .f16x2) and NO int->float
#     conversion (cvt.*.f16|f32|f64.{s,u}{8,16,32,64}).
#  2. Compiles cuda/src/quant_linear_kernels.cu and cuda/src/quant_linear_stripes.cu to PTX and asserts the
#     same of every GEMM kernel entry: lop3.b32 in the 4-bit ones, prmt.b32 in the 8-bit ones, f16x2
#     arithmetic, no int->float cvt (the stripes kernels also: mma.sync, ldmatrix, and the cp.async pipeline with
#     the weights' evict-first L2 policy), and cuda/src/quant_linear_wgmma.cu for sm_90a (also: the wgmma of its
#     row block's width, its fence, commit and wait, and the async-proxy fence).
# Usage: scripts/check_ptx_dequant.sh [source-root] [nvcc]
set -euo pipefail
source "$(dirname "$0")/cuda_check.bash"
cuda_check_init "${1:-}" "${2:-}"
compile_ptx() {  # source output [arch]
  "$nvcc" -ptx -arch="${3:-sm_80}" -std=c++17 --expt-relaxed-constexpr -I"$root/lib/include" -I"$root/cuda/include" \
    -I"$root/cuda/src" -o "$2" "$1"
}
# Body of the .entry whose name contains $2, from the PTX file $1 (from ".entry NAME(" to the closing "}").
entry_body() { awk -v want="$2" '$0 ~ /\.entry/ && index($0, want) { on = 1 } on { print } on && /^}/ { exit }' "$1"; }
int_to_float='cvt(\.[a-z]+)*\.f(16|32|64)\.(s|u)(8|16|32|64)'
failures=0
check_entry() {  # ptx entry-name required-regex...
  local ptx=$1 name=$2
  shift 2
  local body
  body=$(entry_body "$ptx" "$name")
  if [[ -z "$body" ]]; then
    echo "FAIL $name: no such .entry in the PTX" >&2
    failures=$((failures + 1))
    return
  fi
  local status="ok"
  for pattern in "$@"; do
    local n
    n=$(grep -cE "$pattern" <<<"$body" || true)
    if [[ "$n" -eq 0 ]]; then
      echo "FAIL $name: no instruction matching '$pattern'" >&2
      status="FAIL"
    fi
  done
  local cvts
  cvts=$(grep -E "$int_to_float" <<<"$body" || true)
  if [[ -n "$cvts" ]]; then
    echo "FAIL $name: int->float conversion instructions:" >&2
    echo "$cvts" >&2
    status="FAIL"
  fi
  local pretty
  pretty=$(echo "$name" | { command -v c++filt >/dev/null 2>&1 && c++filt || cat; } |
    sed -e 's/qgru::cuda::(anonymous namespace):://' -e 's/(qgru::cuda::QuantLinearArgs)//')
  printf "%-4s %-44s prmt=%-3s lop3=%-3s sub.f16x2=%-3s fma.f16x2=%-3s mul.f16x2=%-3s int->float cvt=%s\n" "$status" "$pretty" \
    "$(grep -c 'prmt.b32' <<<"$body" || true)" "$(grep -c 'lop3.b32' <<<"$body" || true)" \
    "$(grep -c 'sub.rn.f16x2' <<<"$body" || true)" "$(grep -c 'fma.rn.f16x2' <<<"$body" || true)" \
    "$(grep -c 'mul.rn.f16x2' <<<"$body" || true)" "$(grep -cE "$int_to_float" <<<"$body" || true)"
  [[ "$status" == "ok" ]] || failures=$((failures + 1))
}

compile_ptx "$root/test/cuda/dequant_ptx_probe.cu" "$work/probe.ptx"
check_entry "$work/probe.ptx" probe_int8x4_biased_to_f16 'prmt\.b32' 'sub\.rn\.f16x2'
check_entry "$work/probe.ptx" probe_dequant_u8x4 'prmt\.b32' 'sub\.rn\.f16x2' 'mul\.rn\.f16x2'
check_entry "$work/probe.ptx" probe_dequant_u4x8 'lop3\.b32' 'sub\.rn\.f16x2' 'fma\.rn\.f16x2' 'mul\.rn\.f16x2'

compile_ptx "$root/cuda/src/quant_linear_kernels.cu" "$work/kernels.ptx"
kernels=$(grep -oE '\.entry [A-Za-z0-9_]*quant_linear_kernelILi[48]E[A-Za-z0-9_]*' "$work/kernels.ptx" | awk '{print $2}' || true)
if [[ -z "$kernels" ]]; then
  echo "FAIL: no quant_linear_kernel entries in the PTX of cuda/src/quant_linear_kernels.cu" >&2
  exit 1
fi
for k in $kernels; do
  if [[ "$k" == *kernelILi4E* ]]; then
    check_entry "$work/kernels.ptx" "$k" 'lop3\.b32' 'sub\.rn\.f16x2' 'fma\.rn\.f16x2' 'mul\.rn\.f16x2'
  else
    check_entry "$work/kernels.ptx" "$k" 'prmt\.b32' 'sub\.rn\.f16x2' 'mul\.rn\.f16x2'
  fi
done
compile_ptx "$root/cuda/src/quant_linear_stripes.cu" "$work/stripes.ptx"
stripes=$(grep -oE '\.entry [A-Za-z0-9_]*stripe_linear_kernelILi[48]E[A-Za-z0-9_]*' "$work/stripes.ptx" | awk '{print $2}' || true)
# One entry per (bits, m16 fragments per block): 4 and 8 bits, 1, 2 and 4 fragments.
if [[ $(wc -w <<<"$stripes") -ne 6 ]]; then
  echo "FAIL: expected six stripe_linear_kernel entries (4 and 8 bits x 1, 2 and 4 m16 fragments) in the PTX of" \
    "cuda/src/quant_linear_stripes.cu, found: $stripes" >&2
  exit 1
fi
# The stripes pipeline: the weights' evict-first L2 policy on their 16-byte cp.async copies, the copy groups.
stripe_pipeline=('createpolicy\.fractional\.L2::evict_first' 'cp\.async\.cg\.shared\.global\.L2::cache_hint' \
  'cp\.async\.commit_group' 'cp\.async\.wait_group')
for k in $stripes; do
  if [[ "$k" == *kernelILi4E* ]]; then
    check_entry "$work/stripes.ptx" "$k" 'lop3\.b32' 'sub\.rn\.f16x2' 'fma\.rn\.f16x2' 'mul\.rn\.f16x2' 'mma\.sync' 'ldmatrix' \
      "${stripe_pipeline[@]}"
  else
    check_entry "$work/stripes.ptx" "$k" 'prmt\.b32' 'sub\.rn\.f16x2' 'mul\.rn\.f16x2' 'mma\.sync' 'ldmatrix' "${stripe_pipeline[@]}"
  fi
done
# The wgmma kernels (sm_90a): the same dequantization and pipeline, the warpgroup instruction with A from
# registers at its row block's width (m64n64k16 or m64n128k16), its fence, commit and wait, and the proxy fence
# that makes the stage's copies visible to the tensor cores' reads.
compile_ptx "$root/cuda/src/quant_linear_wgmma.cu" "$work/wgmma.ptx" sm_90a
wgmma_entries=$(grep -oE '\.entry [A-Za-z0-9_]*stripe_wgmma_kernelILi[48]ELi(64|128)E[A-Za-z0-9_]*' "$work/wgmma.ptx" | awk '{print $2}' || true)
if [[ $(wc -w <<<"$wgmma_entries") -ne 4 ]]; then
  echo "FAIL: expected four stripe_wgmma_kernel entries (4 and 8 bits x row blocks of 64 and 128) in the PTX of" \
    "cuda/src/quant_linear_wgmma.cu for sm_90a, found: $wgmma_entries" >&2
  failures=$((failures + 1))
fi
wgmma_sync=('wgmma\.fence\.sync\.aligned' 'wgmma\.commit_group\.sync\.aligned' 'wgmma\.wait_group\.sync\.aligned' \
  'fence\.proxy\.async\.shared::cta' "${stripe_pipeline[@]}")
for k in $wgmma_entries; do
  width=64
  [[ "$k" == *ELi128E* ]] && width=128
  shape="wgmma\\.mma_async\\.sync\\.aligned\\.m64n${width}k16\\.f32\\.f16\\.f16"
  if [[ "$k" == *kernelILi4E* ]]; then
    check_entry "$work/wgmma.ptx" "$k" 'lop3\.b32' 'sub\.rn\.f16x2' 'fma\.rn\.f16x2' 'mul\.rn\.f16x2' "$shape" "${wgmma_sync[@]}"
  else
    check_entry "$work/wgmma.ptx" "$k" 'prmt\.b32' 'sub\.rn\.f16x2' 'mul\.rn\.f16x2' "$shape" "${wgmma_sync[@]}"
  fi
done
if [[ $failures -ne 0 ]]; then
  echo "check_ptx_dequant: FAILED ($failures function(s))" >&2
  exit 1
fi
echo "check_ptx_dequant: OK"
