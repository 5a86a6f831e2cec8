#pragma once
// Device code shared by the stripes kernels (quant_linear_stripes.cu, quant_linear_wgmma.cu): the end of a block's
// part of a column that other blocks share (stripe_linear.h, "Stripes and the reduction"). The block's partial
// sums are already in its slot of the workspace; this publishes them, counts the block in, and, in the block that
// completes the column, sums the slots in the fixed order 0, 1, ... and writes fp16 C.
#include <cuda_fp16.h>

#include "qgru/kernels/stripe_linear.h"
#include "quant_linear_launch.h"

namespace qgru::cuda {

// Every thread of the block calls it (it holds barriers); rows: the row block's row count (kRows), mb its
// index; last_block_of_column: a shared int of the block.
__device__ __forceinline__ void stripe_column_sum(const StripeLinearArgs& args, int64_t mb, int rows_per_block, int64_t nt,
                                                  int32_t segments, int tid, int& last_block_of_column) {
  namespace k = qgru::kernels;
  __threadfence();  // the partials are visible device-wide before the counter says so
  __syncthreads();
  uint32_t* counter = args.counters + mb * args.n_tiles + nt;
  if (tid == 0) last_block_of_column = atomicAdd(counter, 1u) + 1u == static_cast<uint32_t>(segments);
  __syncthreads();
  if (last_block_of_column) {
    __threadfence();
    const int64_t first_row = mb * rows_per_block;
    const int64_t rows = args.M - first_row < rows_per_block ? args.M - first_row : rows_per_block;
    // Groups of 4 outputs, kStripeSumGroups per thread at once, slots in the fixed order 0, 1, ...
    // (stripe_sum_slots: the same bits whichever block came last).
    const int64_t groups = rows * (k::kStripeTileN / 4);
    // Threads 0 .. kStripeThreads - 1 sum (a block of more threads, the wgmma kernel's, leaves the rest idle here).
    for (int64_t e0 = tid; tid < k::kStripeThreads && e0 < groups; e0 += int64_t{k::kStripeThreads} * k::kStripeSumGroups) {
      k::StripeSumGroup at_group[k::kStripeSumGroups];
      k::StripeFloat4 sums[k::kStripeSumGroups];
      const int count = k::stripe_sum_pass(args.workspace, first_row, nt, e0, groups, args.M, args.n_padded, segments,
                                           at_group, sums);
#pragma unroll
      for (int g = 0; g < k::kStripeSumGroups; ++g) {
        if (g >= count || at_group[g].n >= args.N) continue;  // N % 8 == 0: the group is all in or all out
        __half2* out = reinterpret_cast<__half2*>(args.c + at_group[g].row * args.N + at_group[g].n);
        out[0] = __floats2half2_rn(sums[g].v[0], sums[g].v[1]);
        out[1] = __floats2half2_rn(sums[g].v[2], sums[g].v[3]);
      }
    }
    if (tid == 0) atomicExch(counter, 0u);  // every segment has arrived: ready for the next launch
  }
  __syncthreads();  // last_block_of_column is read by every thread before the next column may rewrite it
}

}  // namespace qgru::cuda
