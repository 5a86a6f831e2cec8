// The stripes quantized linear for small batches (W4A16 / W8A16): C[M, N] = A[M, K] · W[K, N] with W in the
// repacked layout of qgru/kernels/stripe_linear.h (read that header first: tiles, per-lane words, stripes,
// the fixed-order reduction).
//
// One block of 4 warps streams a contiguous stripe of 64 x 128 weight tiles through a 4-stage cp.async
// pipeline for a row block of 16, 32 or 64 rows of A (MFrags m16 fragments: stripe_m_frags; up to 64 rows a
// launch has one row block, so the weights get an L2 evict-first policy: each byte is read once per launch;
// with more row blocks, evict-normal; A and the group parameters with the default policy, A is shared by every
// block). Per tile and k32 half every lane takes its
// words with one (4-bit) or two (8-bit) 128-bit shared loads, dequantizes them in registers straight into
// mma.sync m16n8k16 B fragments, used by all MFrags A fragments (stripe_dequant_lane: LOP3/PRMT and packed-half arithmetic, scale and zero
// fused; the group's scale and zero point are unpacked into their packed-half operands, StripeLaneGroups, only
// where a group row starts, and stay in registers across the group's tiles), takes A through ldmatrix.x4 and
// accumulates in fp32 on the tensor cores. At the end of its part of a
// column a block stores fp16 C directly (the column is its alone) or writes fp32 partial sums to its slot,
// and the last block of the column to arrive sums the slots in fixed order (stripe_linear.h).
//
// Per-element work lives in stripe_linear.h (QGRU_HD, run by the CPU tests: the stage loads, the lane's words
// and parameters, the dequantization, the epilogue's positions); this file sequences it and holds the two
// device-only instructions the host emulation restates from the PTX ISA (ldmatrix, mma).
#include <cuda_fp16.h>

#include <string>

#include "qgru/kernels/quant_linear_tile.h"
#include "qgru/kernels/stripe_linear.h"
#include "qgru_cuda/check.h"
#include "quant_linear_launch.h"
#include "stripe_column_sum.cuh"
#include "stripe_kernel_entry.cuh"

namespace qgru::cuda {

namespace {

namespace k = qgru::kernels;

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], const void* smem_row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(address));
}

// D = A · B + D, fp16 operands, fp32 accumulators (fragments: stripe_linear.h and the PTX ISA).
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Blocks per SM the register budget is sized for: four at two m16 fragments (32 accumulators), three at four
// fragments (64 fp32 accumulators per lane; 65,536 / (3 · 128) = 170 registers, no spill) where shared memory allows
// only three of its 56-72 KiB blocks anyway (H200; two on an A100). The one-fragment kernel (M <= 16, bound by
// issue) is declared for three too, yet still runs four: with the ceiling of 170 instead of 128 ptxas keeps the
// thread's row and column of A across tiles instead of recomputing them (sm_90: 206 instructions in the cheapest
// tile against 213, at 126 registers, docs/benchmarks/cuda.md), and 126 registers of 128 threads leave room for
// four blocks an SM; scripts/check_cuda_spills.sh fails the build's check if it ever takes more than 128.
constexpr int stripe_min_blocks(int m_frags) { return m_frags == 2 ? 4 : 3; }

