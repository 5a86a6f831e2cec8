// W4A16 / W8A16 GEMM kernels: C[M, N] = A[M, K] · W[K, N], W dequantized from the GPTQ layout in shared
// memory with the fast PRMT/LOP3 path, fp32 accumulation on tensor cores (WMMA m16n16k16).
//
// One block computes a BM x BN tile of C over its split's k tiles, double-buffered (shared layout:
// kernels::tile_smem_layout):
//   stage s: A tile BM x BK fp16 and the k tile's packed W words, filled by cp.async one k tile ahead
//            (kernels::load_stage; act-order gathers A with plain loads);
//   per k tile: wait for its stage, dequantize its words into the fp16 W tile (kernels::dequant_stage_column:
//            one column per thread, zero point and scale loaded once per group), then every warp runs
//            (BM/WM/16) x (BN/WN/16) WMMA tiles while the next stage's copies are in flight.
// Epilogue: each warp stages one 16x16 fp32 fragment at a time in its own slice of the (now idle) stage space
// and writes it to fp16 C, or atomically adds it into the fp32 workspace when K is split; workspace_to_half
// rounds that to C afterwards.
// Everything computed per element (tile coordinates, stage loads, dequantization, zero/group lookup, split
// ranges, fragment elements) is QGRU_HD header code (qgru/kernels/quant_linear_tile.h, linear_plan.h) that the
// CPU tests run, including a host emulation of this kernel's block loop; this file only sequences it and calls
// WMMA.
#include <cuda_fp16.h>
#include <mma.h>

#include <string>

#include "qgru/kernels/fast_dequant.h"
#include "qgru/kernels/linear_plan.h"
#include "qgru/kernels/quant_linear_tile.h"
#include "qgru_cuda/check.h"
#include "quant_linear_launch.h"

namespace qgru::cuda {

namespace {

using namespace nvcuda;

template <int Bits, int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__(WM * WN * 32) quant_linear_kernel(const QuantLinearArgs args) {
  constexpr int kThreads = WM * WN * 32;
  constexpr int kWarpM = BM / WM, kWarpN = BN / WN;
  constexpr int kFragM = kWarpM / 16, kFragN = kWarpN / 16;
  constexpr int kLdA = BK + 8, kLdW = BN + 8;  // padded rows (multiples of 8 halves)
  constexpr kernels::TileConfig kConfig{"", Bits, BM, BN, BK, WM, WN};
  constexpr kernels::TileSmemLayout kSmem = kernels::tile_smem_layout(kConfig);
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0 && BK % 16 == 0 && BK % (32 / Bits) == 0, "tile shape");
  static_assert(kSmem.a_stage_bytes % 32 == 0 && kSmem.w_stage_bytes % 32 == 0 && kSmem.tile_offset % 32 == 0,
                "every shared region must start 32-byte aligned for WMMA and cp.async");
  static_assert(kThreads % BN == 0, "one W tile column per thread (or several threads per column)");
  static_assert(kSmem.total_bytes <= 48 * 1024, "static shared memory limit");

