#pragma once
// The "stripes" quantized linear for small batches (cuda/src/quant_linear_stripes.cu): its repacked weight
// layout, the per-lane fragment mapping of mma.sync m16n8k16, the stripe partition of the N x K tiles over the
// blocks and the fixed-order reduction of their partial sums. Everything the kernel computes per element is
// QGRU_HD here, so the CPU tests run it (test/unit/kernels/stripe_linear_test.cpp emulates whole launches).
//
// Problem: C[M, N] fp16 = A[M, K] fp16 · W[K, N], W[k, n] = RN_fp16(s(g, n) · (u(k, n) − z(g, n))) from a
// GPTQ checkpoint layer (qgru/kernels/gptq_layout.h), fp32 accumulation.
//
// Tiles. The weight is cut into block tiles of kStripeTileK (64) inputs x kStripeTileN (128) outputs; K and N
// are padded up to whole tiles (padded codes and scales are 0, the padded inputs of A are read as 0, so padding
// adds exact zeros). Tile (nt, kt) is one contiguous run of kStripeTileBytes(bits) in the repacked array, tiles
// ordered column-major: nt · k_tiles + kt. A block streams a contiguous range of that order (its stripe), so
// its weight reads are one contiguous run of memory.
//
// Inside a tile: warp w (0..3) owns outputs n0 + 32w .. +31, and the tile's two k32 halves h; for each (w, h)
// every lane holds `bits` 32-bit words in 16-byte groups (one group for 4-bit, two for 8-bit, the lanes' q-th
// groups side by side, stripe_lane_group_offset): one or two 128-bit loads give a lane all its B fragments of
// a 32 x 32 warp tile. The mma.sync m16n8k16 B fragment (PTX ISA,
// "Matrix fragments for mma.m16n8k16", .f16 B): lane l holds for output column n = l / 4 of an 8-wide
// n fragment the inputs k = 2(l % 4) + {0, 1} (register b0) and 8 + 2(l % 4) + {0, 1} (register b1).
//   4-bit word j (n fragment j of the warp's four): eight codes; the fast dequantization's raw order
//     (fast_dequant.h: pair p = codes p and p + 4) gives pairs 0, 1 = b0, b1 of k-step 0 (inputs 0..15 of the
//     k32 half) and pairs 2, 3 = b0, b1 of k-step 1 (inputs 16..31): so code e sits at pair p = e % 4, half
//     e / 4, k = 16 (p / 2) + 8 (p % 2) + 2 (l % 4) + e / 4.
//   8-bit word 2j + s (n fragment j, k-step s): four codes; raw order pair p = codes p and p + 2 gives b0, b1:
//     code e at k = 16 s + 8 (e % 2) + 2 (l % 4) + e / 2.
// All codes of one lane's word share one output n and one k32 half, hence one group when group_size is a
// multiple of 32 (required; a single group is always fine), so each word takes one scale and one zero point.
//
// Group parameters: params [groups_padded, n_padded] uint32, scale fp16 bits in the low half and the zero point
// (zero_adjust already added) in the high half. A block loads a row into its stage only when a k32 half starts
// a new group or starts the block's part of a column (stripe_cursor_needs_params); only then does each lane
// turn its four parameters into the dequantization's packed-half operands (StripeLaneGroups), which it keeps in
// registers for the tiles that follow.
//
// Rows. A block computes a row block of 16·m_frags rows (stripe_m_frags: one, two or four m16 fragments of
// A); a launch's rows are its row blocks, each with the same stripes over the same tiles. The grid is one
// dimension, row block fastest (stripe_grid_block): the row blocks of one stripe are neighbours in launch
// order, so they are dispatched together and read the same weight tiles at about the same time, one HBM read and
// L2 hits for the others, whatever the L2 keeps of the rest of the layer. (CUDA promises no dispatch order: a
// performance bet on the hardware's, never a correctness assumption; no block waits for another.)
//
// Stripes and the reduction. T = n_tiles · k_tiles tiles over B blocks, tiles_per_block = ceil(T / B), block b
// takes [b · per, min(T, (b + 1) · per)) (no block is empty: B is recomputed from per). The blocks touching a
// column nt are the column's segments s = 0, 1, ... in k order. A column with one segment is written to C
// directly. Otherwise each segment writes its fp32 partial sums [its row block's rows, 128] to slot s of the
// workspace, then increments the counter of (row block, column); the block that brings it to the segment count
// (whichever arrives last) sums the slots in the order s = 0, 1, ... (fixed: the result does not depend on which
// block was last), rounds once to fp16, writes C and resets the counter to 0 for the next launch. The counters belong to the layer and
// start at 0: launches on one layer must not overlap in time (one stream, or ordered by events).
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "qgru/kernels/fast_dequant.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/kernels/quant_linear_tile.h"
#include "qgru/hd.h"