template <int Bits, int MFrags>
__global__ void __launch_bounds__(k::kStripeThreads, stripe_min_blocks(MFrags)) stripe_linear_kernel(const StripeLinearArgs args) {
  constexpr int kTileBytes = k::stripe_tile_bytes(Bits);
  constexpr int kStageBytes = k::stripe_stage_bytes(Bits, MFrags);
  constexpr int kWordsPerLane = k::stripe_words_per_lane(Bits);
  constexpr int kRows = k::kStripeTileM * MFrags;  // rows of the block's row block
  static_assert(k::kStripeTileM * k::kStripeTileK / 8 == k::kStripeThreads, "one A chunk per thread and fragment");
  extern __shared__ __align__(128) unsigned char smem[];  // k::stripe_smem_bytes(Bits, MFrags)
  __shared__ int last_block_of_column;

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  // The block's stripe and row block (rows kRows·mb ..), row block fastest in the one-dimensional grid.
  const k::StripeGridBlock at_grid = k::stripe_grid_block(static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(args.m_blocks));
  const int64_t block = at_grid.block, mb = at_grid.row_block;
  // The stripe's tiles in order, (column, k tile, group rows) advanced per tile without a division; 32-bit
  // indices (stripe_linear.h, kStripeMaxIndex).
  const k::StripeWalk walk = k::stripe_walk(block, args.tiles, args.tiles_per_block, args.k_tiles, args.group_size);
  const uint64_t policy = k::stripe_weight_policy(args.m_blocks == 1);  // one row block: each weight byte read once

  const auto w_stage = [&](int slot) { return smem + slot * kStageBytes; };
  const auto a_stage = [&](int slot) { return reinterpret_cast<uint16_t*>(smem + slot * kStageBytes + kTileBytes); };
  const auto p_stage = [&](int slot) {
    return reinterpret_cast<uint32_t*>(smem + slot * kStageBytes + kTileBytes + k::stripe_a_stage_bytes(MFrags));
  };

  const k::StripeSources sources{args.words, args.a, args.params, args.M, static_cast<int32_t>(args.K), args.n_padded};
  const uint16_t* a_rows[MFrags];
#pragma unroll
  for (int f = 0; f < MFrags; ++f) a_rows[f] = k::stripe_a_row(sources, mb * MFrags + f, tid);
  const auto stage = [&](int slot) { return k::StripeStage{reinterpret_cast<uint32_t*>(w_stage(slot)), a_stage(slot), p_stage(slot)}; };
  // Issues thread tid's copies of the cursor's tile into stage `slot`; `words` is the thread's first chunk of the
  // tile (stripe_tile_thread_words). The one-fragment kernel (M <= 16, bound by issue) steps it one tile per
  // advance of the load cursor; the others, at their register limit, pass null and let the load form the address
  // from the tile's index.
  const auto load = [&](const k::StripeCursor& at, const uint32_t* words, int slot) {
    k::stripe_load_tile<Bits, MFrags>(sources, a_rows, walk, at, tid, MFrags == 1 ? words : nullptr, stage(slot), policy);
  };

  float acc[MFrags][4][4];  // [m16 fragment][n fragment][element]
#pragma unroll
  for (int f = 0; f < MFrags; ++f)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[f][j][e] = 0.0f;
  // The lane's group operands, prepared where a group row starts and kept across the group's tiles (the first
  // tile of a stripe always starts one: segment_start).
  k::StripeLaneGroups<Bits> groups{};

  k::StripeCursor at = k::stripe_walk_start(walk);  // the tile computed
  k::StripeCursor ahead = at;                       // the tile loaded, kStripeStages - 1 ahead
  const uint32_t* ahead_words = MFrags == 1 ? k::stripe_tile_thread_words<Bits>(sources, ahead.t, tid) : nullptr;
#pragma unroll
  for (int i = 0; i < k::kStripeStages - 1; ++i) {
    if (ahead.t < walk.end) load(ahead, ahead_words, i);
    k::copy_async_commit();
    k::stripe_walk_advance(walk, ahead);
    if constexpr (MFrags == 1) ahead_words += k::stripe_tile_words(Bits);
  }
  for (int i = 0; at.t < walk.end; ++i, k::stripe_walk_advance(walk, at)) {
    k::copy_async_wait<k::kStripeStages - 2>();  // tile at.t's group has landed
    __syncthreads();                                 // ... for every thread; the slot of tile at.t - 1 is free
    if (ahead.t < walk.end) load(ahead, ahead_words, (i + k::kStripeStages - 1) % k::kStripeStages);
    k::copy_async_commit();
    k::stripe_walk_advance(walk, ahead);
    if constexpr (MFrags == 1) ahead_words += k::stripe_tile_words(Bits);  // the walk steps one tile: t + 1

    const int slot = i % k::kStripeStages;
    const int64_t nt = at.nt;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (k::stripe_cursor_needs_params(walk, at, h)) groups = k::stripe_lane_groups_from_stage<Bits>(p_stage(slot), h, warp, lane);
      uint32_t words[kWordsPerLane];
      const uint32_t* stage_words = reinterpret_cast<const uint32_t*>(w_stage(slot));
#pragma unroll
      for (int q = 0; q < kWordsPerLane / 4; ++q) {  // one 128-bit shared load per 16-byte group
        const uint4 v = *reinterpret_cast<const uint4*>(stage_words + k::stripe_lane_group_offset(Bits, warp, h, lane, q));
        words[4 * q] = v.x;
        words[4 * q + 1] = v.y;
        words[4 * q + 2] = v.z;
        words[4 * q + 3] = v.w;
      }
      // One dequantization serves every m16 fragment of the row block.
      const k::StripeBFragments b = k::stripe_dequant_lane<Bits>(words, groups);
#pragma unroll
      for (int s = 0; s < 2; ++s)
#pragma unroll
        for (int f = 0; f < MFrags; ++f) {
          uint32_t a[4];
          ldmatrix_x4(a, a_stage(slot) + k::stripe_a_ldmatrix_offset(lane, h, s, f));
#pragma unroll
          for (int j = 0; j < 4; ++j) mma_m16n8k16(acc[f][j], a, b.b[j][s][0], b.b[j][s][1]);
        }
    }

    if (k::stripe_cursor_segment_end(walk, at)) {  // the block's part of column nt ends here
      const k::StripeSegment column = k::stripe_cursor_segment(walk, at);
      const int64_t segment = column.segment;
      const bool direct = column.segments == 1;  // the column is this block's alone: fp16 C straight away
#pragma unroll
      for (int f = 0; f < MFrags; ++f)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const k::StripeRowCol rc = k::stripe_acc_position(warp, j, lane, 2 * r);
            const int64_t m = (mb * MFrags + f) * k::kStripeTileM + rc.row, n = nt * k::kStripeTileN + rc.col;
            if (m >= args.M) continue;
            if (direct) {
              if (n < args.N) {  // n even, N % 8 == 0: n + 1 < N too
                *reinterpret_cast<__half2*>(args.c + m * args.N + n) = __floats2half2_rn(acc[f][j][2 * r], acc[f][j][2 * r + 1]);
              }
            } else {
              *reinterpret_cast<float2*>(args.workspace + k::stripe_partial_index(segment, m, n, args.M, args.n_padded)) =
                  make_float2(acc[f][j][2 * r], acc[f][j][2 * r + 1]);
            }
          }
      if (!direct) stripe_column_sum(args, mb, kRows, nt, column.segments, tid, last_block_of_column);
#pragma unroll
      for (int f = 0; f < MFrags; ++f)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[f][j][e] = 0.0f;
    }
  }
  k::copy_async_wait<0>();
}

