#pragma once
// Launch planning for the GPU quantized linear (W4A16 / W8A16, cuda/src/quant_linear_kernels.cu): the
// explicit list of tile configurations that exist, the shape rules they need, grid, split-K and workspace
// sizes. Plain host code (no CUDA), tested on the CPU; split_k_range is QGRU_HD because the kernel uses it.
//
// Problem: C[M, N] (fp16, row-major) = A[M, K] (fp16, row-major) · W[K, N], W the dequantized GPTQ weight
// (qgru/kernels/gptq_layout.h), fp32 accumulation. With split-K > 1 every split adds its partial sums
// into an fp32 workspace [M, N] (zeroed first) and a second kernel rounds it to fp16 C.
#include <cstdint>
#include <string>

#include "qgru/hd.h"

namespace qgru::kernels {

struct TileConfig {
  const char* name;
  int bits;  // 4 or 8
  int block_m, block_n, block_k;  // block tile
  int warps_m, warps_n;  // warp grid; each warp owns (block_m/warps_m) x (block_n/warps_n) in 16x16 WMMA tiles
};

// Every configuration a kernel is instantiated for (cuda/src/quant_linear_kernels.cu dispatches on the
// index, in this order). Anything else is "not supported". plan_linear takes, among those whose bits match and
// whose block_m is 16 for small batches (64 otherwise), the deepest k tile that divides K (measured on an H200,
// docs/benchmarks/cuda.md: the k64 small-batch tiles ran 5-13% faster than the k32 ones at M = 1 and 16);
// LinearTuning::config_index picks any of them.
inline constexpr TileConfig kTileConfigs[] = {
    {"w4a16_m16n128k32", 4, 16, 128, 32, 1, 4},   // small batch (M <= 32): 4 warps of 16x32
    {"w4a16_m64n128k32", 4, 64, 128, 32, 2, 4},   // large batch: 8 warps of 32x32
    {"w8a16_m16n128k32", 8, 16, 128, 32, 1, 4},
    {"w8a16_m64n128k32", 8, 64, 128, 32, 2, 4},
    {"w4a16_m16n128k64", 4, 16, 128, 64, 1, 4},   // small batch, k tiles twice as deep (half the barriers per byte)
    {"w8a16_m16n128k64", 8, 16, 128, 64, 1, 4},
};
inline constexpr int kTileConfigCount = static_cast<int>(sizeof(kTileConfigs) / sizeof(kTileConfigs[0]));
inline constexpr int64_t kSmallBatchMaxM = 32;  // M at or below this takes the m16 tile
inline constexpr int64_t kMaxSplitK = 64;
// Split-K aims at this many blocks per multiprocessor unless told another (LinearTuning below,
// QuantLinear::set_tuning; a benchmark sweeps it). Measured on an H200 (docs/benchmarks/cuda.md, 2026-11-25):
// the small-batch tile, bound by weight bandwidth, ran 1.3 to 1.5x faster at 8 than at 2 (K=4096, N=4096 and
// 11008, M=1 and 16); the large-batch tile ran fastest at 2 (M=64 and 256), where more splits only add atomics.
inline constexpr int kTargetBlocksPerSmSmallBatch = 8;
inline constexpr int kTargetBlocksPerSmLargeBatch = 2;

// What a benchmark may change in plan_linear's choice (the defaults: none).
struct LinearTuning {
  int target_blocks_per_sm = 0;  // 0: the tile's default above; else >= 1
  int config_index = -1;         // -1: by bits and batch size; else an index into kTileConfigs with the same bits
  int wgmma_rows = 0;            // the wgmma engine's row block: 0 for kernels::wgmma_rows(M), else 64 or 128
};

struct LinearProblem {
  int64_t M = 0, N = 0, K = 0;
  int bits = 4;
  int64_t group_size = 0;  // inputs per group; K for a single group
};

struct LinearPlan {
  bool supported = false;
  std::string reason;  // why not, naming the shape, when !supported
  int config_index = -1;
  int64_t grid_x = 0, grid_y = 0, grid_z = 0;  // N tiles, M tiles, K splits
  int threads = 0;
  int64_t k_tiles = 0;            // K / block_k
  int64_t k_tiles_per_split = 0;  // every split but the last has exactly this many k tiles
  int64_t workspace_bytes = 0;    // fp32 [M, N] when grid_z > 1, else 0
  int64_t smem_bytes = 0;         // static shared memory of the kernel (A and W tiles, reused for C)
};

inline std::string describe(const LinearProblem& p) {
  return "M=" + std::to_string(p.M) + " N=" + std::to_string(p.N) + " K=" + std::to_string(p.K) +
         " bits=" + std::to_string(p.bits) + " group_size=" + std::to_string(p.group_size);
}

// Shared memory of one block (quant_linear_tile.h): two stages of { A [block_m, block_k + 8] fp16, packed W words
// [block_k·bits/32, block_n] uint32 } and one dequantized W tile [block_k, block_n + 8] fp16, in that order; the
// epilogue reuses the space for one 16 x (16 + 4) fp32 fragment per warp. Every region starts 32-byte aligned
// (WMMA loads and stores, 16-byte cp.async).
struct TileSmemLayout {
  int64_t a_stage_bytes, w_stage_bytes;   // one stage each
  int64_t a_offset[2], w_offset[2], tile_offset;
  int64_t epilogue_bytes;                 // warps · 16 · 20 · 4
  int64_t total_bytes;
};
inline constexpr int kFragmentLd = 16 + 4;  // floats per row of a staged 16x16 fragment
inline constexpr TileSmemLayout tile_smem_layout(const TileConfig& c) {
  const int64_t a = 2LL * c.block_m * (c.block_k + 8);
  const int64_t w = 4LL * (c.block_k * c.bits / 32) * c.block_n;
  const int64_t tile = 2LL * c.block_k * (c.block_n + 8);
  const int64_t epilogue = 4LL * c.warps_m * c.warps_n * 16 * kFragmentLd;
  const int64_t pipeline = 2 * a + 2 * w + tile;
  return {a, w, {0, a}, {2 * a, 2 * a + w}, 2 * a + 2 * w, epilogue, pipeline > epilogue ? pipeline : epilogue};
}
inline constexpr int64_t tile_smem_bytes(const TileConfig& c) { return tile_smem_layout(c).total_bytes; }

// K range [begin, end) in k tiles of split z.
struct KTileRange {
  int64_t begin, end;
};
QGRU_HD KTileRange split_k_range(int64_t k_tiles, int64_t k_tiles_per_split, int64_t z) {
  const int64_t begin = z * k_tiles_per_split;
  const int64_t end = begin + k_tiles_per_split < k_tiles ? begin + k_tiles_per_split : k_tiles;
  return {begin, end};
}

// Chooses the tile and the split for `problem` on a GPU with `sm_count` multiprocessors (> 0).
// Split-K: enough blocks for tuning.target_blocks_per_sm per multiprocessor, each split at least one k tile, at
// most kMaxSplitK splits, and no empty split.
inline LinearPlan plan_linear(const LinearProblem& p, int sm_count, const LinearTuning& tuning = {}) {
  LinearPlan plan;
  auto refuse = [&](const std::string& why) {
    plan.reason = "quantized linear not supported for " + describe(p) + ": " + why;
    return plan;
  };
  if (p.bits != 4 && p.bits != 8) return refuse("only 4- and 8-bit weights have kernels");
  if (p.M < 1 || p.N < 1 || p.K < 1) return refuse("every dimension must be at least 1");
  if (sm_count < 1) return refuse("the device reports no multiprocessors");
  int target_blocks_per_sm = tuning.target_blocks_per_sm;
  if (target_blocks_per_sm < 0) return refuse("the split-K target must be at least one block per multiprocessor");
  const bool small = p.M <= kSmallBatchMaxM;
  if (tuning.config_index >= 0) {
    if (tuning.config_index >= kTileConfigCount || kTileConfigs[tuning.config_index].bits != p.bits) {
      return refuse("tile configuration " + std::to_string(tuning.config_index) + " is not one for " +
                    std::to_string(p.bits) + "-bit weights");
    }
    plan.config_index = tuning.config_index;
  } else {
    for (int i = 0; i < kTileConfigCount; ++i) {
      const TileConfig& t = kTileConfigs[i];
      if (t.bits != p.bits || (t.block_m == 16) != small) continue;
      const bool divides = p.K % t.block_k == 0;
      if (plan.config_index < 0 || (divides && t.block_k > kTileConfigs[plan.config_index].block_k)) plan.config_index = i;
    }
  }
  const TileConfig& c = kTileConfigs[plan.config_index];
  if (p.K % c.block_k != 0) return refuse("K must be a multiple of the tile's block_k = " + std::to_string(c.block_k));
  if (p.N % 8 != 0) return refuse("N must be a multiple of 8 (packed zero words and 16-byte fp16 rows)");
  if (p.group_size <= 0 || p.group_size % (32 / p.bits) != 0) {
    return refuse("group_size must be a positive multiple of " + std::to_string(32 / p.bits) +
                  " (one group per packed word)");
  }
  const int64_t grid_y = (p.M + c.block_m - 1) / c.block_m;
  if (grid_y > 65535) return refuse("M needs more than 65535 row tiles");
  plan.grid_x = (p.N + c.block_n - 1) / c.block_n;
  plan.grid_y = grid_y;
  plan.threads = 32 * c.warps_m * c.warps_n;
  plan.k_tiles = p.K / c.block_k;
  const int64_t tiles = plan.grid_x * plan.grid_y;
  if (target_blocks_per_sm == 0) {
    target_blocks_per_sm = c.block_m == 16 ? kTargetBlocksPerSmSmallBatch : kTargetBlocksPerSmLargeBatch;
  }
  const int64_t target_blocks = int64_t{target_blocks_per_sm} * sm_count;
  int64_t split = (target_blocks + tiles - 1) / tiles;
  if (split > kMaxSplitK) split = kMaxSplitK;
  if (split > plan.k_tiles) split = plan.k_tiles;
  if (split < 1) split = 1;
  plan.k_tiles_per_split = (plan.k_tiles + split - 1) / split;
  plan.grid_z = (plan.k_tiles + plan.k_tiles_per_split - 1) / plan.k_tiles_per_split;  // no empty split
  plan.workspace_bytes = plan.grid_z > 1 ? 4 * p.M * p.N : 0;
  plan.smem_bytes = tile_smem_bytes(c);
  plan.supported = true;
  return plan;
}

// ---- which engine serves a call ----
//
// Three engines exist for the quantized linear:
//   Tiles        the WMMA kernel above (dequantized W tile in shared memory), any shape plan_linear accepts;
//   Stripes      the mma.sync kernel of qgru/kernels/stripe_linear.h (weights repacked at load into fragment
//                order, dequantized in registers, stripes over N x K tiles), for group sizes that are multiples
//                of 32 or a single group;
//   DequantGemm  the stripes layout dequantized once per call into an fp16 W [K, N] in the workspace, then
//                cuBLAS's fp16 tensor-core GEMM (fp32 compute);
//   Wgmma        the stripes layout, dequantized in registers into the A operand of Hopper's warpgroup
//                instruction (qgru/kernels/stripe_wgmma.h), on a compute capability 9.0 device only.
// The layer holds one weight layout, chosen at load by the setting (QGRU_CUDA_LINEAR_KERNEL): "legacy" holds
// the checkpoint layout and runs Tiles for every M; "stripes" holds the stripes layout and runs Stripes for
// every M; "wgmma" holds the stripes layout and runs Wgmma for every M (Stripes, with the reason, on a device
// that cannot run it); "auto" holds the stripes layout when the layer can take it and picks per M from kEngineTable;
// a layer the stripes layout cannot serve runs Tiles whatever the setting says (the reason is reported).
// The default is "legacy": it is the engine a GPU has run and timed; Stripes, DequantGemm and Wgmma were written
// and emulated on the host but have not run on a GPU (docs/CUDA.md, "Quantized linear"). Wgmma is not in auto's
// table until a benchmark places it.
enum class LinearEngine { Tiles, Stripes, DequantGemm, Wgmma };
enum class LinearKernelSetting { Legacy, Stripes, Auto, Wgmma };

inline const char* engine_name(LinearEngine e) {
  return e == LinearEngine::Tiles ? "tiles" : e == LinearEngine::Stripes ? "stripes" : e == LinearEngine::Wgmma ? "wgmma" : "dequant-gemm";
}
inline const char* setting_name(LinearKernelSetting s) {
  return s == LinearKernelSetting::Legacy ? "legacy" : s == LinearKernelSetting::Stripes ? "stripes" : s == LinearKernelSetting::Wgmma ? "wgmma" : "auto";
}
inline constexpr LinearKernelSetting kDefaultLinearKernelSetting = LinearKernelSetting::Legacy;

// The value of QGRU_CUDA_LINEAR_KERNEL (null or empty: the default). Returns "" or why the value is refused.
inline std::string parse_linear_kernel_setting(const char* value, LinearKernelSetting& out) {
  out = kDefaultLinearKernelSetting;
  if (value == nullptr || *value == '\0') return "";
  const std::string v(value);
  if (v == "legacy" || v == "tiles") {
    out = LinearKernelSetting::Legacy;
  } else if (v == "stripes") {
    out = LinearKernelSetting::Stripes;
  } else if (v == "auto") {
    out = LinearKernelSetting::Auto;
  } else if (v == "wgmma") {
    out = LinearKernelSetting::Wgmma;
  } else {
    return "QGRU_CUDA_LINEAR_KERNEL=" + v + ": expected legacy, stripes, auto or wgmma";
  }
  return "";
}

// "auto"'s table: the engine for a row count, and why. Rows are tried in order; the first whose max_m holds M wins.
struct EngineRow {
  int64_t max_m;
  LinearEngine engine;
  const char* reason;
};
inline constexpr EngineRow kEngineTable[] = {
    {16, LinearEngine::Stripes,
     "M <= 16: bound by weight bytes (2M FLOP per weight over bits/8 bytes: 64 FLOP per byte at M = 16, 4-bit, "
     "far below the tensor cores' ~200 per byte of HBM); one m16 fragment per block, each weight byte streamed "
     "once at 16-byte loads"},
    {64, LinearEngine::Stripes,
     "17 <= M <= 64: still bound by weight bytes at 4 bits (256 FLOP per byte at M = 64); the stripes kernel holds "
     "two or four m16 fragments per block, so each weight byte is still read once and one dequantization feeds "
     "up to 32 mma.sync per k32 half"},
    {INT64_MAX, LinearEngine::DequantGemm,
     "M >= 65: the GEMM turns compute bound; without a wgmma kernel, cuBLAS's fp16 tensor-core GEMM on W dequantized "
     "once per call (0.5 + 2 + 2 bytes per weight of traffic) is the faster path: the WMMA tile kernel ran at "
     "0.14-0.49x cuBLAS fp16 at M = 64 and 256 (docs/benchmarks/cuda.md)"},
};

struct EngineChoice {
  LinearEngine engine = LinearEngine::Tiles;
  std::string reason;
};
// The engine for M rows of a layer loaded with `setting`; stripes_reason is stripe_unsupported_reason of the
// layer ("" when it holds the stripes layout).
inline EngineChoice choose_engine(int64_t M, LinearKernelSetting setting, const std::string& stripes_reason) {
  if (setting == LinearKernelSetting::Legacy) return {LinearEngine::Tiles, "QGRU_CUDA_LINEAR_KERNEL=legacy (the default)"};
  if (!stripes_reason.empty()) return {LinearEngine::Tiles, stripes_reason};
  if (setting == LinearKernelSetting::Stripes) return {LinearEngine::Stripes, "QGRU_CUDA_LINEAR_KERNEL=stripes"};
  if (setting == LinearKernelSetting::Wgmma) return {LinearEngine::Wgmma, "QGRU_CUDA_LINEAR_KERNEL=wgmma"};
  for (const EngineRow& row : kEngineTable) {
    if (M <= row.max_m) return {row.engine, row.reason};
  }
  return {LinearEngine::Tiles, "no row of kEngineTable holds M"};  // unreachable: the last row holds INT64_MAX
}

}  // namespace qgru::kernels