namespace qgru::kernels {

inline constexpr int kStripeTileK = 64;       // inputs per block tile (two k32 halves)
inline constexpr int kStripeTileN = 128;      // outputs per block tile (four warps of 32)
inline constexpr int kStripeWarps = 4;
inline constexpr int kStripeThreads = 32 * kStripeWarps;
inline constexpr int kStripeTileM = 16;       // rows of one mma m16 fragment of A
inline constexpr int kStripeStages = 4;       // cp.async pipeline depth
inline constexpr int kStripeLdA = kStripeTileK + 8;  // A stage row, padded by 8 halves (conflict-free ldmatrix)
// Blocks per multiprocessor the stripes aim at unless tuned (LinearTuning::target_blocks_per_sm): enough
// bytes in flight per SM (3 stages of 4 KiB per block at 4 bits) to cover HBM latency. A first guess, not yet
// measured: the benchmark sweeps it (--blocks-per-sm).
inline constexpr int kStripeBlocksPerSm = 4;
// Rows per launch: a call with more rows runs several launches in stream order (the counters are sized for it).
inline constexpr int64_t kStripeMaxRows = 1024;
inline constexpr int64_t kStripeMaxMTiles = kStripeMaxRows / kStripeTileM;
// The column counters of a layer (one per row block of a launch and column tile, at most one per m16 tile),
// 0 between launches.
inline constexpr int64_t stripe_counter_count(int64_t n_padded) { return kStripeMaxMTiles * (n_padded / kStripeTileN); }

// Rows per block. A block holds the accumulators of m_frags m16 fragments (1, 2 or 4: up to 64 rows), so a
// launch of up to 64 rows has one row block and reads each weight byte once (the weights' L2 policy is then
// evict-first); more rows run in row blocks of 64, each streaming the weights again, from L2 where the row
// blocks of a stripe run together (stripe_grid_block).
// Per tile a warp's dequantized B fragments serve m_frags A fragments: 8·m_frags mma.sync per k32 half
// against one dequantization, so the kernel stays bound by weight bytes up to about 64 rows. Fragments past
// M are zero rows, computed and never stored (M = 33..64 share the 4-fragment kernel).
inline constexpr int kStripeMaxMFrags = 4;
QGRU_HD constexpr int stripe_m_frags(int64_t M) { return M <= kStripeTileM ? 1 : M <= 2 * kStripeTileM ? 2 : kStripeMaxMFrags; }
QGRU_HD constexpr int64_t stripe_m_blocks(int64_t M) {
  return (M + kStripeTileM * stripe_m_frags(M) - 1) / (kStripeTileM * stripe_m_frags(M));
}
// Grid block `linear` (0 .. blocks · m_blocks - 1) of a launch: its stripe block and its row block, row block
// fastest. 32-bit: the launcher refuses grids of 2^31 blocks or more.
struct StripeGridBlock {
  int32_t block;      // the stripe (stripe_block_range)
  int32_t row_block;  // rows 16·m_frags·row_block ..
};
QGRU_HD StripeGridBlock stripe_grid_block(int32_t linear, int32_t m_blocks) {
  const int32_t block = linear / m_blocks;
  return {block, linear - block * m_blocks};
}

QGRU_HD constexpr int stripe_words_per_lane(int bits) { return bits; }  // 32x32 codes / 32 lanes / (32 / bits)
QGRU_HD constexpr int stripe_tile_words(int bits) { return kStripeWarps * 2 * 32 * stripe_words_per_lane(bits); }
QGRU_HD constexpr int stripe_tile_bytes(int bits) { return 4 * stripe_tile_words(bits); }

// Shared memory of one stage and of the block (bytes): W tile | A tile [16·m_frags, kStripeLdA] fp16 | params
// [2 halves, 128] uint32; every region a multiple of 16 bytes. 4-bit: 29,696 bytes at one fragment, 57,344 at
// four (past the 48 KiB a launch gets without opting in: the kernel takes dynamic shared memory).
QGRU_HD constexpr int stripe_a_stage_bytes(int m_frags) { return 2 * kStripeTileM * m_frags * kStripeLdA; }
QGRU_HD constexpr int stripe_params_stage_bytes() { return 4 * 2 * kStripeTileN; }
QGRU_HD constexpr int stripe_stage_bytes(int bits, int m_frags) {
  return stripe_tile_bytes(bits) + stripe_a_stage_bytes(m_frags) + stripe_params_stage_bytes();
}
QGRU_HD constexpr int stripe_smem_bytes(int bits, int m_frags) { return kStripeStages * stripe_stage_bytes(bits, m_frags); }

// ---- the per-lane mapping of the repacked words ----

struct StripeKN {
  int k, n;  // inside the 32 x 32 warp tile
};
// Input k and output n (relative to the warp tile's origin) of code e of word `word` of lane `lane`.
QGRU_HD StripeKN stripe_code_position(int bits, int lane, int word, int e) {
  const int quad = lane % 4, column = lane / 4;
  if (bits == 4) {
    const int p = e % 4;
    return {16 * (p / 2) + 8 * (p % 2) + 2 * quad + e / 4, 8 * word + column};
  }
  const int j = word / 2, s = word % 2;
  return {16 * s + 8 * (e % 2) + 2 * quad + e / 2, 8 * j + column};
}

// Index of word `word` of lane `lane` for warp w, half h of tile (nt, kt), in the repacked array.

// A lane's words come in 16-byte groups q = 0 .. bits/4 - 1 (words 4q .. 4q+3). Offset (in words, from the
// tile's start, also in its shared-memory stage) of group q of lane `lane` for warp w, half h: the 32 lanes'
// q-th groups are consecutive, so each group is one conflict-free 128-bit shared load across the warp.
QGRU_HD int stripe_lane_group_offset(int bits, int w, int h, int lane, int q) {
  return (((w * 2 + h) * (bits / 4) + q) * 32 + lane) * 4;
}

// The `Bits` words of lane `lane` for warp w, half h, from a tile (or its stage) starting at `tile`.
template <int Bits>
QGRU_HD void stripe_lane_words(const uint32_t* tile, int w, int h, int lane, uint32_t* words) {
  for (int q = 0; q < Bits / 4; ++q)
    for (int i = 0; i < 4; ++i) words[4 * q + i] = tile[stripe_lane_group_offset(Bits, w, h, lane, q) + i];
}

// Offset (in words, from the stage's params region: [2 halves, 128 outputs]) of the group parameters of n
// fragment j of warp w, lane `lane`, half h.
QGRU_HD int stripe_param_stage_index(int h, int w, int j, int lane) { return h * kStripeTileN + 32 * w + 8 * j + lane / 4; }

QGRU_HD int64_t stripe_word_index(int bits, int64_t k_tiles, int64_t nt, int64_t kt, int w, int h, int lane, int word) {
  const int64_t tile = nt * k_tiles + kt;
  return tile * stripe_tile_words(bits) + stripe_lane_group_offset(bits, w, h, lane, word / 4) + word % 4;
}

// Group parameters packed in one word, and their halves.
QGRU_HD constexpr uint32_t stripe_param(uint16_t scale_bits, uint32_t zero) { return scale_bits | (zero << 16); }
QGRU_HD constexpr uint16_t stripe_param_scale(uint32_t param) { return static_cast<uint16_t>(param & 0xFFFFu); }
QGRU_HD constexpr uint32_t stripe_param_zero(uint32_t param) { return param >> 16; }

// The group operands of one lane for one k32 half, prepared for the dequantization: g[j] for n fragment j
// (output 8j + lane / 4 of the warp's 32), DequantU4Group / DequantU8Group (fast_dequant.h) from the packed
// parameter. They change only where a group row starts (stripe_cursor_needs_params): the kernel prepares them
// there and keeps them in registers across the tiles of the group, instead of unpacking and splatting the
// parameters again on every tile. Bit moves only: the dequantized halves are those of the packed form.
template <int Bits>
struct StripeLaneGroups {
  static_assert(Bits == 4 || Bits == 8, "4- or 8-bit codes");
  std::conditional_t<Bits == 4, DequantU4Group, DequantU8Group> g[4];
};
// From the packed parameters: params[j] of output 8j + lane / 4.
template <int Bits>
QGRU_HD StripeLaneGroups<Bits> stripe_lane_groups(const uint32_t* params) {
  StripeLaneGroups<Bits> out;
  for (int j = 0; j < 4; ++j) {
    if constexpr (Bits == 4) {
      out.g[j] = dequant_u4_group(stripe_param_zero(params[j]), stripe_param_scale(params[j]));
    } else {
      out.g[j] = dequant_u8_group(stripe_param_zero(params[j]), stripe_param_scale(params[j]));
    }
  }
  return out;
}
// From a stage's params region ([2 halves, 128 outputs], stripe_param_stage_index): lane `lane` of warp w, half h.
template <int Bits>
QGRU_HD StripeLaneGroups<Bits> stripe_lane_groups_from_stage(const uint32_t* stage_params, int h, int w, int lane) {
  uint32_t params[4];
  for (int j = 0; j < 4; ++j) params[j] = stage_params[stripe_param_stage_index(h, w, j, lane)];
  return stripe_lane_groups<Bits>(params);
}

// The B fragments of one lane for one 32 x 32 warp tile: b[j][s][r] = register r (b0, b1) of n fragment j,
// k-step s, two packed halves each; `words` the lane's words, groups.g[j] the prepared group operands of
// output 8j + lane / 4. Each half is RN_fp16(s · (u − z)) exactly (fast_dequant.h).
struct StripeBFragments {
  uint32_t b[4][2][2];
};
template <int Bits>
QGRU_HD StripeBFragments stripe_dequant_lane(const uint32_t* words, const StripeLaneGroups<Bits>& groups) {
  StripeBFragments out;
  if constexpr (Bits == 4) {
    for (int j = 0; j < 4; ++j) {
      const F16x2x4 h = dequant_u4x8_raw(words[j], groups.g[j]);
      out.b[j][0][0] = h.pair[0];
      out.b[j][0][1] = h.pair[1];
      out.b[j][1][0] = h.pair[2];
      out.b[j][1][1] = h.pair[3];
    }
  } else {
    for (int j = 0; j < 4; ++j) {
      for (int s = 0; s < 2; ++s) {
        const F16x2x2 h = dequant_u8x4_raw(words[2 * j + s], groups.g[j]);
        out.b[j][s][0] = h.pair[0];
        out.b[j][s][1] = h.pair[1];
      }
    }
  }
  return out;
}
// The same from the packed parameters, params[j] of output 8j + lane / 4.
template <int Bits>
QGRU_HD StripeBFragments stripe_dequant_lane(const uint32_t* words, const uint32_t* params) {
  return stripe_dequant_lane<Bits>(words, stripe_lane_groups<Bits>(params));
}

// Offset (in halves, from the A stage's start) of the row lane `lane` hands ldmatrix.x4 for the A fragment of
// k-step s of half h: matrices 0..3 = (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15,
// k 8-15) of the 16 x 16 block, which ldmatrix.x4 returns as registers a0..a3 of the mma A fragment.
// m16 fragment f of the block's rows starts 16·f rows further down the stage.
QGRU_HD int stripe_a_ldmatrix_offset(int lane, int h, int s, int f) {
  return (kStripeTileM * f + lane % 16) * kStripeLdA + 32 * h + 16 * s + 8 * (lane / 16);
}

// ---- the pipeline's stage loads ----

// The weights' L2 policy: evict first where the launch reads each weight byte once (one row block), so they
// do not push A, the group rows or the partial sums out of L2; evict normal where later row blocks read them
// again. 0 on the host (no cache to hint).
QGRU_HD uint64_t stripe_weight_policy(bool read_once) {
#if defined(__CUDA_ARCH__)
  uint64_t policy;
  if (read_once) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(policy));
  }
  return policy;
