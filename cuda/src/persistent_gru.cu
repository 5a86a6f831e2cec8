// The persistent GRU recurrence: one launch per cell runs all T steps (design, protocol, exactness:
// qgru/kernels/persistent_gru.h; the same QGRU_HD functions run block by block on the host in
// qgru/kernels/persistent_gru_emulation.h, which test_kernels holds to the reference executor).
// Synchronization, PersistentSync::Grid (a cooperative launch): publish = __syncthreads, then thread 0
// __threadfence + red.release.gpu on the arrival counter; wait = thread 0 spins on ld.acquire.gpu of the counter
// (globaltimer-bounded, __nanosleep between polls), then __syncthreads.
// PersistentSync::Cluster and ClusterDsmem (sm_90, a cluster launch, one cluster per batch slice): every phase after
// the first starts
// with barrier.cluster.arrive.release + barrier.cluster.wait.acquire in every thread (cooperative_groups'
// cluster.sync()): release and acquire at cluster scope order the previous phase's exchange writes of every thread
// of the cluster before this phase's reads, and every thread of the block passes it, so it is the block's barrier
// too. No counter and no spin: the hardware barrier cannot time out, and no cluster waits for another (the error
// word reports only a launch in clusters of another size than the plan's).
// Either way exchange buffers are read with ld.global.cg (L2, never a stale L1 line: a block reads the same buffer
// again two steps later).
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "qgru/kernels/persistent_gru.h"
#include "qgru_cuda/check.h"
#include "persistent_gru_launch.h"
#include "persistent_sync.cuh"

