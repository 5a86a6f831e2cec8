// The wgmma quantized linear (W4A16 / W8A16) for up to 1024 rows a launch on Hopper: C[M, N] = A[M, K] · W[K, N]
// with W in the stripes layout. Read qgru/kernels/stripe_wgmma.h first (the product turned around, the operands'
// layouts, the two warpgroups, the overlap, the synchronization), then stripe_linear.h (tiles, words, stripes, the
// reduction).
//
// One block is two warpgroups (8 warps). It streams its stripe of 64 x 128 weight tiles through the stripes
// kernel's 4-stage cp.async pipeline, with the row block's A tile (64 or 128 rows x 64 inputs) in the 128-byte
// swizzled layout. Per tile every lane dequantizes its pair's words in registers (the stripes kernel's
// dequantization, half of a stripes lane's words) into the A operand of wgmma.mma_async m64nRk16: per k16 step
// each warpgroup issues one instruction for its pair g (outputs 32w + 16g .. + 15 of each warp tile w), B read by
// the tensor cores from the stage through a descriptor. The column epilogue is the stripes kernel's
// (stripe_column_sum.cuh).
//
// wgmma needs the architecture-specific target: cuda/CMakeLists.txt builds this file for sm_80 and sm_90a. On
// sm_80 the kernel body is a trap and prepare_stripe_wgmma answers 0, so the layer never launches it there. The
// PTX instructions are restated on the host by test/unit/kernels/stripe_wgmma_test.cpp.
#include <cuda_fp16.h>

#include <string>

#include "qgru/kernels/quant_linear_tile.h"
#include "qgru/kernels/stripe_wgmma.h"
#include "qgru_cuda/check.h"
#include "quant_linear_launch.h"
#include "stripe_column_sum.cuh"
#include "stripe_kernel_entry.cuh"