#else
  static_cast<void>(read_once);
  return 0;
#endif
}

// 16 bytes global -> shared, asynchronously with an L2 policy on the device (cp.async.cg ... L2::cache_hint,
// sm_80+; completed by copy_async_commit + copy_async_wait); a plain copy on the host.
QGRU_HD void copy16_async_hinted(void* smem_dst, const void* gmem_src, uint64_t policy) {
#if defined(__CUDA_ARCH__)
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "l"(policy));
#else
  static_cast<void>(policy);
  std::memcpy(smem_dst, gmem_src, 16);
#endif
}

// One stage of the pipeline in shared memory: the tile's words, A [16·m_frags, kStripeLdA] fp16, params [2, 128].
struct StripeStage {
  uint32_t* words;
  uint16_t* a;
  uint32_t* params;
};

// ---- the stripe partition ----

struct StripePlan {
  int m_frags = 1;               // m16 fragments per block (stripe_m_frags)
  int64_t m_blocks = 0;          // row blocks of 16·m_frags rows
  int64_t n_tiles = 0, k_tiles = 0;  // tiles of 128 outputs, 64 inputs
  int64_t tiles = 0;             // n_tiles · k_tiles (per row block)
  int64_t tiles_per_block = 0;
  int64_t blocks = 0;            // per row block: grid = (blocks, m_blocks)
  int64_t max_segments = 0;      // largest number of blocks sharing a column
};
inline StripePlan plan_stripes(int64_t M, int64_t n_padded, int64_t k_padded, int64_t target_blocks) {
  StripePlan p;
  p.m_frags = stripe_m_frags(M);
  p.m_blocks = stripe_m_blocks(M);
  p.n_tiles = n_padded / kStripeTileN;
  p.k_tiles = k_padded / kStripeTileK;
  p.tiles = p.n_tiles * p.k_tiles;
  const int64_t want = target_blocks < 1 ? 1 : (target_blocks > p.tiles ? p.tiles : target_blocks);
  p.tiles_per_block = (p.tiles + want - 1) / want;
  p.blocks = (p.tiles + p.tiles_per_block - 1) / p.tiles_per_block;
  for (int64_t nt = 0; nt < p.n_tiles; ++nt) {
    const int64_t first = nt * p.k_tiles / p.tiles_per_block, last = ((nt + 1) * p.k_tiles - 1) / p.tiles_per_block;
    if (last - first + 1 > p.max_segments) p.max_segments = last - first + 1;
  }
  return p;
}