namespace qgru::cuda {

namespace {

// The plan's figures the kernel needs beyond its buffers' (by value: one launch parameter block).
struct PersistentShape {
  int64_t blocks, rows_per_block;
  int32_t r_offset, stage_offset, acc_offset, folds_offset, flag_offset;
  int32_t cluster_blocks;  // Cluster, ClusterDsmem: the blocks a cluster must hold (plan.cluster_blocks); Grid: 0
  int32_t stage_bytes, outbox_offset;  // one staging buffer's bytes; ClusterDsmem's outbox
};

// The block's batch rows of an exchange buffer (rows of chunks_per_row 16-byte chunks, contiguous there) into the
// staging region (rows row_chunks chunks apart: persistent_smem_row_bytes), 16 bytes at a time through L2; the
// thread's chunks walked as (chunk, row) from `walk` (persistent_split_stride over the chunks of a row, divided once
// per launch).
__device__ void stage_rows(const void* source, unsigned char* stage, int32_t batch_rows, int32_t chunks_per_row,
                           int32_t row_chunks, const kernels::PersistentSplitStride& walk) {
  const int4* from = reinterpret_cast<const int4*>(source);
  int4* to = reinterpret_cast<int4*>(stage);
  for (kernels::PersistentSplitWalk c = walk.start; c.major < batch_rows; kernels::persistent_split_walk_advance(c, walk, chunks_per_row)) {
    to[c.major * row_chunks + c.minor] = __ldcg(from + c.major * chunks_per_row + c.minor);  // (row, chunk)
  }
}

// rows·(batch rows) dot products of slice rows [first_row, first_row + rows) against the rows staged at smem +
// stage_at (the staging region, or ClusterDsmem's buffer of the phase), one group of
// kPersistentDotLanes lanes each, into acc; the thread's group takes products g, g + kPersistentDotGroups, ...
// (stride: persistent_split_stride for this phase's rows; no division per product).
template <class Stored, class Acc>
__device__ void block_dots(const kernels::PersistentBuffers<Stored, Acc>& b, const PersistentShape& s, unsigned char* smem,
                           int32_t stage_at, int32_t first_row, int32_t rows, int32_t batch_rows,
                           const kernels::PersistentSplitStride& stride) {
  const int32_t* r_words = reinterpret_cast<const int32_t*>(smem + s.r_offset);
  const int32_t* stage_words = reinterpret_cast<const int32_t*>(smem + stage_at);
  Acc* acc = reinterpret_cast<Acc*>(smem + s.acc_offset);
  const int64_t words = b.H_p * static_cast<int64_t>(sizeof(Stored)) / 4;  // of a row's codes
  const auto row_words = static_cast<int32_t>(kernels::persistent_smem_row_bytes(b.H_p, sizeof(Stored)) / 4);  // stride
  const int lane = static_cast<int>(threadIdx.x) % kernels::kPersistentDotLanes;
  // The group's lanes walk the same products, so they reach every shuffle together; the mask names only them.
  const unsigned group_mask = ((1u << kernels::kPersistentDotLanes) - 1u)
                              << (static_cast<unsigned>(threadIdx.x) % 32u & ~(kernels::kPersistentDotLanes - 1u));
  const auto acc_row = static_cast<int32_t>(3 * b.units_per_block);
  for (kernels::PersistentSplitWalk d = stride.start; d.major < batch_rows; kernels::persistent_split_walk_advance(d, stride, rows)) {
    const int32_t slice_row = first_row + d.minor, n = d.major;  // the product's R row and staged batch row
    Acc sum = kernels::persistent_dot_share<Stored, Acc>(r_words + slice_row * row_words, stage_words + n * row_words,
                                                         words, lane, kernels::kPersistentDotLanes);
    for (int offset = kernels::kPersistentDotLanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(group_mask, sum, offset);
    if (lane == 0) acc[n * acc_row + slice_row] = sum;
  }
}

// ldmatrix on shared memory (8-bit data read as b16 pairs: persistent_gru.h, "int8: a phase's dot products").
__device__ __forceinline__ unsigned smem_address(const void* at) { return static_cast<unsigned>(__cvta_generic_to_shared(at)); }
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_address(at)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(at)));
}
__device__ __forceinline__ void ldmatrix_x1(uint32_t& r, const void* at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(smem_address(at)));
}
// D = A·B + D, int8 operands, int32 accumulators (exact; fragments: PTX ISA, mma.m16n8k32 / m16n8k16 .s8).
__device__ __forceinline__ void mma_s8_k32(int32_t (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_s8_k16(int32_t (&d)[4], const uint32_t (&a)[2], uint32_t b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(b));
}

// The int8 kernel's dot products of a phase on the tensor cores (persistent_mma_plan / _item: warp w takes items w,
// w + 8, ...; each tile's k steps in one or more splits). Two accumulator sets (even and odd k32 steps) halve the
// dependent chain of mma; with one split per tile the sums are stored, with several they are added into acc
// (zeroed by block_zero_acc before the staging's __syncthreads) with shared-memory atomics: int32, exact in any order.
__device__ void block_dots_mma(const kernels::PersistentBuffers<int8_t, int32_t>& b, const PersistentShape& s,
                               unsigned char* smem, int32_t stage_at, int32_t first_row, int32_t rows, int32_t batch_rows,
                               const kernels::PersistentMmaPlan& mp) {
  const unsigned char* r_bytes = smem + s.r_offset;
  const unsigned char* stage_bytes = smem + stage_at;
  int32_t* acc = reinterpret_cast<int32_t*>(smem + s.acc_offset);
  const auto row_bytes = static_cast<int32_t>(kernels::persistent_smem_row_bytes(b.H_p, 1));  // the rows' stride
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const auto acc_row = static_cast<int32_t>(3 * b.units_per_block);
  const int32_t items = mp.tiles << mp.split_shift;
  for (int32_t item = warp; item < items; item += kernels::kPersistentMmaWarps) {
    const kernels::PersistentMmaItem it = kernels::persistent_mma_item(mp, item);
    int32_t even[4] = {0, 0, 0, 0}, odd[4] = {0, 0, 0, 0};
    // The lane's row addresses at the item's first k step; each k32 step is 32 bytes on (the offsets are linear in k0).
    const unsigned char* a_at = r_bytes + kernels::persistent_mma_a_offset(first_row, rows, it.mt, lane, row_bytes, 32 * it.k_begin);
    const unsigned char* b_at = stage_bytes + kernels::persistent_mma_b_offset(batch_rows, it.nt, lane, row_bytes, 32 * it.k_begin);
    int32_t ks = it.k_begin;
    for (; ks + 1 < it.k_end; ks += 2, a_at += 64, b_at += 64) {  // two independent accumulator chains
      uint32_t a0[4], b0[2], a1[4], b1[2];
      ldmatrix_x4(a0, a_at);
      ldmatrix_x2(b0, b_at);
      ldmatrix_x4(a1, a_at + 32);
      ldmatrix_x2(b1, b_at + 32);
      mma_s8_k32(even, a0, b0);
      mma_s8_k32(odd, a1, b1);
    }
    if (ks < it.k_end) {
      uint32_t a0[4], b0[2];
      ldmatrix_x4(a0, a_at);
      ldmatrix_x2(b0, b_at);
      mma_s8_k32(even, a0, b0);
      a_at += 32;
      b_at += 32;
    }
    if (it.tail16) {  // the last split ends at k32 steps' end: a_at and b_at stand at the tail's 16 bytes
      uint32_t a[2], bf;
      ldmatrix_x2(a, a_at);
      ldmatrix_x1(bf, b_at);
      mma_s8_k16(odd, a, bf);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const kernels::PersistentMmaAt at = kernels::persistent_mma_acc_at(it.mt, it.nt, lane, e);
      if (at.row >= rows || at.n >= batch_rows) continue;
      int32_t* to = acc + at.n * acc_row + first_row + at.row;
      if (mp.split_shift == 0) {
        *to = even[e] + odd[e];
      } else {
        atomicAdd(to, even[e] + odd[e]);
      }
    }
  }
}

// ClusterDsmem: 16 or 8 bytes at `local` (this block's shared memory) into the same offset of cluster block `peer`'s
// (mapa gives the peer's address in the cluster's shared window; an ordinary weak store, ordered before the next
// phase's reads by the cluster barrier's release and acquire).
__device__ __forceinline__ void store_to_peer(const unsigned char* from, const unsigned char* local, unsigned peer,
                                              int32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const auto at = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(peer));
  if (bytes == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(from);
    asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(remote), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  } else {
    const uint2 v = *reinterpret_cast<const uint2*>(from);
    asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(remote), "r"(v.x), "r"(v.y) : "memory");
  }