namespace qgru::cuda {

namespace {

namespace k = qgru::kernels;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QGRU_WGMMA_DEVICE 1
#else
#define QGRU_WGMMA_DEVICE 0
#endif

#if QGRU_WGMMA_DEVICE
// D[64 x 64] += A[64 x 16] (registers) · B[16 x 64] (shared memory, b_desc), fp32 accumulators; asynchronous
// (completed by wgmma_commit_group + wgmma_wait_group). scale-d is the predicate p = 1: D accumulates.
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "\tsetp.ne.b32 p, %37, 0;\n"
      "\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n\t}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}
// D[64 x 128] += A[64 x 16] (registers) · B[16 x 128] (shared memory, b_desc), fp32 accumulators; asynchronous
// (completed by wgmma_commit_group + wgmma_wait_group). scale-d is the predicate p = 1: D accumulates.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t b_desc) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "\tsetp.ne.b32 p, %69, 0;\n"
      "\twgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n\t}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
}

// Orders this thread's register writes (A fragments, zeroed accumulators) before the wgmma that read them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N of this warpgroup's committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// This thread's earlier shared-memory writes (the stage's cp.async copies, landed) made visible to the async proxy
// through which wgmma reads its shared operand.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// The compiler sees the accumulator read and written here, after the wait: it cannot move a read of the value an
// asynchronous wgmma wrote to before the wait.
__device__ __forceinline__ void keep_register(float& x) { asm volatile("" : "+f"(x)::"memory"); }

template <int Rows>
__device__ __forceinline__ void wgmma_block_rows(float (&d)[Rows / 2], const uint32_t (&a)[4], uint64_t b_desc) {
  if constexpr (Rows == 64) {
    wgmma_m64n64k16(d, a, b_desc);
  } else {
    wgmma_m64n128k16(d, a, b_desc);
  }
}
#endif  // QGRU_WGMMA_DEVICE

// Blocks per SM the registers are sized for: two at 64 rows (65,536 / (2 · 256) = 128 registers a thread, 32 of
// them accumulators), one at 128 rows (64 accumulators and two sets of fragments: about 245 registers; two blocks would
// spill).
constexpr int wgmma_min_blocks(int rows) { return rows == 128 ? 1 : 2; }

template <int Bits, int Rows>
__global__ void __launch_bounds__(k::kWgmmaThreads, wgmma_min_blocks(Rows)) stripe_wgmma_kernel(const StripeLinearArgs args) {
#if QGRU_WGMMA_DEVICE
  constexpr int kTileBytes = k::stripe_tile_bytes(Bits);
  constexpr int kStageBytes = k::wgmma_stage_bytes(Bits, Rows);
  constexpr int kAStageBytes = k::wgmma_a_stage_bytes(Rows);
  constexpr int kPairWords = Bits / 2;  // a lane's words of one pair (4-bit: 2, 8-bit: 4)
  constexpr int kAcc = Rows / 2;        // accumulators per lane (wgmma_acc_position)
  extern __shared__ unsigned char smem_raw[];  // k::wgmma_smem_bytes(Bits, Rows): the stages and the alignment slack
  __shared__ int last_block_of_column;
  // The stages from the first 1024-byte boundary (the 128-byte swizzle is a function of the address bits 4-9).
  const uint32_t raw_address = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t skip = (k::kWgmmaSmemAlign - raw_address % k::kWgmmaSmemAlign) % k::kWgmmaSmemAlign;
  unsigned char* smem = smem_raw + skip;
  const uint32_t smem_address = raw_address + skip;

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const int pair = tid / 128, warp = (tid / 32) % 4;  // warpgroup = pair; warp of the stripes tile
  const bool loads_words = pair == 0;                 // warpgroup 0 copies the words and the group rows
  const k::StripeGridBlock at_grid = k::stripe_grid_block(static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(args.m_blocks));
  const int64_t block = at_grid.block, mb = at_grid.row_block;
  const int64_t first_row = mb * Rows;
  const k::StripeWalk walk = k::stripe_walk(block, args.tiles, args.tiles_per_block, args.k_tiles, args.group_size);
  const uint64_t policy = k::stripe_weight_policy(args.m_blocks == 1);  // one row block: each weight byte read once

  const auto a_stage = [&](int slot) { return smem + slot * kStageBytes; };
  const auto w_stage = [&](int slot) { return reinterpret_cast<uint32_t*>(smem + slot * kStageBytes + kAStageBytes); };
  const auto p_stage = [&](int slot) {
    return reinterpret_cast<uint32_t*>(smem + slot * kStageBytes + kAStageBytes + kTileBytes);
  };
  const k::StripeSources sources{args.words, args.a, args.params, args.M, static_cast<int32_t>(args.K), args.n_padded};
  const uint16_t* a_rows[Rows * 8 / k::kWgmmaThreads];
  k::wgmma_a_rows<Rows>(sources, first_row, tid, a_rows);
  const auto load = [&](const k::StripeCursor& at, int slot) {
    if (loads_words) {
      k::stripe_load_tile_words<Bits>(sources, at, tid, nullptr, w_stage(slot), policy);
      k::stripe_load_tile_params(sources, walk, at, tid, p_stage(slot));
    }
    k::wgmma_load_a<Rows>(sources, a_rows, at, tid, a_stage(slot));
  };

  float acc[kAcc];
#pragma unroll
  for (int e = 0; e < kAcc; ++e) acc[e] = 0.0f;
  k::WgmmaPairGroups<Bits> groups{};

  // kAhead tiles are loaded ahead (stripe_wgmma.h, wgmma_tiles_ahead): the slot a load refills is that of the tile
  // kStripeStages - kAhead back, whose wgmma are complete when the block's barrier passes.
  constexpr bool kOverlap = k::wgmma_overlaps(Rows);
  constexpr int kAhead = k::wgmma_tiles_ahead(Rows);
  k::StripeCursor at = k::stripe_walk_start(walk);
  k::StripeCursor ahead = at;
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    if (ahead.t < walk.end) load(ahead, i);
    k::copy_async_commit();
    k::stripe_walk_advance(walk, ahead);
  }
  // One tile with its fragments in `a`. Without overlap its instructions complete before it returns; with overlap
  // they are left running through the next tile's preparation, whose fragments go to the other set, so no register
  // a running wgmma reads is redefined (a definition inside a pipeline stage would make ptxas serialize them, C7513).
  const auto tile = [&](int i, uint32_t (&a)[2][2][4]) {
    k::copy_async_wait<kAhead - 1>();  // tile at.t's group has landed
    fence_proxy_async_shared();        // ... visible to the tensor cores' reads
    __syncthreads();                   // ... for every thread; the slot the next load refills is free (its wgmma
                                       // completed before the barrier: the last tile's wait in every thread)
    if (ahead.t < walk.end) load(ahead, (i + kAhead) % k::kStripeStages);
    k::copy_async_commit();
    k::stripe_walk_advance(walk, ahead);

    const int slot = i % k::kStripeStages;
    const int64_t nt = at.nt;
    const uint32_t a_tile = smem_address + static_cast<uint32_t>(slot * kStageBytes);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (k::stripe_cursor_needs_params(walk, at, h)) groups = k::wgmma_pair_groups_from_stage<Bits>(p_stage(slot), h, warp, lane, pair);
      uint32_t words[kPairWords];
      const uint32_t* lane_words = w_stage(slot) + k::wgmma_pair_words_offset(Bits, warp, h, lane, pair);
      if constexpr (Bits == 4) {
        const uint2 v = *reinterpret_cast<const uint2*>(lane_words);
        words[0] = v.x;
        words[1] = v.y;
      } else {
        const uint4 v = *reinterpret_cast<const uint4*>(lane_words);
        words[0] = v.x;
        words[1] = v.y;
        words[2] = v.z;
        words[3] = v.w;
      }
      k::wgmma_dequant_pair<Bits>(words, groups, a[h]);
    }
    wgmma_fence();
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int s = 0; s < 2; ++s) wgmma_block_rows<Rows>(acc, a[h][s], k::wgmma_b_descriptor(a_tile, 2 * h + s));
    wgmma_commit_group();
    if constexpr (kOverlap) {
      wgmma_wait_group<1>();  // the previous tile's instructions are done: its fragments' registers may be rewritten
    } else {
      wgmma_wait_group<0>();
    }

    if (k::stripe_cursor_segment_end(walk, at)) {  // the block's part of column nt ends here
      wgmma_wait_group<0>();
#pragma unroll
      for (int e = 0; e < kAcc; ++e) keep_register(acc[e]);
      const k::StripeSegment column = k::stripe_cursor_segment(walk, at);
      const int64_t segment = column.segment;
      const bool direct = column.segments == 1;  // the column is this block's alone: fp16 C straight away
#pragma unroll
      for (int e = 0; e < kAcc; ++e) {
        const k::StripeRowCol rc = k::wgmma_acc_position(warp, pair, lane, e);
        const int64_t m = first_row + rc.row, n = nt * k::kStripeTileN + rc.col;
        if (m >= args.M) continue;
        if (direct) {
          if (n < args.N) args.c[m * args.N + n] = __half_as_ushort(__float2half_rn(acc[e]));
        } else {
          args.workspace[k::stripe_partial_index(segment, m, n, args.M, args.n_padded)] = acc[e];
        }
      }
      if (!direct) stripe_column_sum(args, mb, Rows, nt, column.segments, tid, last_block_of_column);
#pragma unroll
      for (int e = 0; e < kAcc; ++e) acc[e] = 0.0f;
    }
    k::stripe_walk_advance(walk, at);
  };
  uint32_t a0[2][2][4];  // [half][k-step][register]
  if constexpr (kOverlap) {
    uint32_t a1[2][2][4];  // the second set: tiles alternate between them
    for (int i = 0; at.t < walk.end; i += 2) {
      tile(i, a0);
      if (at.t >= walk.end) break;
      tile(i + 1, a1);
    }
    wgmma_wait_group<0>();
  } else {
    for (int i = 0; at.t < walk.end; ++i) tile(i, a0);
  }
  k::copy_async_wait<0>();