// The column segments: which blocks touch column nt, and block b's segment number in it.
struct StripeColumn {
  int64_t first_block, segments;
};
QGRU_HD StripeColumn stripe_column(int64_t nt, int64_t k_tiles, int64_t tiles_per_block) {
  const int64_t first = nt * k_tiles / tiles_per_block, last = ((nt + 1) * k_tiles - 1) / tiles_per_block;
  return {first, last - first + 1};
}
struct TileRange {
  int64_t begin, end;
};
QGRU_HD TileRange stripe_block_range(int64_t b, int64_t tiles, int64_t tiles_per_block) {
  const int64_t begin = b * tiles_per_block;
  return {begin, begin + tiles_per_block < tiles ? begin + tiles_per_block : tiles};
}

// ---- a block's walk over its stripe ----
//
// The kernel visits its stripe's tiles in order t = begin, begin + 1, ..., end - 1, tile t being column tile
// nt = t / k_tiles and k tile kt = t % k_tiles; half h of it reads group row (64 kt + 32 h) / group_size. The walk
// gives the same sequence without a division per tile: the divisions happen once, when the block starts
// (stripe_walk, stripe_walk_start), and each step advances kt, wrapping to the next column, and the position
// inside the current group (stripe_walk_advance). The kernel runs two cursors over one walk: the tile it
// computes and the tile it loads, kStripeStages - 1 ahead. stripe_linear_test.cpp checks every step of every
// stripe of many partitions against the division formulas.
//
// Index bound: a walk holds tiles, column and k tiles, input and output positions and group rows in int32.
// stripe_unsupported_reason refuses a layer whose padded K, padded N or tile count exceeds kStripeMaxIndex, so
// t < tiles + kStripeStages (the load cursor runs past the stripe's end by up to kStripeStages - 1 steps, never
// reading), 64 kt + 64 <= k_padded and 128 nt + 128 <= n_padded all fit; group rows are < k_padded / 32.
inline constexpr int64_t kStripeMaxIndex = 0x7FFFFFFF - kStripeStages;

// The per-block constants of a walk (int32: the bound above).
struct StripeWalk {
  int32_t begin, end;        // the stripe [begin, end)
  int32_t k_tiles;
  int32_t group_size;        // effective: a multiple of 32 (or k_padded, a multiple of 64)
  int32_t first_column;      // begin / k_tiles
  int32_t first_segment;     // the block's segment number in its first column (0 when the stripe starts it)
  int32_t last_segments;     // the segment count of the stripe's last column
};
QGRU_HD StripeWalk stripe_walk(int64_t block, int64_t tiles, int64_t tiles_per_block, int64_t k_tiles, int64_t group_size) {
  const TileRange range = stripe_block_range(block, tiles, tiles_per_block);
  StripeWalk w;
  w.begin = static_cast<int32_t>(range.begin);
  w.end = static_cast<int32_t>(range.end);
  w.k_tiles = static_cast<int32_t>(k_tiles);
  w.group_size = static_cast<int32_t>(group_size);
  // int32 throughout (the bound): 32-bit divisions, once per block
  const int32_t per = static_cast<int32_t>(tiles_per_block), b = static_cast<int32_t>(block);
  w.first_column = w.begin / w.k_tiles;
  w.first_segment = b - w.first_column * w.k_tiles / per;  // stripe_column(first_column).first_block
  const int32_t last_column = (w.end - 1) / w.k_tiles;
  w.last_segments = ((last_column + 1) * w.k_tiles - 1) / per - last_column * w.k_tiles / per + 1;
  return w;
}