#else
  __trap();  // never launched: ClusterDsmem plans only where the kernel image is sm_90 or newer
#endif
}

// Zeroes the phase's accumulators [batch rows][first_row, first_row + rows) for the splits' atomics.
__device__ void block_zero_acc(int32_t* acc, int32_t acc_row, int32_t first_row, int32_t rows, int32_t batch_rows) {
  for (int32_t n = 0; n < batch_rows; ++n)
    for (int32_t row = static_cast<int32_t>(threadIdx.x); row < rows; row += static_cast<int32_t>(blockDim.x)) {
      acc[n * acc_row + first_row + row] = 0;
    }
}

template <class Stored, class Acc, kernels::PersistentSync kSync>
__global__ void __launch_bounds__(kernels::kPersistentThreads, 1)
    persistent_gru_kernel(const GruCellParamsView view, const kernels::PersistentBuffers<Stored, Acc> b,
                          const PersistentLaunch a, const PersistentShape s) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t H = view.hidden_size, U = b.units_per_block;
  const kernels::PersistentSlice slice = kernels::persistent_block_slice(H, U, b.N, s.rows_per_block, blockIdx.x);
  [[maybe_unused]] int* flag = reinterpret_cast<int*>(smem + s.flag_offset);  // the Grid wait's verdict
  constexpr bool in_clusters = kernels::persistent_in_clusters(kSync), dsmem = kernels::persistent_dsmem(kSync);
  if constexpr (in_clusters) {
    // Launched without the plan's clusters, the barrier would span other blocks (or, outside a cluster launch, only
    // this one: ptxas turns it into the block's barrier), a silent race. Every block sees the same size and returns
    // before any barrier; the host reads the error word and throws.
    const unsigned launched = cluster_blocks_launched();
    if (launched != static_cast<unsigned>(s.cluster_blocks)) {
      if (threadIdx.x == 0 && atomicCAS(a.error, 0, kernels::kPersistentWrongCluster) == 0) {
        a.error[1] = static_cast<int>(blockIdx.x);
        a.error[2] = static_cast<int>(launched);
      }
      return;
    }
  }
  // R's slice, once: 3U rows of H_p codes, 16 bytes at a time (rows of units past H are zero), rows
  // persistent_smem_row_bytes apart (the 16 bytes between them are never read).
  const auto* R = static_cast<const Stored*>(a.R);
  const auto chunks_per_row = static_cast<int32_t>(b.H_p * static_cast<int64_t>(sizeof(Stored)) / 16);
  const auto row_chunks = static_cast<int32_t>(kernels::persistent_smem_row_bytes(b.H_p, sizeof(Stored)) / 16);
  {
    int4* to = reinterpret_cast<int4*>(smem + s.r_offset);
    for (int64_t i = threadIdx.x; i < 3 * U * chunks_per_row; i += blockDim.x) {
      const int64_t row = i / chunks_per_row, chunk = i % chunks_per_row;
      const int64_t source = kernels::persistent_r_source_row(H, U, slice, row);
      to[row * row_chunks + chunk] =
          source < 0 ? make_int4(0, 0, 0, 0) : __ldg(reinterpret_cast<const int4*>(R + source * b.H_p) + chunk);
    }
  }
  // B-1 / B-2's step-invariant constants of the block's units, folded once (the first wait's __syncthreads orders
  // these writes before any element reads them; the explicit one below says so without relying on it).
  auto* folds = reinterpret_cast<GruUnitFolds*>(smem + s.folds_offset);
  kernels::persistent_fill_folds<Stored, Acc>(view, b, slice, folds, static_cast<int32_t>(threadIdx.x),
                                              static_cast<int32_t>(blockDim.x));
  [[maybe_unused]] Stored* outbox = dsmem ? reinterpret_cast<Stored*>(smem + s.outbox_offset) : nullptr;
  if constexpr (dsmem) {
    // Every staging buffer and the outbox zeroed: the codes of units past H stay 0, as in the exchange buffers (not
    // needed for the sums: they meet R's zero columns; it keeps the staging deterministic). What matters is the
    // cluster barrier after it: no block pushes into another before that one has started (and zeroed).
    // (Words: stage_bytes is a multiple of 16, the outbox's NB·U·sizeof(Stored) bytes of 8, U >= 8.)
    const auto stage_words = static_cast<int32_t>(kernels::persistent_stage_buffers(b.phases_per_step) * s.stage_bytes / 4);
    const auto outbox_words = static_cast<int32_t>(s.rows_per_block * U * static_cast<int64_t>(sizeof(Stored)) / 4);
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < stage_words; i += static_cast<int32_t>(blockDim.x)) {
      reinterpret_cast<int32_t*>(smem + s.stage_offset)[i] = 0;
    }
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < outbox_words; i += static_cast<int32_t>(blockDim.x)) {
      reinterpret_cast<int32_t*>(smem + s.outbox_offset)[i] = 0;
    }
    cluster_barrier();  // also the block's barrier for the folds
  }
  __syncthreads();
  const Acc* acc = reinterpret_cast<const Acc*>(smem + s.acc_offset);
  // The thread's elements of the slice, split into (unit, row) once for the whole launch.
  const kernels::PersistentSplitStride elements = kernels::persistent_element_stride(slice, threadIdx.x, blockDim.x);
  // The thread's staging chunks, (chunk, row) from thread tid stepping by the block, divided once.
  const kernels::PersistentSplitStride stage_walk =
      kernels::persistent_split_stride(static_cast<int32_t>(threadIdx.x), static_cast<int32_t>(blockDim.x), chunks_per_row);
  // The dot walk's start and step for each kind of phase (part 0, and part 1 of a two-phase step), divided once.
  const auto group = static_cast<int32_t>(threadIdx.x) / kernels::kPersistentDotLanes;
  // (Two named values, not an array: an array indexed by the phase's part would live in local memory.)
  const auto dot_stride_of_part = [&](int part) {
    const kernels::PersistentPhaseInfo kind = kernels::persistent_phase_info(part, b.phases_per_step, b.T + 1, b.reverse, U);
    return kernels::persistent_split_stride(group, kernels::kPersistentDotGroups, static_cast<int32_t>(kind.rows));
  };
  const kernels::PersistentSplitStride dot_stride_a = dot_stride_of_part(0), dot_stride_b = dot_stride_of_part(1);
  // ClusterDsmem: the block's pushes and the thread's items in them, once for the launch (every phase pushes the same
  // shape; only the buffer, push.push_at, is set per phase).
  [[maybe_unused]] kernels::PersistentPushes push{};
  [[maybe_unused]] kernels::PersistentPushStride push_walk{};
  if constexpr (dsmem) {
    push = kernels::persistent_phase_pushes(kernels::persistent_phase_info(0, b.phases_per_step, b.T, b.reverse, U),
                                            b.phases_per_step, slice, U, sizeof(Stored), b.H_p, s.cluster_blocks,
                                            s.stage_offset, s.stage_bytes);
    push_walk = kernels::persistent_push_stride(push, static_cast<int32_t>(threadIdx.x), static_cast<int32_t>(blockDim.x));
  }
  // Phase k: wait for every block's phases before it, stage the buffer it reads, the dot products, the units, publish.
  for (int64_t k = 0; k < b.T * b.phases_per_step; ++k) {
    const kernels::PersistentPhaseInfo ph = kernels::persistent_phase_info(k, b.phases_per_step, b.T, b.reverse, U);
    if constexpr (in_clusters) {
      if (k > 0) cluster_barrier();  // phase 0 reads h0, written before the launch
    } else {
      if (!wait_arrivals(a, kernels::persistent_arrivals_before(k, s.blocks), k, flag)) return;
    }
    // The staging the phase reads: the one region, or ClusterDsmem's buffer, which the cluster's pushes of the
    // phase before filled (phase 0: h0, staged from the exchange buffer as by the other meetings).
    const int32_t stage_at = s.stage_offset + (dsmem ? kernels::persistent_stage_buffer(ph) * s.stage_bytes : 0);
    if (!dsmem || k == 0) {
      stage_rows(kernels::persistent_stage_source(b, ph, slice), smem + stage_at, static_cast<int32_t>(slice.rows),
                 chunks_per_row, row_chunks, stage_walk);
    }
    // int32: first_row + rows <= 3U and slice.rows <= NB (plan sizes, far below 2^31).
    const auto first_row = static_cast<int32_t>(ph.first_row), rows = static_cast<int32_t>(ph.rows);
    const auto batch_rows = static_cast<int32_t>(slice.rows);
    if constexpr (sizeof(Stored) == 1) {  // int8: the tensor cores
      const kernels::PersistentMmaPlan mp = kernels::persistent_mma_plan(rows, batch_rows, static_cast<int32_t>(b.H_p));
      if (mp.split_shift > 0) {
        block_zero_acc(reinterpret_cast<int32_t*>(smem + s.acc_offset), static_cast<int32_t>(3 * U), first_row, rows, batch_rows);
      }
      __syncthreads();
      block_dots_mma(b, s, smem, stage_at, first_row, rows, batch_rows, mp);
    } else {
      __syncthreads();
      block_dots<Stored, Acc>(b, s, smem, stage_at, first_row, rows, batch_rows,
                              kernels::persistent_split_stride_select(ph.part == 0, dot_stride_a, dot_stride_b));
    }
    __syncthreads();
    kernels::persistent_phase_elements<Stored, Acc>(view, b, slice, ph, acc, folds, elements, outbox);
    if constexpr (kSync == kernels::PersistentSync::Grid) publish(a);
    if constexpr (dsmem) {
      // The block's new codes into the staging buffer the next phase reads, in every block of the cluster (the last
      // phase has no next: no push, so no block writes into one that has left).
      if (k + 1 < b.T * b.phases_per_step) {
        __syncthreads();  // the outbox written
        push.push_at = kernels::persistent_push_offset(ph, b.phases_per_step, s.stage_offset, s.stage_bytes);
        for (kernels::PersistentPushWalk w = push_walk.start; w.peer < push.peers;
             kernels::persistent_push_walk_advance(w, push_walk, push)) {
          const kernels::PersistentPush item = kernels::persistent_push_at(push, w);
          store_to_peer(reinterpret_cast<const unsigned char*>(outbox) + item.from, smem + item.to,
                        static_cast<unsigned>(item.peer), push.chunk_bytes);
        }
      }
    }
  }
}