#else
  static_cast<void>(args);
  __trap();  // never launched: prepare_stripe_wgmma answers 0 on a device without sm_90a code
#endif
}

// The kernel for (bits, rows of a row block), with its dynamic shared memory (bytes).
template <int Bits, int Rows>
StripeKernelEntry wgmma_kernel_entry(const char* name) {
  return {stripe_wgmma_kernel<Bits, Rows>, k::wgmma_smem_bytes(Bits, Rows), name};
}
StripeKernelEntry wgmma_kernel(int bits, int rows) {
  if (bits == 4) {
    if (rows == 64) return wgmma_kernel_entry<4, 64>("stripe_wgmma_kernel<4, 64>");
    if (rows == 128) return wgmma_kernel_entry<4, 128>("stripe_wgmma_kernel<4, 128>");
  } else if (bits == 8) {
    if (rows == 64) return wgmma_kernel_entry<8, 64>("stripe_wgmma_kernel<8, 64>");
    if (rows == 128) return wgmma_kernel_entry<8, 128>("stripe_wgmma_kernel<8, 128>");
  } else {
    throw NotSupported("wgmma linear with " + std::to_string(bits) + "-bit codes (kernels exist for 4 and 8)");
  }
  throw Error("wgmma linear: no kernel for row blocks of " + std::to_string(rows) + " rows");
}

}  // namespace

std::string wgmma_unavailable_reason() {
  int device = 0, major = 0, minor = 0;
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) {
    return "wgmma kernel: built for sm_90a (compute capability 9.0), this device is " + std::to_string(major) + "." +
           std::to_string(minor);
  }
  return "";
}

int prepare_stripe_wgmma(int bits, int rows) {
  const StripeKernelEntry entry = wgmma_kernel(bits, rows);
  if (!wgmma_unavailable_reason().empty()) return 0;
  return prepare_stripe_kernel(entry, k::kWgmmaThreads);
}

void launch_stripe_wgmma(const StripeLinearArgs& args, int bits, int rows, int64_t blocks, void* stream) {
  launch_stripe_kernel(wgmma_kernel(bits, rows), k::kWgmmaThreads, args, blocks, k::wgmma_m_blocks(args.M, rows),
                       "wgmma linear", stream);
}

}  // namespace qgru::cuda