// Where a cursor stands: tile t and what the kernel needs of it.
struct StripeCursor {
  int32_t t;              // nt · k_tiles + kt
  int32_t nt, kt;         // column tile, k tile
  int32_t group;          // group row of half 0: 64 kt / group_size
  int32_t group_offset;   // 64 kt % group_size: a multiple of 32 (so is group_size), < group_size
  bool segment_start;     // the block's part of column nt starts here: the stripe's first tile, or kt == 0
};
// The cursor on the stripe's first tile.
QGRU_HD StripeCursor stripe_walk_start(const StripeWalk& w) {
  StripeCursor c;
  c.t = w.begin;
  c.nt = w.first_column;
  c.kt = w.begin - w.first_column * w.k_tiles;
  c.group = c.kt * kStripeTileK / w.group_size;
  c.group_offset = c.kt * kStripeTileK - c.group * w.group_size;
  c.segment_start = true;
  return c;
}
// One tile on: kt + 1, or kt = 0 of the next column. Inside a column the group offset grows by 64: from below
// group_size to below group_size + 64 <= 3 · group_size (group_size >= 32), so at most two group boundaries are
// crossed and two conditional subtractions bring it back into [0, group_size).
QGRU_HD void stripe_walk_advance(const StripeWalk& w, StripeCursor& c) {
  ++c.t;
  ++c.kt;
  if (c.kt == w.k_tiles) {
    c.kt = 0;
    ++c.nt;
    c.group = 0;
    c.group_offset = 0;
    c.segment_start = true;
    return;
  }
  c.segment_start = false;
  c.group_offset += kStripeTileK;
  if (c.group_offset >= w.group_size) {
    c.group_offset -= w.group_size;
    ++c.group;
  }
  if (c.group_offset >= w.group_size) {
    c.group_offset -= w.group_size;
    ++c.group;
  }
}
// Group row of half h (0, 1): 32 more inputs than half 0, which crosses into the next group exactly when they
// reach it (group_offset and group_size are multiples of 32).
QGRU_HD int32_t stripe_cursor_group(const StripeWalk& w, const StripeCursor& c, int h) {
  return c.group + (h == 1 && c.group_offset + 32 == w.group_size ? 1 : 0);
}
// Whether half h must load its group parameters: it starts a group, or (h == 0) the block's part of the column.
QGRU_HD bool stripe_cursor_needs_params(const StripeWalk& w, const StripeCursor& c, int h) {
  return h == 0 ? c.segment_start || c.group_offset == 0 : c.group_offset + 32 == w.group_size;
}
// Whether the block's part of column nt ends at this tile: the column's last k tile, or the stripe's last tile.
QGRU_HD bool stripe_cursor_segment_end(const StripeWalk& w, const StripeCursor& c) {
  return c.kt + 1 == w.k_tiles || c.t + 1 == w.end;
}
// At a segment's end: the block's segment number in column nt and the column's segment count (stripe_column),
// without a division. A part that starts at kt == 0 is the column's first (segment 0), else it is the stripe's
// first column's (first_segment); a part that ends at the column's last k tile is the column's last (count =
// segment + 1), else it is the stripe's last column's (last_segments).
struct StripeSegment {
  int32_t segment, segments;
};
QGRU_HD StripeSegment stripe_cursor_segment(const StripeWalk& w, const StripeCursor& c) {
  const int32_t segment = c.nt == w.first_column ? w.first_segment : 0;
  return {segment, c.kt + 1 == w.k_tiles ? segment + 1 : w.last_segments};
}

// ---- the pipeline's stage loads ----

// What the stage loads read (device pointers on the GPU).
struct StripeSources {
  const uint32_t* words;   // the repacked tiles
  const uint16_t* a;       // fp16 [M, K], gathered for act-order
  const uint32_t* params;  // [groups_padded, n_padded]
  int64_t M;
  int32_t K;               // <= k_padded <= kStripeMaxIndex
  int64_t n_padded;
};

// Thread tid's row of A in m16 fragment f of the launch (row tid / 8 of rows 16 f .. 16 f + 15), or nullptr past
// M: the same for every tile of the block, so the kernel takes it once per fragment.
QGRU_HD const uint16_t* stripe_a_row(const StripeSources& src, int64_t f, int tid) {
  const int64_t m = f * kStripeTileM + tid / 8;
  return m < src.M ? src.a + m * src.K : nullptr;
}

// Thread tid's first 16-byte chunk of words in tile t. The tiles of a stripe are consecutive, so the kernel takes
// this once and steps it by stripe_tile_words(bits) per tile (one 64-bit add), instead of forming the address
// from t and tid on every tile.
template <int Bits>
QGRU_HD const uint32_t* stripe_tile_thread_words(const StripeSources& src, int32_t t, int tid) {
  return src.words + static_cast<int64_t>(t) * stripe_tile_words(Bits) + 4 * tid;
}