PersistentShape shape_of(const kernels::PersistentGruPlan& plan) {
  return {plan.blocks,
          plan.rows_per_block,
          static_cast<int32_t>(plan.smem.r_offset),
          static_cast<int32_t>(plan.smem.stage_offset),
          static_cast<int32_t>(plan.smem.acc_offset),
          static_cast<int32_t>(plan.smem.folds_offset),
          static_cast<int32_t>(plan.smem.flag_offset),
          static_cast<int32_t>(plan.cluster_blocks),
          static_cast<int32_t>(plan.smem.stage_bytes),
          static_cast<int32_t>(plan.smem.outbox_offset)};
}

}  // namespace

namespace {

// The kernel instantiation of the plan's operand width and meeting.
const void* kernel_of(const kernels::PersistentGruPlan& plan) {
  using kernels::PersistentSync;
  const bool int8 = plan.path == kernels::GruGemmPath::Int8;
  if (plan.sync == PersistentSync::Cluster) {
    return int8 ? reinterpret_cast<const void*>(persistent_gru_kernel<int8_t, int32_t, PersistentSync::Cluster>)
                : reinterpret_cast<const void*>(persistent_gru_kernel<int16_t, int64_t, PersistentSync::Cluster>);
  }
  if (plan.sync == PersistentSync::ClusterDsmem) {
    return int8 ? reinterpret_cast<const void*>(persistent_gru_kernel<int8_t, int32_t, PersistentSync::ClusterDsmem>)
                : reinterpret_cast<const void*>(persistent_gru_kernel<int16_t, int64_t, PersistentSync::ClusterDsmem>);
  }
  return int8 ? reinterpret_cast<const void*>(persistent_gru_kernel<int8_t, int32_t, PersistentSync::Grid>)
              : reinterpret_cast<const void*>(persistent_gru_kernel<int16_t, int64_t, PersistentSync::Grid>);
}

}  // namespace