// Act-order: A'[m, k'] = A[m, perm[k']], once per call.
__global__ void gather_columns_kernel(const __half* a, const int32_t* perm, __half* out, int64_t M, int64_t K) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < M * K;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = i / K, kp = i % K;
    out[i] = a[m * K + perm[kp]];
  }
}

// The DequantGemm engine's first step: the whole W [K, N] fp16 from the stripes layout, one thread per
// (tile, warp, half, lane), each writing its 4·2·2·2 halves (stripe_dequant_lane_to_matrix).
template <int Bits>
__global__ void stripe_dequant_kernel(const uint32_t* words, const uint32_t* params, int64_t K, int64_t N,
                                      int64_t n_padded, int64_t k_tiles, int64_t tiles, int64_t group_size,
                                      uint16_t* w16) {
  const int64_t lanes = tiles * k::kStripeWarps * 2 * 32;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < lanes;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int lane = static_cast<int>(i % 32), h = static_cast<int>((i / 32) % 2), w = static_cast<int>((i / 64) % 4);
    const int64_t t = i / 256, nt = t / k_tiles, kt = t % k_tiles;
    const int64_t g = (kt * k::kStripeTileK + 32 * h) / group_size;
    uint32_t lane_words[Bits];
    k::stripe_lane_words<Bits>(words + t * k::stripe_tile_words(Bits), w, h, lane, lane_words);
    k::stripe_dequant_lane_to_matrix<Bits>(lane_words, params + g * n_padded, K, N, nt, kt, w, h, lane, w16);
  }
}

}  // namespace