// Thread tid's copies of the cursor's tile into `stage`: its share of the tile's 16-byte chunks of words
// (thread_words = stripe_tile_thread_words of the cursor's tile, or null to form the address from the cursor's tile
// index here; with the weights' policy; chunks tid, tid + 128, ...), one 16-byte chunk of A per m16 fragment f (row tid / 8
// of the fragment, from a_rows[f] = stripe_a_row of the block's fragment f; inputs 8·(tid % 8); zeros past M or
// K, K % 8 == 0), and for tid < 64 one chunk of the group row of half tid / 32 when that half needs it
// (stripe_cursor_needs_params). Offsets within the layer are int32 (the walk's bound), element offsets of
// whole arrays int64.
// Thread tid's share of the cursor's tile of words (chunks tid, tid + 128, ...) into stage_words, with the
// weights' policy: from thread_words (stripe_tile_thread_words of the cursor's tile) or, when that is null, from
// the address formed from the cursor's tile index.
template <int Bits>
QGRU_HD void stripe_load_tile_words(const StripeSources& src, const StripeCursor& at, int tid, const uint32_t* thread_words,
                                    uint32_t* stage_words, uint64_t policy) {
  constexpr int kChunks = stripe_tile_bytes(Bits) / 16;
  static_assert(kChunks % kStripeThreads == 0, "whole 16-byte chunks per thread");
  if (thread_words != nullptr) {
    for (int i = 0; i < kChunks / kStripeThreads; ++i) {
      copy16_async_hinted(stage_words + 4 * (tid + i * kStripeThreads), thread_words + 4 * i * kStripeThreads, policy);
    }
  } else {
    const uint32_t* tile = src.words + static_cast<int64_t>(at.t) * stripe_tile_words(Bits);
    for (int i = 0; i < kChunks / kStripeThreads; ++i) {
      const int chunk = tid + i * kStripeThreads;
      copy16_async_hinted(stage_words + 4 * chunk, tile + 4 * chunk, policy);
    }
  }
}
// For tid < 64: one chunk of the group row of half tid / 32 into stage_params, when that half needs it
// (stripe_cursor_needs_params).
QGRU_HD void stripe_load_tile_params(const StripeSources& src, const StripeWalk& walk, const StripeCursor& at, int tid,
                                     uint32_t* stage_params) {
  if (tid < 2 * kStripeTileN / 4) {
    const int h = tid / 32, c = tid % 32;
    if (stripe_cursor_needs_params(walk, at, h)) {
      const int64_t g = stripe_cursor_group(walk, at, h);
      copy16_async(stage_params + h * kStripeTileN + 4 * c, src.params + g * src.n_padded + (at.nt * kStripeTileN + 4 * c), true);
    }
  }
}

// Thread tid's copies of the cursor's tile into `stage`: its share of the tile's 16-byte chunks of words
// (thread_words = stripe_tile_thread_words of the cursor's tile, or null to form the address from the cursor's tile
// index here; with the weights' policy; chunks tid, tid + 128, ...), one 16-byte chunk of A per m16 fragment f (row tid / 8
// of the fragment, from a_rows[f] = stripe_a_row of the block's fragment f; inputs 8·(tid % 8); zeros past M or
// K, K % 8 == 0), and for tid < 64 one chunk of the group row of half tid / 32 when that half needs it
// (stripe_cursor_needs_params). Offsets within the layer are int32 (the walk's bound), element offsets of
// whole arrays int64.
template <int Bits, int MFrags>
QGRU_HD void stripe_load_tile(const StripeSources& src, const uint16_t* const* a_rows, const StripeWalk& walk,
                              const StripeCursor& at, int tid, const uint32_t* thread_words, const StripeStage& stage,
                              uint64_t policy) {
  stripe_load_tile_words<Bits>(src, at, tid, thread_words, stage.words, policy);
  const int row = tid / 8, col = 8 * (tid % 8);
  const int32_t k = at.kt * kStripeTileK + col;
  for (int f = 0; f < MFrags; ++f) {
    const bool valid = a_rows[f] != nullptr && k < src.K;
    copy16_async(stage.a + (kStripeTileM * f + row) * kStripeLdA + col, valid ? a_rows[f] + k : src.a, valid);
  }
  stripe_load_tile_params(src, walk, at, tid, stage.params);
}

// Workspace: fp32 partial sums [max_segments][M][n_padded]; element of (segment, row, column).
QGRU_HD int64_t stripe_partial_index(int64_t segment, int64_t row, int64_t n, int64_t M, int64_t n_padded) {
  return (segment * M + row) * n_padded + n;
}

