// W4A16 / W8A16 GEMM kernels: C[M, N] = A[M, K] · W[K, N], W dequantized from the GPTQ layout in shared
// memory with the fast PRMT/LOP3 path, fp32 accumulation on tensor cores (WMMA m16n16k16).
//
// One block computes a BM x BN tile of C over its split's k tiles. Per k tile (single stage):
//   A tile  BM x BK  fp16, 16-byte vector loads (or an element gather through a_perm for act-order);
//   W tile  BK x BN  fp16, each thread dequantizes whole packed words (one group per word) with
//           qgru::kernels::dequant_u{4x8,8x4}_raw and writes the halves to the rows raw_pair_element says;
//   then every warp runs (BM/WM/16) x (BN/WN/16) WMMA tiles.
// Epilogue: accumulators go through shared memory (the A/W tiles' space) to fp16 C, or are atomically
// added into the fp32 workspace when K is split; workspace_to_half rounds that to C afterwards.
// Everything computed per element (tile coordinates, dequantization, zero/group lookup, split ranges) is
// QGRU_HD header code (qgru/kernels/quant_linear_tile.h, linear_plan.h) that the CPU tests run, including
// a host emulation of this kernel's block loop; this file only moves data and calls WMMA.
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
  constexpr int kLdA = BK + 8, kLdW = BN + 8, kLdC = BN + 4;  // padded rows (multiples of 8 halves / 4 floats)
  constexpr int kPerWord = 32 / Bits;
  constexpr int kWordRows = BK / kPerWord;
  constexpr int kBytesAB = 2 * BM * kLdA + 2 * BK * kLdW;
  constexpr int kBytesC = 4 * BM * kLdC;
  constexpr int kSmemBytes = kBytesAB > kBytesC ? kBytesAB : kBytesC;
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0 && BK % 16 == 0 && BK % kPerWord == 0, "tile shape");
  static_assert((2 * BM * kLdA) % 32 == 0, "W tile must start 32-byte aligned for WMMA loads");
  static_assert(kSmemBytes <= 48 * 1024, "static shared memory limit");

  __shared__ __align__(128) unsigned char smem[kSmemBytes];
  uint16_t* a_s = reinterpret_cast<uint16_t*>(smem);
  uint16_t* w_s = a_s + BM * kLdA;
  float* c_s = reinterpret_cast<float*>(smem);  // reused after the main loop

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
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

  for (int64_t kt = range.begin; kt < range.end; ++kt) {
    const int64_t k0 = kt * BK;
    // A tile: BM x BK halves in chunks of 8 (16 bytes).
    for (int chunk = tid; chunk < BM * BK / 8; chunk += kThreads) {
      const kernels::TileCoord at = kernels::a_tile_chunk(chunk, BK);
      const int row = at.row, col = at.col;
      const int64_t m = m0 + row;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (m < M) {
        if (args.a_perm == nullptr) {
          v = __ldg(reinterpret_cast<const uint4*>(args.a + m * K + k0 + col));
        } else {
          uint32_t packed[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint32_t lo = __ldg(args.a + m * K + __ldg(args.a_perm + k0 + col + 2 * i));
            const uint32_t hi = __ldg(args.a + m * K + __ldg(args.a_perm + k0 + col + 2 * i + 1));
            packed[i] = lo | (hi << 16);
          }
          v = make_uint4(packed[0], packed[1], packed[2], packed[3]);
        }
      }
      *reinterpret_cast<uint4*>(a_s + row * kLdA + col) = v;
    }
    // W tile: kWordRows x BN packed words, each -> kPerWord halves in column col.
    for (int idx = tid; idx < kWordRows * BN; idx += kThreads) {
      kernels::load_w_tile_word<Bits>(args.qweight, args.qzeros, args.scales, N, args.group_size, args.zero_adjust, k0,
                                      n0, idx, BN, w_s, kLdW);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a_frag[kFragM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b_frag[kFragN];
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
        const uint16_t* tile = a_s + (warp_m * kWarpM + i * 16) * kLdA + kk;
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
    __syncthreads();
  }

  __syncthreads();  // the C staging area overlaps the A/W tiles
#pragma unroll
  for (int i = 0; i < kFragM; ++i)
#pragma unroll
    for (int j = 0; j < kFragN; ++j) {
      float* tile = c_s + (warp_m * kWarpM + i * 16) * kLdC + warp_n * kWarpN + j * 16;
      wmma::store_matrix_sync(tile, acc[i][j], kLdC, wmma::mem_row_major);
    }
  __syncthreads();
  for (int idx = tid; idx < BM * BN; idx += kThreads) {
    const int row = idx / BN, col = idx % BN;
    const int64_t m = m0 + row, n = n0 + col;
    if (m >= M || n >= N) continue;
    const float value = c_s[row * kLdC + col];
    if (args.workspace != nullptr) {
      atomicAdd(args.workspace + m * N + n, value);
    } else {
      args.c[m * N + n] = __half_as_ushort(__float2half_rn(value));
    }
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
  static_assert(kernels::kTileConfigCount == 4, "add the new configuration to the dispatch list");
  switch (plan.config_index) {
    QGRU_QUANT_LINEAR_CASE(0, 4, 16, 128, 32, 1, 4)
    QGRU_QUANT_LINEAR_CASE(1, 4, 64, 128, 32, 2, 4)
    QGRU_QUANT_LINEAR_CASE(2, 8, 16, 128, 32, 1, 4)
    QGRU_QUANT_LINEAR_CASE(3, 8, 64, 128, 32, 2, 4)
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