  __shared__ __align__(128) unsigned char smem[kSmem.total_bytes];
  // Stage s's regions (computed, not indexed from an array: a dynamically indexed array would live in local memory).
  static_assert(kSmem.a_offset[1] == kSmem.a_offset[0] + kSmem.a_stage_bytes &&
                    kSmem.w_offset[1] == kSmem.w_offset[0] + kSmem.w_stage_bytes,
                "stages are consecutive");
  const auto a_s = [&](int s) { return reinterpret_cast<uint16_t*>(smem + kSmem.a_offset[0] + s * kSmem.a_stage_bytes); };
  const auto w_raw = [&](int s) { return reinterpret_cast<uint32_t*>(smem + kSmem.w_offset[0] + s * kSmem.w_stage_bytes); };
  uint16_t* w_s = reinterpret_cast<uint16_t*>(smem + kSmem.tile_offset);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = warp / WN, warp_n = warp % WN;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t M = args.M, N = args.N, K = args.K;
  const kernels::KTileRange range = kernels::split_k_range(args.k_tiles, args.k_tiles_per_split, blockIdx.z);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragM][kFragN];
#pragma unroll
  for (int i = 0; i < kFragM; ++i)
#pragma unroll
    for (int j = 0; j < kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  if (range.begin < range.end) {
    kernels::load_stage<Bits>(args.a, args.a_perm, args.qweight, M, N, K, m0, n0, range.begin * BK, BM, BN, BK, tid,
                              kThreads, a_s(0), kLdA, w_raw(0));
  }
  kernels::copy_async_commit();
  for (int64_t kt = range.begin; kt < range.end; ++kt) {
    const int stage = static_cast<int>((kt - range.begin) & 1);
    // The next k tile's copies go out now (into the stage the previous iteration finished with) ...
    if (kt + 1 < range.end) {
      kernels::load_stage<Bits>(args.a, args.a_perm, args.qweight, M, N, K, m0, n0, (kt + 1) * BK, BM, BN, BK, tid,
                                kThreads, a_s(stage ^ 1), kLdA, w_raw(stage ^ 1));
    }
    kernels::copy_async_commit();
    // ... and this k tile's have landed once at most that one group is pending.
    kernels::copy_async_wait<1>();
    __syncthreads();
    kernels::dequant_stage_column<Bits>(w_raw(stage), args.qzeros, args.scales, N, args.group_size, args.zero_adjust,
                                        kt * BK, n0, tid % BN, tid / BN, kThreads / BN, BN, BK, w_s, kLdW);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a_frag[kFragM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b_frag[kFragN];
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
        const uint16_t* tile = a_s(stage) + (warp_m * kWarpM + i * 16) * kLdA + kk;
        wmma::load_matrix_sync(a_frag[i], reinterpret_cast<const __half*>(tile), kLdA);
      }
#pragma unroll
      for (int j = 0; j < kFragN; ++j) {
        const uint16_t* tile = w_s + kk * kLdW + warp_n * kWarpN + j * 16;
        wmma::load_matrix_sync(b_frag[j], reinterpret_cast<const __half*>(tile), kLdW);
      }
#pragma unroll
      for (int i = 0; i < kFragM; ++i)
#pragma unroll
        for (int j = 0; j < kFragN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads();  // stage `stage` and the W tile are free for the next iteration's copies / dequantization
  }
  kernels::copy_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: the epilogue reuses their space

  float* frag_s = reinterpret_cast<float*>(smem) + warp * 16 * kernels::kFragmentLd;
#pragma unroll
  for (int i = 0; i < kFragM; ++i)
#pragma unroll
    for (int j = 0; j < kFragN; ++j) {
      wmma::store_matrix_sync(frag_s, acc[i][j], kernels::kFragmentLd, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const kernels::TileCoord f = kernels::fragment_element(e);
        const int64_t m = m0 + warp_m * kWarpM + i * 16 + f.row, n = n0 + warp_n * kWarpN + j * 16 + f.col;
        if (m >= M || n >= N) continue;
        const float value = frag_s[f.row * kernels::kFragmentLd + f.col];
        if (args.workspace != nullptr) {
          atomicAdd(args.workspace + m * N + n, value);
        } else {
          args.c[m * N + n] = __half_as_ushort(__float2half_rn(value));
        }
      }
      __syncwarp();  // the next fragment overwrites the staging area
    }
}

// Split-K epilogue: C = RN_fp16(workspace).
__global__ void workspace_to_half_kernel(const float* workspace, uint16_t* c, int64_t count) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    c[i] = __half_as_ushort(__float2half_rn(workspace[i]));
  }
}

}  // namespace

// The explicit dispatch list: case i is kTileConfigs[i], checked at compile time.
#define QGRU_QUANT_LINEAR_CASE(I, BITS, BM, BN, BK, WM, WN)                                                     \
  case I: {                                                                                                    \
    static_assert(kernels::kTileConfigs[I].bits == BITS && kernels::kTileConfigs[I].block_m == BM &&            \
                      kernels::kTileConfigs[I].block_n == BN && kernels::kTileConfigs[I].block_k == BK &&       \
                      kernels::kTileConfigs[I].warps_m == WM && kernels::kTileConfigs[I].warps_n == WN,         \
                  "dispatch list out of step with kTileConfigs");                                               \
    quant_linear_kernel<BITS, BM, BN, BK, WM, WN><<<grid, block, 0, cuda_stream>>>(args);                       \
    QGRU_CUDA_CHECK_LAUNCH("quant_linear_kernel<" #BITS ", " #BM ", " #BN ", " #BK ", " #WM ", " #WN "><<<...>>>"); \
    break;                                                                                                     \
  }

void launch_quant_linear(const QuantLinearArgs& args, const kernels::LinearPlan& plan, void* stream) {
  if (!plan.supported) throw NotSupported(plan.reason);
  if ((plan.grid_z > 1) != (args.workspace != nullptr)) {
    throw Error("quant linear launch: a split-K plan needs the fp32 workspace and only it (grid_z = " +
                std::to_string(plan.grid_z) + ")");
  }
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y),
                  static_cast<unsigned>(plan.grid_z));
  const dim3 block(static_cast<unsigned>(plan.threads));
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  static_assert(kernels::kTileConfigCount == 6, "add the new configuration to the dispatch list");
  switch (plan.config_index) {
    QGRU_QUANT_LINEAR_CASE(0, 4, 16, 128, 32, 1, 4)
    QGRU_QUANT_LINEAR_CASE(1, 4, 64, 128, 32, 2, 4)
    QGRU_QUANT_LINEAR_CASE(2, 8, 16, 128, 32, 1, 4)
    QGRU_QUANT_LINEAR_CASE(3, 8, 64, 128, 32, 2, 4)
    QGRU_QUANT_LINEAR_CASE(4, 4, 16, 128, 64, 1, 4)
    QGRU_QUANT_LINEAR_CASE(5, 8, 16, 128, 64, 1, 4)
    default:
      throw NotSupported("quant linear tile configuration " + std::to_string(plan.config_index) + " has no kernel");
  }
  if (plan.grid_z > 1) {
    const int64_t count = args.M * args.N;
    const int64_t blocks64 = (count + 255) / 256;
    const unsigned blocks = static_cast<unsigned>(blocks64 < 4096 ? blocks64 : 4096);
    workspace_to_half_kernel<<<blocks, 256, 0, cuda_stream>>>(args.workspace, args.c, count);
    QGRU_CUDA_CHECK_LAUNCH("workspace_to_half_kernel<<<...>>>");
  }
}

}  // namespace qgru::cuda