// ---- the last block's sum of a column's partial slots ----
//
// The block that completes a column's counter sums, for every row of its row block and every output of the column,
// the column's segments' fp32 partials in slot order 0, 1, ... starting from 0.0f (the same bits whichever block
// came last), and rounds once to fp16. Its 128 threads take the outputs four adjacent columns at a time (one
// 16-byte load per slot: n_padded and n are multiples of 4, the workspace 16-byte aligned) and kStripeSumGroups
// such groups at once, loading kStripeSumSlots slots of each before adding them: the loads of a thread are
// independent of each other (only the additions are ordered), so this keeps up to 8 of them in flight per
// thread instead of one, which is what bounds the tail a column's last block adds (64 rows x 128 outputs x the
// segments at M = 64).
inline constexpr int kStripeSumGroups = 2;  // groups of 4 outputs a thread sums at once
inline constexpr int kStripeSumSlots = 4;   // slots of each loaded before they are added
// The group of 4 adjacent outputs a thread of the reduction takes: group e of the row block's rows x 32 groups.
struct StripeSumGroup {
  int64_t row;  // in the launch
  int64_t n;    // first of the 4 outputs, n % 4 == 0
};
QGRU_HD StripeSumGroup stripe_sum_group(int64_t first_row, int64_t nt, int64_t e) {
  return {first_row + e / (kStripeTileN / 4), nt * kStripeTileN + 4 * (e % (kStripeTileN / 4))};
}
// 16 bytes of partials; through L2 on the device (the other blocks wrote them: never a stale L1 line).
struct StripeFloat4 {
  float v[4];
};
QGRU_HD StripeFloat4 stripe_load_partials4(const float* at) {
#if defined(__CUDA_ARCH__)
  const float4 f = __ldcg(reinterpret_cast<const float4*>(at));
  return {{f.x, f.y, f.z, f.w}};
#else
  return {{at[0], at[1], at[2], at[3]}};
#endif
}
// sums[g] = Σ_s workspace[first[g] + s·slot_stride + 0..3] over s = 0 .. segments - 1 in that order from 0.0f, for
// g < count (count <= kStripeSumGroups); first[g] = stripe_partial_index(0, row, n, M, n_padded), slot_stride =
// M·n_padded.
QGRU_HD void stripe_sum_slots(const float* workspace, const int64_t (&first)[kStripeSumGroups], int count,
                              int64_t slot_stride, int32_t segments, StripeFloat4 (&sums)[kStripeSumGroups]) {
  for (int g = 0; g < kStripeSumGroups; ++g)
    for (int i = 0; i < 4; ++i) sums[g].v[i] = 0.0f;
  for (int32_t base = 0; base < segments; base += kStripeSumSlots) {
    StripeFloat4 loaded[kStripeSumGroups][kStripeSumSlots] = {};
    for (int g = 0; g < kStripeSumGroups; ++g)
      for (int k = 0; k < kStripeSumSlots; ++k)
        if (g < count && base + k < segments) loaded[g][k] = stripe_load_partials4(workspace + first[g] + (base + k) * slot_stride);
    for (int g = 0; g < kStripeSumGroups; ++g)
      for (int k = 0; k < kStripeSumSlots; ++k)
        if (g < count && base + k < segments)
          for (int i = 0; i < 4; ++i) sums[g].v[i] += loaded[g][k].v[i];
  }
}

// A thread's pass of the last block's sum: the groups e0, e0 + kStripeThreads, ... (kStripeSumGroups of them, those
// below `groups`, the row block's rows x 32), their outputs in at[] and their sums (stripe_sum_slots over `segments`
// slots) in sums[]. Returns how many of the kStripeSumGroups there are; the kernel and the emulation store those.
QGRU_HD int stripe_sum_pass(const float* workspace, int64_t first_row, int64_t nt, int64_t e0, int64_t groups, int64_t M,
                            int64_t n_padded, int32_t segments, StripeSumGroup (&at)[kStripeSumGroups],
                            StripeFloat4 (&sums)[kStripeSumGroups]) {
  int64_t first[kStripeSumGroups];
  int count = 0;
  for (int g = 0; g < kStripeSumGroups; ++g) {
    const int64_t e = e0 + int64_t{g} * kStripeThreads;
    at[g] = stripe_sum_group(first_row, nt, e);
    first[g] = stripe_partial_index(0, at[g].row, at[g].n, M, n_padded);
    if (e < groups) count = g + 1;
  }
  stripe_sum_slots(workspace, first, count, M * n_padded, segments, sums);
  return count;
}

// The accumulator element c of n fragment j of warp w, lane `lane`: (row in its m16 fragment, column in the 128).
struct StripeRowCol {
  int row, col;
};
QGRU_HD StripeRowCol stripe_acc_position(int w, int j, int lane, int c) {
  return {lane / 4 + 8 * (c / 2), 32 * w + 8 * j + 2 * (lane % 4) + c % 2};
}

// The whole dequantized weight from the stripes layout (the DequantGemm engine, linear_plan.h): lane `lane`
// of warp w, half h of tile (nt, kt) writes its 4 x 2 x 2 x 2 halves to w16 [K, N] row-major (row k' in the
// layer's K order, i.e. after the act-order permutation); padding is skipped. params_row: the group row of
// this half (params + g · n_padded), read at outputs nt·128 + 32w + 8j + lane / 4.
template <int Bits>
QGRU_HD void stripe_dequant_lane_to_matrix(const uint32_t* words, const uint32_t* params_row, int64_t K, int64_t N,
                                           int64_t nt, int64_t kt, int w, int h, int lane, uint16_t* w16) {
  const int64_t n_base = nt * kStripeTileN + 32 * w, k_base = kt * kStripeTileK + 32 * h;
  uint32_t params[4];
  for (int j = 0; j < 4; ++j) params[j] = params_row[n_base + 8 * j + lane / 4];
  const StripeBFragments f = stripe_dequant_lane<Bits>(words, params);
  for (int j = 0; j < 4; ++j)
    for (int s = 0; s < 2; ++s)
      for (int r = 0; r < 2; ++r)
        for (int half = 0; half < 2; ++half) {
          // the B fragment (PTX ISA): register r holds k = 2(lane % 4) + 8r + half, n = lane / 4
          const int64_t k = k_base + 16 * s + 2 * (lane % 4) + 8 * r + half, n = n_base + 8 * j + lane / 4;
          if (k < K && n < N) w16[k * N + n] = static_cast<uint16_t>(half ? f.b[j][s][r] >> 16 : f.b[j][s][r] & 0xFFFFu);
        }
}