kernels::PersistentDevice persistent_device() {
  int device = 0, sm_count = 0, smem_optin = 0, cooperative = 0, cluster_launch = 0;
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device));
  kernels::PersistentDevice d;
  d.sm_count = sm_count;
  d.smem_optin_bytes = smem_optin;
  d.cooperative_launch = cooperative != 0;
  if (cluster_launch != 0) {
    // The image the device runs must hold the barrier (sm_90 or newer), not the sm_80 code's trap.
    cudaFuncAttributes attributes{};
    QGRU_CUDA_CHECK(cudaFuncGetAttributes(
        &attributes, reinterpret_cast<const void*>(
                         persistent_gru_kernel<int8_t, int32_t, kernels::PersistentSync::Cluster>)));
    // ptxVersion too: an image of compute_80 PTX alone, JIT-compiled for sm_90, reports binaryVersion 90 but holds
    // the trap.
    if (attributes.binaryVersion >= 90 && attributes.ptxVersion >= 90) d.max_cluster_blocks = kMaxClusterBlocks;
  }
  return d;
}

namespace {

// The kernel's dynamic shared memory limit (a launch asking more fails) is one value per kernel and device for the
// whole process: raised to the plan's when below it, never lowered, under one lock. Setting each plan's own value
// would let a thread's smaller plan lower it between another thread's setting and launch (two executors, two
// threads), and that launch would fail.
void allow_smem(const kernels::PersistentGruPlan& plan) {
  static std::mutex lock;
  const std::lock_guard<std::mutex> hold(lock);
  cudaFuncAttributes attributes{};
  QGRU_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel_of(plan)));
  if (kernels::persistent_in_clusters(plan.sync) && attributes.nonPortableClusterSizeAllowed == 0) {  // once
    QGRU_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(plan), cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  if (attributes.maxDynamicSharedSizeBytes >= plan.smem.total_bytes) return;
  QGRU_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(plan), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(plan.smem.total_bytes)));
}

