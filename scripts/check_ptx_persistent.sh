#!/usr/bin/env bash
# Static check of the persistent GRU kernel's synchronization (no GPU needed): compiles cuda/src/persistent_gru.cu to
# PTX for sm_80 and sm_90 and asserts that each instantiation of persistent_gru_kernel (int8 and 16-bit, grid and
# cluster barrier) holds the instructions its protocol is made of (docs/CUDA.md "The GRU executor",
# qgru/kernels/persistent_gru.h):
#   every instance: bar.sync (the block's barrier), ld.global.cg (exchange buffers read through L2);
#   the grid barrier's: ld.acquire.gpu (the wait), red.release.gpu (the publish), membar/fence (__threadfence),
#     %globaltimer and nanosleep (the bounded spin);
#   the cluster barrier's, on sm_90: barrier.cluster.arrive.release and barrier.cluster.wait.acquire (aligned), and
#     %cluster_nctarank (the launch's cluster size checked against the plan's); on sm_80 a trap (never launched);
#   the exchange in shared memory's (ClusterDsmem), on sm_90, besides the cluster barrier's: mapa.shared::cluster and
#     st.shared::cluster (the pushes into the cluster's blocks); on sm_80 a trap.
# A kernel that lost one of them (a plain load in the wait, an L1-cached exchange read, a barrier without its
# release or acquire) fails here. The int8
# instantiation also computes its dot products on the tensor cores: mma.sync m16n8k32 and m16n8k16 .s8 with s32
# accumulators, ldmatrix, and shared-memory atomic adds for the k splits.
# Usage: scripts/check_ptx_persistent.sh [source-root] [nvcc]
set -euo pipefail
source "$(dirname "$0")/cuda_check.bash"
cuda_check_init "${1:-}" "${2:-}"
failures=0
required=('bar\.sync' 'ld\.global\.cg')
grid_required=('ld\.acquire\.gpu' 'red\.release\.gpu' '(membar\.gl|fence\.(sc|acq_rel)\.gpu)' '%globaltimer' 'nanosleep')
cluster_required_sm90=('barrier\.cluster\.arrive\.release\.aligned' 'barrier\.cluster\.wait\.acquire\.aligned'
                       '%cluster_nctarank')
dsmem_required_sm90=('mapa\.shared::cluster' 'st\.shared::cluster\.v[24]\.u32')
for arch in 80 90; do
  ptx="$work/persistent_gru.sm_$arch.ptx"
  "$nvcc" -ptx -arch="sm_$arch" -std=c++17 --expt-relaxed-constexpr -I"$root/lib/include" -I"$root/cuda/include" \
    -I"$root/cuda/src" -o "$ptx" "$root/cuda/src/persistent_gru.cu"
  # Each .entry with its body (from ".entry NAME(" to the closing "}" at the start of a line).
  entries=$(grep -c '\.entry .*persistent_gru_kernel' "$ptx" || true)
  if [[ "$entries" != 6 ]]; then
    echo "FAIL sm_$arch: $entries persistent_gru_kernel entries in the PTX, expected 6 (int8 and 16-bit; grid, cluster and"\
         "cluster with the exchange in shared memory)"
    failures=$((failures + 1))
    continue
  fi
  for n in 1 2 3 4 5 6; do
    body=$(awk -v want="$n" '/\.entry .*persistent_gru_kernel/ { k++; on = (k == want) } on { print } on && /^}/ { exit }' "$ptx")
    name=$(sed -n '1{s/.*\.entry //; s/(.*//; p}' <<<"$body")
    wanted=("${required[@]}")
    # The meeting is the kernel's third template argument: PersistentSync 0 (Grid), 1 (Cluster), 2 (ClusterDsmem).
    if [[ "$name" == *PersistentSyncE0* ]]; then
      wanted+=("${grid_required[@]}")
    elif [[ "$name" == *PersistentSyncE1* ]]; then
      if [[ "$arch" == 90 ]]; then wanted+=("${cluster_required_sm90[@]}"); else wanted+=('trap'); fi
    elif [[ "$name" == *PersistentSyncE2* ]]; then
      if [[ "$arch" == 90 ]]; then wanted+=("${cluster_required_sm90[@]}" "${dsmem_required_sm90[@]}"); else wanted+=('trap'); fi
    else
      echo "FAIL sm_$arch $name: neither the grid nor the cluster instance"
      failures=$((failures + 1))
    fi
    if [[ "$name" == *persistent_gru_kernelIai* ]]; then  # int8_t, int32_t
      wanted+=('mma\.sync\.aligned\.m16n8k32\.row\.col\.s32\.s8\.s8\.s32' \
               'mma\.sync\.aligned\.m16n8k16\.row\.col\.s32\.s8\.s8\.s32' 'ldmatrix\.sync' '(atom|red)\.shared\.add')
    fi
    for regex in "${wanted[@]}"; do
      if ! grep -Eq "$regex" <<<"$body"; then
        echo "FAIL sm_$arch $name: no $regex"
        failures=$((failures + 1))
      fi
    done
    echo "sm_$arch $name: ${#wanted[@]} required instructions present"
  done
done
if [[ $failures -ne 0 ]]; then
  echo "check_ptx_persistent: $failures missing" >&2
  exit 1
fi
echo "check_ptx_persistent: OK"
