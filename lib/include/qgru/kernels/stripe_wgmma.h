#pragma once
// The wgmma quantized linear for batches of up to 1024 rows on Hopper (cuda/src/quant_linear_wgmma.cu): the
// stripes kernel's weight layout, stripe partition, pipeline and fixed-order reduction (stripe_linear.h: read it
// first) with the product turned around so the tensor cores' warpgroup instruction takes it.
//
// The product. The block computes Cᵀ for its column tile: Dᵀ[128 outputs, rows] = Wᵀ[128, K] · Aᵀ[K, rows], as
// wgmma.mma_async m64nRk16 (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), R = the row
// block's rows (64 or 128), fp16 operands, fp32 accumulators:
//   - its A operand (64 outputs x 16 inputs) comes from registers: warp w of the warpgroup holds rows 16w .. 16w + 15
//     in the m16n8k16 A fragment layout. The dequantized weights of a lane are mma.sync B fragments (stripe_linear.h:
//     b[j][s][r] = inputs 16s + 2(lane % 4) + 8r + {0, 1}, output 8j + lane / 4 of the warp's 32); two n fragments
//     side by side, j = 2p and 2p + 1, are exactly the A fragment of 16 outputs (wgmma_dequant_pair). So each warp's 32
//     outputs are two m16 pieces p = 0, 1, and the block issues two wgmma per k16 step: pair p's instruction has
//     rows 16w + i = output 32w + 16p + i; the block's two warpgroups take one pair each (kWgmmaThreads below). The
//     repacked words, their groups and the dequantization are the stripes kernel's, unchanged.
//   - its B operand (16 inputs x R rows of A, "K-major": each row's inputs contiguous) comes from shared memory
//     through a matrix descriptor, in the 128-byte swizzled layout: row m of the stage's A tile is 128 bytes (64
//     inputs), its 16-byte chunk q stored at chunk q ^ (m % 8) (wgmma_a_chunk_offset), the tile 1024-byte aligned.
//     Eight threads copy one row's 128 bytes, so the global reads are whole rows and the shared writes hit 8
//     different chunks. k16 step ks of the tile starts 32·ks bytes into the rows (wgmma_b_descriptor).
//   - the accumulators of pair p: element e of a lane holds (output 32w + 16p + lane / 4 + 8·((e % 4) / 2),
//     row 8·(e / 4) + 2(lane % 4) + e % 2) (wgmma_acc_position).
//
// Synchronization (the kernel): the stage's copies land (cp.async.wait_group), each thread makes its writes
// visible to the async proxy the tensor cores read through (fence.proxy.async.shared::cta), then the block's
// barrier; wgmma.fence before each tile's instructions (their A registers were just written); one commit group per
// tile; a group is waited for before its stage is reloaded, before its A registers are rewritten, and before the
// accumulators are read (segment end): wait_group 0 at the tile's end at 64 rows, wait_group 1 after the next
// tile's group with the overlap at 128 rows (wgmma_overlaps).
#include <cstdint>

#include "qgru/hd.h"
#include "qgru/kernels/stripe_linear.h"