// ---- the load-time repack (host) ----

struct StripeWeights {
  int bits = 4;
  int64_t K = 0, N = 0, k_padded = 0, n_padded = 0;
  int64_t group_size = 0;  // effective: a multiple of 32, or k_padded for a single group
  int64_t groups_padded = 0;
  std::vector<uint32_t> words;   // the tiles, stripe_word_index order
  std::vector<uint32_t> params;  // [groups_padded, n_padded] stripe_param
  std::vector<int32_t> perm;     // act-order: A column perm[k'] feeds input k'; empty when identity
};

// Why a layer cannot take the stripes layout ("" when it can). The legacy kernel serves the others.
inline std::string stripe_unsupported_reason(int bits, int64_t K, int64_t N, int64_t group_size) {
  if (bits != 4 && bits != 8) return "stripes kernel: only 4- and 8-bit codes";
  if (K % 8 != 0) return "stripes kernel: K must be a multiple of 8 (16-byte rows of A), got " + std::to_string(K);
  if (N % 8 != 0) return "stripes kernel: N must be a multiple of 8, got " + std::to_string(N);
  if (group_size < K && group_size % 32 != 0) {
    return "stripes kernel: group_size must be a multiple of 32 or a single group, got " + std::to_string(group_size);
  }
  // the walk's int32 indices (kStripeMaxIndex)
  const int64_t k_padded = (K + kStripeTileK - 1) / kStripeTileK * kStripeTileK;
  const int64_t n_padded = (N + kStripeTileN - 1) / kStripeTileN * kStripeTileN;
  if (k_padded > kStripeMaxIndex || n_padded > kStripeMaxIndex ||
      (k_padded / kStripeTileK) * (n_padded / kStripeTileN) > kStripeMaxIndex) {
    return "stripes kernel: K=" + std::to_string(K) + " N=" + std::to_string(N) + " too large: padded K, padded N and the " +
           "64 x 128 tile count must each stay below 2^31 - " + std::to_string(kStripeStages) + " (32-bit tile indices)";
  }
  return "";
}

// Repacks a checkpoint layer (qweight [K·bits/32, N], qzeros [G, N·bits/32], scales [G, N], g_idx [K] or
// empty; shapes already validated by the caller, stripe_unsupported_reason empty) into the stripes layout.
// Act-order: `order` from plan_act_order; codes are read in its order and the permutation is kept for the
// activations. Exact: codes, scales and zero points are moved, never computed.
inline StripeWeights repack_stripes(int bits, int64_t K, int64_t N, int64_t group_size, int zero_adjust,
                                    const std::vector<int32_t>& qweight, const std::vector<int32_t>& qzeros,
                                    const std::vector<uint16_t>& scales, const ActOrderPlan& order) {
  StripeWeights s;
  s.bits = bits;
  s.K = K;
  s.N = N;
  s.k_padded = (K + kStripeTileK - 1) / kStripeTileK * kStripeTileK;
  s.n_padded = (N + kStripeTileN - 1) / kStripeTileN * kStripeTileN;
  const int64_t groups = (K + group_size - 1) / group_size;
  s.group_size = groups == 1 ? s.k_padded : group_size;
  s.groups_padded = (s.k_padded + s.group_size - 1) / s.group_size;
  if (!order.identity) s.perm = order.perm;
  const auto* qw = reinterpret_cast<const uint32_t*>(qweight.data());
  const auto* qz = reinterpret_cast<const uint32_t*>(qzeros.data());
  // code(k', n) of the (possibly reordered) layer; 0 in the padding
  auto code = [&](int64_t k, int64_t n) -> uint32_t {
    if (k >= K || n >= N) return 0;
    return gptq_weight_code(qw, N, bits, order.identity ? k : order.perm[static_cast<size_t>(k)], n);
  };
  const int64_t k_tiles = s.k_padded / kStripeTileK, n_tiles = s.n_padded / kStripeTileN;
  s.words.assign(static_cast<size_t>(k_tiles * n_tiles * stripe_tile_words(bits)), 0u);
  const int per_word = 32 / bits;
  for (int64_t nt = 0; nt < n_tiles; ++nt)
    for (int64_t kt = 0; kt < k_tiles; ++kt)
      for (int w = 0; w < kStripeWarps; ++w)
        for (int h = 0; h < 2; ++h)
          for (int lane = 0; lane < 32; ++lane)
            for (int word = 0; word < stripe_words_per_lane(bits); ++word) {
              uint32_t packed = 0;
              for (int e = 0; e < per_word; ++e) {
                const StripeKN at = stripe_code_position(bits, lane, word, e);
                packed |= code(kt * kStripeTileK + 32 * h + at.k, nt * kStripeTileN + 32 * w + at.n) << (bits * e);
              }
              s.words[static_cast<size_t>(stripe_word_index(bits, k_tiles, nt, kt, w, h, lane, word))] = packed;
            }
  s.params.assign(static_cast<size_t>(s.groups_padded * s.n_padded), 0u);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t n = 0; n < N; ++n) {
      s.params[static_cast<size_t>(g * s.n_padded + n)] =
          stripe_param(scales[static_cast<size_t>(g * N + n)], gptq_zero(qz, N, bits, g, n, zero_adjust));
    }
  return s;
}

}  // namespace qgru::kernels