void launch_stripe_dequant(const StripeLinearArgs& args, int bits, uint16_t* w16, void* stream) {
  const int64_t blocks64 = (args.tiles * 256 + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(blocks64 < 65535 ? blocks64 : 65535);
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  if (bits == 4) {
    stripe_dequant_kernel<4><<<blocks, 256, 0, cuda_stream>>>(args.words, args.params, args.K, args.N, args.n_padded,
                                                              args.k_tiles, args.tiles, args.group_size, w16);
    QGRU_CUDA_CHECK_LAUNCH("stripe_dequant_kernel<4><<<...>>>");
  } else if (bits == 8) {
    stripe_dequant_kernel<8><<<blocks, 256, 0, cuda_stream>>>(args.words, args.params, args.K, args.N, args.n_padded,
                                                              args.k_tiles, args.tiles, args.group_size, w16);
    QGRU_CUDA_CHECK_LAUNCH("stripe_dequant_kernel<8><<<...>>>");
  } else {
    throw NotSupported("stripes dequantization with " + std::to_string(bits) + "-bit codes");
  }
}

void launch_gather_columns(const uint16_t* a, const int32_t* perm, uint16_t* out, int64_t M, int64_t K, void* stream) {
  const int64_t blocks64 = (M * K + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(blocks64 < 4096 ? blocks64 : 4096);
  gather_columns_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const __half*>(a), perm, reinterpret_cast<__half*>(out), M, K);
  QGRU_CUDA_CHECK_LAUNCH("gather_columns_kernel<<<...>>>");
}

namespace {

// The kernel for (bits, m16 fragments), with its dynamic shared memory (bytes).
template <int Bits, int MFrags>
StripeKernelEntry stripe_kernel_entry(const char* name) {
  return {stripe_linear_kernel<Bits, MFrags>, k::stripe_smem_bytes(Bits, MFrags), name};
}
StripeKernelEntry stripe_kernel(int bits, int m_frags) {
  if (bits == 4) {
    if (m_frags == 1) return stripe_kernel_entry<4, 1>("stripe_linear_kernel<4, 1>");
    if (m_frags == 2) return stripe_kernel_entry<4, 2>("stripe_linear_kernel<4, 2>");
    if (m_frags == 4) return stripe_kernel_entry<4, 4>("stripe_linear_kernel<4, 4>");
  } else if (bits == 8) {
    if (m_frags == 1) return stripe_kernel_entry<8, 1>("stripe_linear_kernel<8, 1>");
    if (m_frags == 2) return stripe_kernel_entry<8, 2>("stripe_linear_kernel<8, 2>");
    if (m_frags == 4) return stripe_kernel_entry<8, 4>("stripe_linear_kernel<8, 4>");
  } else {
    throw NotSupported("stripes linear with " + std::to_string(bits) + "-bit codes (kernels exist for 4 and 8)");
  }
  throw Error("stripes linear: no kernel for " + std::to_string(m_frags) + " m16 fragments per block");
}

}  // namespace

int prepare_stripe_linear(int bits, int m_frags) { return prepare_stripe_kernel(stripe_kernel(bits, m_frags), k::kStripeThreads); }

void launch_stripe_linear(const StripeLinearArgs& args, int bits, int64_t blocks, void* stream) {
  launch_stripe_kernel(stripe_kernel(bits, k::stripe_m_frags(args.M)), k::kStripeThreads, args, blocks,
                       k::stripe_m_blocks(args.M), "stripes linear", stream);
}

}  // namespace qgru::cuda