// The launch configuration of a Cluster or ClusterDsmem plan: plan.blocks in clusters of plan.cluster_blocks.
struct PlanClusterLaunch : ClusterLaunch {
  PlanClusterLaunch(const kernels::PersistentGruPlan& plan, cudaStream_t stream)
      : ClusterLaunch(plan.blocks, plan.cluster_blocks, plan.threads, static_cast<size_t>(plan.smem.total_bytes), stream) {}
};

}  // namespace

int persistent_active_clusters(const kernels::PersistentGruPlan& plan) {
  allow_smem(plan);
  const PlanClusterLaunch launch(plan, nullptr);
  int clusters = 0;
  // A cluster that cannot fit may be reported as 0 clusters or as an error (cudaErrorInvalidClusterSize): either is
  // a refusal; that error is not sticky, and is cleared so the next call does not see it.
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel_of(plan), &launch.config) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

std::string persistent_occupancy(const kernels::PersistentGruPlan& plan) {
  if (kernels::persistent_in_clusters(plan.sync)) {
    return kernels::persistent_cluster_occupancy_refusal(plan, persistent_active_clusters(plan));
  }
  allow_smem(plan);
  int blocks_per_sm = 0, device = 0, sm_count = 0;
  QGRU_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel_of(plan), plan.threads,
                                                                static_cast<size_t>(plan.smem.total_bytes)));
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  return kernels::persistent_occupancy_refusal(plan, blocks_per_sm, sm_count);
}