namespace qgru::kernels {

// Rows of a block's row block: 64 up to 64 rows (one row block), 128 beyond (fewer weight streams from L2).
QGRU_HD constexpr int wgmma_rows(int64_t M) { return M <= 64 ? 64 : 128; }

// Overlap: at 128 rows a block is alone on its SM (about 245 registers a thread), so nothing else covers the tensor cores
// while it prepares a tile; it leaves each tile's wgmma running through the next tile's barrier, copies and
// dequantization (into a second set of fragment registers) and waits for them only after issuing the next tile's
// (wait_group 1). The copies then run two tiles ahead instead of three, so that the slot a copy refills is never
// the one the running instructions read. At 64 rows two blocks share an SM and cover each other; a tile's
// instructions complete within it (wait_group 0), three tiles ahead. stripe_wgmma_test.cpp runs each instruction
// group's shared-memory reads at the latest moment the kernel's waits allow.
QGRU_HD constexpr bool wgmma_overlaps(int rows) { return rows == 128; }
QGRU_HD constexpr int wgmma_tiles_ahead(int rows) { return wgmma_overlaps(rows) ? kStripeStages - 2 : kStripeStages - 1; }

// Shared memory: per stage [A tile: rows x 128 bytes, 1024-aligned][words tile][params: 2 halves x 128 uint32];
// every region a multiple of 1024 bytes, so every stage's A tile stays 1024-aligned. The block asks for 1024
// bytes more than its stages and aligns the base itself (the static shared variables come first).
QGRU_HD constexpr int wgmma_a_stage_bytes(int rows) { return rows * 2 * kStripeTileK; }
QGRU_HD constexpr int wgmma_stage_bytes(int bits, int rows) {
  return wgmma_a_stage_bytes(rows) + stripe_tile_bytes(bits) + stripe_params_stage_bytes();
}
inline constexpr int kWgmmaSmemAlign = 1024;
QGRU_HD constexpr int wgmma_smem_bytes(int bits, int rows) { return kStripeStages * wgmma_stage_bytes(bits, rows) + kWgmmaSmemAlign; }
static_assert(wgmma_stage_bytes(4, 64) % kWgmmaSmemAlign == 0 && wgmma_stage_bytes(8, 128) % kWgmmaSmemAlign == 0,
              "stages keep the A tiles 1024-byte aligned");

// Byte offset, from the A tile's 1024-aligned start, of 16-byte chunk q (inputs 8q .. 8q + 7) of row m: the
// 128-byte swizzle (chunk bits 4-6 of the address XOR row bits 7-9).
QGRU_HD constexpr int wgmma_a_chunk_offset(int m, int q) { return m * 128 + ((q ^ (m % 8)) * 16); }

inline constexpr int kWgmmaWarpgroups = 2;
inline constexpr int kWgmmaThreads = 128 * kWgmmaWarpgroups;
// The block: two warpgroups (kWgmmaThreads). Warpgroup g takes pair g of every warp tile: its warp w (0..3)
// dequantizes n fragments 2g and 2g + 1 of the stripes warp w's words (outputs 32w + 16g .. + 15) and issues
// the wgmma whose rows are those outputs. The dequantization is split, not repeated: each lane dequantizes
// half of what a stripes lane does, and holds the accumulators of one pair (rows / 2 of them).

// Thread tid's rows of A in row block mb: a_rows[i] = row tid / 8 + 32 i of the block (i < rows / 32), or null past
// M: the same for every tile of the block, so the kernel takes them once and adds only the tile's inputs.
template <int Rows>
QGRU_HD void wgmma_a_rows(const StripeSources& src, int64_t first_row, int tid, const uint16_t* (&a_rows)[Rows * 8 / kWgmmaThreads]) {
  for (int i = 0; i < Rows * 8 / kWgmmaThreads; ++i) {
    const int64_t row = first_row + tid / 8 + (kWgmmaThreads / 8) * i;
    a_rows[i] = row < src.M ? src.a + row * src.K : nullptr;
  }
}
// Thread tid's copies of A for the cursor's tile: chunks c = tid + 256 i (row c / 8 = tid / 8 + 32 i of the row
// block, a_rows[i] from wgmma_a_rows; inputs 8 (tid % 8) ..), zeros past M or K (K % 8 == 0). Input offsets are
// int32 (K <= kStripeMaxIndex). (The words and the group rows are loaded by warpgroup 0 with the stripes kernel's
// stripe_load_tile_words / stripe_load_tile_params.)
template <int Rows>
QGRU_HD void wgmma_load_a(const StripeSources& src, const uint16_t* const (&a_rows)[Rows * 8 / kWgmmaThreads], const StripeCursor& at,
                          int tid, unsigned char* stage_a) {
  static_assert(Rows * 8 % kWgmmaThreads == 0, "whole chunks per thread");
  const int q = tid % 8;
  const int32_t k = at.kt * kStripeTileK + 8 * q;
  for (int i = 0; i < Rows * 8 / kWgmmaThreads; ++i) {
    const int m = tid / 8 + (kWgmmaThreads / 8) * i;
    const bool valid = a_rows[i] != nullptr && k < src.K;
    copy16_async(stage_a + wgmma_a_chunk_offset(m, q), valid ? a_rows[i] + k : src.a, valid);
  }
}

// The descriptor of a shared-memory matrix (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in bits 0-13,
// leading dimension byte offset >> 4 in 16-29, stride dimension byte offset >> 4 in 32-45, base offset (bits
// 49-51) 0, swizzle mode in 62-63 (1: 128-byte swizzle).
QGRU_HD constexpr uint64_t wgmma_descriptor(uint32_t smem_address, uint32_t leading_bytes, uint32_t stride_bytes, uint32_t swizzle) {
  return (static_cast<uint64_t>((smem_address & 0x3FFFFu) >> 4)) | (static_cast<uint64_t>((leading_bytes & 0x3FFFFu) >> 4) << 16) |
         (static_cast<uint64_t>((stride_bytes & 0x3FFFFu) >> 4) << 32) | (static_cast<uint64_t>(swizzle & 3u) << 62);
}
inline constexpr uint32_t kWgmmaSwizzle128 = 1;
// The B operand of k16 step ks (0..3) of the tile from the A tile at shared address a_tile (1024-aligned): rows
// 8 apart are 1024 bytes apart (the stride offset); the 32 bytes of a row's step lie inside its 128-byte row, so
// the leading offset is not used (16 bytes, encoded 1, as for any swizzled K-major operand).
QGRU_HD constexpr uint64_t wgmma_b_descriptor(uint32_t a_tile, int ks) {
  return wgmma_descriptor(a_tile + 32u * static_cast<uint32_t>(ks), 16u, 8u * 128u, kWgmmaSwizzle128);
}

// ---- a lane's half of the stripes lane's work: n fragments 2·pair and 2·pair + 1 ----

// Offset (in words, from the tile or its stage) of the first word lane `lane` of warp w reads for `pair` in half h:
// 4-bit words 2·pair, 2·pair + 1 (one 8-byte load from the lane's 16-byte group); 8-bit words 4·pair .. 4·pair + 3
// (word 2j + s of fragment j, k-step s: the lane's 16-byte group q = pair, one 16-byte load).
QGRU_HD int wgmma_pair_words_offset(int bits, int w, int h, int lane, int pair) {
  return bits == 4 ? stripe_lane_group_offset(4, w, h, lane, 0) + 2 * pair : stripe_lane_group_offset(8, w, h, lane, pair);
}
// The group operands of the pair's two outputs (output 32w + 16·pair + 8i + lane / 4, i = 0, 1) for half h, from a
// stage's params region; prepared where a group row starts, kept in registers across the group's tiles.
template <int Bits>
struct WgmmaPairGroups {
  static_assert(Bits == 4 || Bits == 8, "4- or 8-bit codes");
  std::conditional_t<Bits == 4, DequantU4Group, DequantU8Group> g[2];
};
template <int Bits>
QGRU_HD WgmmaPairGroups<Bits> wgmma_pair_groups_from_stage(const uint32_t* stage_params, int h, int w, int lane, int pair) {
  WgmmaPairGroups<Bits> out;
  for (int i = 0; i < 2; ++i) {
    const uint32_t param = stage_params[stripe_param_stage_index(h, w, 2 * pair + i, lane)];
    if constexpr (Bits == 4) {
      out.g[i] = dequant_u4_group(stripe_param_zero(param), stripe_param_scale(param));
    } else {
      out.g[i] = dequant_u8_group(stripe_param_zero(param), stripe_param_scale(param));
    }
  }
  return out;
}
// The wgmma A fragments a[s] (k-step s of the half) of the pair, from its words (wgmma_pair_words_offset): the
// stripes dequantization (the same LOP3/PRMT and packed-half steps, so the same halves RN_fp16(s · (u − z))) into
// the mma B fragments b[i][s][r] of fragments 2·pair + i, then two of them side by side are the A fragment of 16
// outputs: register 0 = (row lane / 4, inputs 2(lane % 4) + {0, 1}) = b[0][s][0], 1 = (row + 8, same inputs) =
// b[1][s][0], 2 = (row, inputs + 8) = b[0][s][1], 3 = (row + 8, inputs + 8) = b[1][s][1] (PTX ISA, m16n8k16 .f16 A).
template <int Bits>
QGRU_HD void wgmma_dequant_pair(const uint32_t* words, const WgmmaPairGroups<Bits>& groups, uint32_t (&a)[2][4]) {
  uint32_t b[2][2][2];  // [fragment 2·pair + i][k-step][register]
  if constexpr (Bits == 4) {
    for (int i = 0; i < 2; ++i) {
      const F16x2x4 h = dequant_u4x8_raw(words[i], groups.g[i]);
      b[i][0][0] = h.pair[0];
      b[i][0][1] = h.pair[1];
      b[i][1][0] = h.pair[2];
      b[i][1][1] = h.pair[3];
    }
  } else {
    for (int i = 0; i < 2; ++i)
      for (int s = 0; s < 2; ++s) {
        const F16x2x2 h = dequant_u8x4_raw(words[2 * i + s], groups.g[i]);
        b[i][s][0] = h.pair[0];
        b[i][s][1] = h.pair[1];
      }
  }
  for (int s = 0; s < 2; ++s) {
    a[s][0] = b[0][s][0];
    a[s][1] = b[1][s][0];
    a[s][2] = b[0][s][1];
    a[s][3] = b[1][s][1];
  }
}

// Accumulator element e (0 .. rows / 2 - 1) of pair p, lane `lane` of warp w: its row of the row block and its
// output column of the 128.
QGRU_HD StripeRowCol wgmma_acc_position(int w, int p, int lane, int e) {
  return {8 * (e / 4) + 2 * (lane % 4) + e % 2, 32 * w + 16 * p + lane / 4 + 8 * ((e % 4) / 2)};
}

// The partition: the stripes partition of the tiles (stripe_linear.h, plan_stripes) with row blocks of `rows`
// (64 or 128; m_frags counts their m16 fragments: 4 or 8).
QGRU_HD constexpr int64_t wgmma_m_blocks(int64_t M, int rows) { return (M + rows - 1) / rows; }
inline StripePlan plan_wgmma(int64_t M, int rows, int64_t n_padded, int64_t k_padded, int64_t target_blocks) {
  StripePlan p = plan_stripes(M < 1 ? 1 : M, n_padded, k_padded, target_blocks);
  p.m_frags = rows / kStripeTileM;
  p.m_blocks = wgmma_m_blocks(M, rows);
  return p;
}

}  // namespace qgru::kernels