template <class Stored, class Acc>
void launch_persistent_gru(const kernels::PersistentGruPlan& plan, const GruCellParamsView& device_view,
                           const kernels::PersistentBuffers<Stored, Acc>& buffers, const PersistentLaunch& launch,
                           cudaStream_t stream) {
  GruCellParamsView view = device_view;
  kernels::PersistentBuffers<Stored, Acc> b = buffers;
  PersistentLaunch a = launch;
  PersistentShape shape = shape_of(plan);
  void* params[] = {&view, &b, &a, &shape};
  // persistent_occupancy raised the limit for this plan already (per device: asked again, it costs a lookup).
  allow_smem(plan);
  if (kernels::persistent_in_clusters(plan.sync)) {
    // A cluster's blocks are resident together by construction; clusters never wait for one another.
    const PlanClusterLaunch cluster(plan, stream);
    QGRU_CUDA_CHECK(cudaLaunchKernelExC(&cluster.config, kernel_of(plan), params));
    return;
  }
  // Cooperative: the launch fails (instead of deadlocking) when the blocks cannot all be resident.
  QGRU_CUDA_CHECK(cudaLaunchCooperativeKernel(kernel_of(plan), dim3(static_cast<unsigned>(plan.blocks)),
                                              dim3(static_cast<unsigned>(plan.threads)), params,
                                              static_cast<size_t>(plan.smem.total_bytes), stream));
}

template void launch_persistent_gru<int8_t, int32_t>(const kernels::PersistentGruPlan&, const GruCellParamsView&,
                                                     const kernels::PersistentBuffers<int8_t, int32_t>&,
                                                     const PersistentLaunch&, cudaStream_t);
template void launch_persistent_gru<int16_t, int64_t>(const kernels::PersistentGruPlan&, const GruCellParamsView&,
                                                      const kernels::PersistentBuffers<int16_t, int64_t>&,
                                                      const PersistentLaunch&, cudaStream_t);

}  // namespace qgru::cuda
