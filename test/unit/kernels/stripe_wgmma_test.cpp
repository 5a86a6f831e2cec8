// Host emulation of the wgmma quantized linear (cuda/src/quant_linear_wgmma.cu) with the kernel's own QGRU_HD
// pieces (qgru/kernels/stripe_wgmma.h, stripe_linear.h): the stripes repack and partition, the stage loads of the
// block's 256 threads into one byte array standing for its shared memory (at a 1024-aligned address, as the
// kernel aligns it), the pair groups and words each lane reads from the stages, the dequantization into A
// fragments, the descriptors, the column epilogue. What the tensor cores do is written here again from the PTX
// ISA, independently of the header: wgmma.mma_async m64nNk16 with A from registers (each warp 16 rows in the
// m16n8k16 A fragment layout), B from shared memory through the descriptor (its bit fields decoded, the 128-byte
// swizzle applied to the address bits), D in the warpgroup accumulator layout. The result is compared with the
// float64 reference (stripe_emulation.h).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "qgru/half.h"
#include "qgru/kernels/stripe_linear.h"
#include "qgru/kernels/stripe_wgmma.h"
#include "stripe_emulation.h"

namespace dq = qgru::kernels;

namespace {

using namespace qgru::test::stripes;  // the emulations' shared layer, epilogue and reference

// The emulated block's shared memory starts at this shared-window address (1024-aligned, not 0: the descriptors'
// start addresses are absolute).
constexpr uint32_t kSmemBase = 9 * 1024;

// ---- the PTX ISA's wgmma, restated ----

// One matrix descriptor's fields ("Matrix Descriptor Format").
struct Descriptor {
  uint32_t start, leading, stride, base_offset, swizzle;
};
Descriptor decode(uint64_t d) {
  return {static_cast<uint32_t>(d & 0x3FFFu) << 4, static_cast<uint32_t>((d >> 16) & 0x3FFFu) << 4,
          static_cast<uint32_t>((d >> 32) & 0x3FFFu) << 4, static_cast<uint32_t>((d >> 49) & 7u), static_cast<uint32_t>(d >> 62)};
}

// Shared address of element (k, n) of a K-major fp16 B operand in the 128-byte swizzle mode: row n of the
// canonical layout is n % 8 rows of 128 bytes into its group of 8, groups `stride` bytes apart; inputs k are 2
// bytes apart along the row; then the swizzle exchanges the 16-byte chunk bits (4-6) by XOR with bits 7-9.
uint32_t b_address(const Descriptor& d, int k, int n) {
  REQUIRE(d.swizzle == 1u);        // 128-byte swizzle
  REQUIRE(d.base_offset == 0u);    // the pattern starts at a 1024-aligned address
  const uint32_t linear = d.start + static_cast<uint32_t>(n / 8) * d.stride + static_cast<uint32_t>(n % 8) * 128u + 2u * static_cast<uint32_t>(k);
  return linear ^ (((linear >> 7) & 7u) << 4);
}

// D[64 x N] += A[64 x 16] · B[16 x N] for one warpgroup: a[w][lane][r] the A registers of warp w (rows 16w + lane/4
// + 8·(r % 2), inputs 2·(lane % 4) + 8·(r / 2) + {0, 1}); d[w][lane][e] element e of the D fragment (rows 16w +
// lane/4 + 8·((e % 4) / 2), column 8·(e / 4) + 2·(lane % 4) + e % 2). Products exact, sums in double, stored to
// fp32 (the tensor core's own sum order is its own: within the bound the inexact cases allow).
template <int N>
void wgmma_m64nNk16(const uint32_t (&a)[4][32][4], uint64_t b_desc, const std::vector<unsigned char>& smem,
                    uint32_t region_begin, uint32_t region_end, float (&d)[4][32][N / 2]) {
  double A[64][16], B[16][N];
  for (int w = 0; w < 4; ++w)
    for (int l = 0; l < 32; ++l)
      for (int r = 0; r < 4; ++r) {
        const int row = 16 * w + l / 4 + 8 * (r % 2), col = 2 * (l % 4) + 8 * (r / 2);
        A[row][col] = lo(a[w][l][r]);
        A[row][col + 1] = hi(a[w][l][r]);
      }
  const Descriptor desc = decode(b_desc);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < N; ++n) {
      const uint32_t address = b_address(desc, k, n);
      REQUIRE(address >= region_begin);  // inside the stage's A tile
      REQUIRE(address + 2 <= region_end);
      uint16_t bits = 0;
      std::memcpy(&bits, smem.data() + (address - kSmemBase), 2);
      B[k][n] = qgru::half_bits_to_float(bits);
    }
  for (int w = 0; w < 4; ++w)
    for (int l = 0; l < 32; ++l)
      for (int e = 0; e < N / 2; ++e) {
        const int row = 16 * w + l / 4 + 8 * ((e % 4) / 2), col = 8 * (e / 4) + 2 * (l % 4) + e % 2;
        double sum = d[w][l][e];
        for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
        d[w][l][e] = static_cast<float>(sum);
      }
}

// ---- one launch ----

template <int Bits, int Rows>
Emulated emulate_launch(const dq::StripeWeights& s, const std::vector<uint16_t>& a, int64_t M,
                        const std::vector<int64_t>& order, const dq::StripePlan& plan) {
  constexpr int kStageBytes = dq::wgmma_stage_bytes(Bits, Rows);
  constexpr int kAStageBytes = dq::wgmma_a_stage_bytes(Rows);
  constexpr int kTileBytes = dq::stripe_tile_bytes(Bits);
  const std::vector<uint16_t> a_in = qgru::test::stripes::gather_act_order(s, a, M);
  Emulated out;
  out.c.assign(static_cast<size_t>(M * s.N), 0xFFFFu);  // NaN sentinel: every output must be written once
  out.c_fp32.assign(static_cast<size_t>(M * s.N), std::nanf(""));
  std::vector<float> workspace(static_cast<size_t>(plan.max_segments * M * s.n_padded), std::nanf(""));
  REQUIRE(plan.m_frags * dq::kStripeTileM == Rows);
  REQUIRE(plan.m_blocks * Rows >= M);
  REQUIRE((plan.m_blocks - 1) * Rows < M);
  std::vector<uint32_t> counters(static_cast<size_t>(plan.m_blocks * plan.n_tiles), 0u);
  REQUIRE(counters.size() <= static_cast<size_t>(dq::stripe_counter_count(s.n_padded)));
  const dq::StripeSources sources{s.words.data(), a_in.data(), s.params.data(), M, static_cast<int32_t>(s.K), s.n_padded};
  std::vector<unsigned char> smem(static_cast<size_t>(dq::kStripeStages * kStageBytes));
  const auto a_stage = [&](int slot) { return smem.data() + slot * kStageBytes; };
  const auto w_stage = [&](int slot) { return reinterpret_cast<uint32_t*>(smem.data() + slot * kStageBytes + kAStageBytes); };
  const auto p_stage = [&](int slot) {
    return reinterpret_cast<uint32_t*>(smem.data() + slot * kStageBytes + kAStageBytes + kTileBytes);
  };
  for (const int64_t linear : order) {
    const dq::StripeGridBlock grid = dq::stripe_grid_block(static_cast<int32_t>(linear), static_cast<int32_t>(plan.m_blocks));
    const int64_t block = grid.block, mb = grid.row_block, first_row = mb * Rows;
    const dq::TileRange range = dq::stripe_block_range(block, plan.tiles, plan.tiles_per_block);
    REQUIRE(range.begin < range.end);
    const dq::StripeWalk walk = dq::stripe_walk(block, plan.tiles, plan.tiles_per_block, plan.k_tiles, s.group_size);
    static float acc[2][4][32][Rows / 2];  // [pair = warpgroup][warp][lane][element]
    std::memset(acc, 0, sizeof(acc));
    static dq::WgmmaPairGroups<Bits> groups[2][4][32];
    std::memset(groups, 0, sizeof(groups));
    // A stage is poisoned before its load (a byte the loads did not write reads as NaN or garbage), then filled by
    // the threads as the kernel's: warpgroup 0 the words and group rows, all 256 the A rows.
    const auto load = [&](const dq::StripeCursor& at, int slot) {
      std::memset(a_stage(slot), 0xFF, static_cast<size_t>(kStageBytes));
      for (int tid = 0; tid < dq::kWgmmaThreads; ++tid) {
        if (tid < dq::kStripeThreads) {
          dq::stripe_load_tile_words<Bits>(sources, at, tid, nullptr, w_stage(slot), 0);
          dq::stripe_load_tile_params(sources, walk, at, tid, p_stage(slot));
        }
        const uint16_t* a_rows[Rows * 8 / dq::kWgmmaThreads];
        dq::wgmma_a_rows<Rows>(sources, first_row, tid, a_rows);
        dq::wgmma_load_a<Rows>(sources, a_rows, at, tid, a_stage(slot));
      }
    };
    // The kernel's copies run kAhead tiles ahead; its wgmma groups (one per tile) are emulated as asynchronous:
    // each group reads the shared memory only when a wait of the kernel retires it (wait_group 1 after the next
    // tile's group with overlap, wait_group 0 otherwise and at a column's end), the latest moment the hardware may.
    // A copy that refilled a slot a running group still reads would feed it the next tile's data (or the poison).
    constexpr int kAhead = dq::wgmma_tiles_ahead(Rows);
    struct Group {
      std::vector<uint32_t> frag;  // [pair][k-step of the tile (4)][warp][lane][register]
      uint32_t a_tile;
    };
    std::vector<Group> pending;
    const auto retire = [&](size_t keep) {  // wgmma.wait_group keep
      while (pending.size() > keep) {
        const Group& g = pending.front();
        for (int kstep = 0; kstep < 4; ++kstep)
          for (int pair = 0; pair < 2; ++pair) {
            uint32_t frag[4][32][4];
            std::memcpy(frag, g.frag.data() + (pair * 4 + kstep) * 4 * 32 * 4, sizeof(frag));
            wgmma_m64nNk16<Rows>(frag, dq::wgmma_b_descriptor(g.a_tile, kstep), smem, g.a_tile,
                                 g.a_tile + static_cast<uint32_t>(kAStageBytes), acc[pair]);
          }
        pending.erase(pending.begin());
      }
    };
    dq::StripeCursor at = dq::stripe_walk_start(walk), ahead = at;
    for (int i = 0; i < kAhead; ++i) {
      if (ahead.t < walk.end) load(ahead, i);
      dq::stripe_walk_advance(walk, ahead);
    }
    for (int i = 0; at.t < walk.end; ++i, dq::stripe_walk_advance(walk, at)) {
      if (ahead.t < walk.end) load(ahead, (i + kAhead) % dq::kStripeStages);
      dq::stripe_walk_advance(walk, ahead);
      const int slot = i % dq::kStripeStages;
      Group group{std::vector<uint32_t>(2 * 4 * 4 * 32 * 4), kSmemBase + static_cast<uint32_t>(slot * kStageBytes)};
      for (int h = 0; h < 2; ++h)
        for (int pair = 0; pair < 2; ++pair)
          for (int w = 0; w < 4; ++w)
            for (int lane = 0; lane < 32; ++lane) {
              if (dq::stripe_cursor_needs_params(walk, at, h)) {
                groups[pair][w][lane] = dq::wgmma_pair_groups_from_stage<Bits>(p_stage(slot), h, w, lane, pair);
              }
              uint32_t words[Bits / 2];
              std::memcpy(words, w_stage(slot) + dq::wgmma_pair_words_offset(Bits, w, h, lane, pair), sizeof(words));
              uint32_t a_frag[2][4];
              dq::wgmma_dequant_pair<Bits>(words, groups[pair][w][lane], a_frag);
              for (int ks = 0; ks < 2; ++ks)
                for (int r = 0; r < 4; ++r) {
                  group.frag[static_cast<size_t>((((pair * 4 + 2 * h + ks) * 4 + w) * 32 + lane) * 4 + r)] = a_frag[ks][r];
                }
            }
      pending.push_back(std::move(group));
      retire(dq::wgmma_overlaps(Rows) ? 1 : 0);
      if (dq::stripe_cursor_segment_end(walk, at)) {
        retire(0);
        const dq::StripeSegment col = dq::stripe_cursor_segment(walk, at);
        const int64_t nt = at.nt;
        auto each = [&](auto&& fn) {
          for (int pair = 0; pair < 2; ++pair)
            for (int w = 0; w < 4; ++w)
              for (int lane = 0; lane < 32; ++lane)
                for (int e = 0; e < Rows / 2; ++e) {
                  const dq::StripeRowCol rc = dq::wgmma_acc_position(w, pair, lane, e);
                  fn(first_row + rc.row, nt * dq::kStripeTileN + rc.col, acc[pair][w][lane][e]);
                }
        };
        column_end(out, workspace, counters, s, M, plan.n_tiles, mb, Rows, nt, col, each);
        std::memset(acc, 0, sizeof(acc));
      }
    }
    REQUIRE(pending.empty());  // a column's end retired every group
  }
  for (const uint32_t c : counters) REQUIRE(c == 0u);
  return out;
}

// rows: the row block (0: the engine's default for M, wgmma_rows).
void check_case(const Case& c, uint32_t seed, int rows = 0) {
  const int block_rows = rows == 0 ? dq::wgmma_rows(c.M) : rows;
  CAPTURE(block_rows);
  check_case_with(c, seed, [&](const dq::StripeWeights& s, const std::vector<uint16_t>& a, bool reverse) {
    const dq::StripePlan plan = dq::plan_wgmma(c.M, block_rows, s.n_padded, s.k_padded, c.target_blocks);
    const std::vector<int64_t> order = block_order(plan.blocks * plan.m_blocks, reverse);
    if (c.bits == 4) {
      return block_rows == 64 ? emulate_launch<4, 64>(s, a, c.M, order, plan) : emulate_launch<4, 128>(s, a, c.M, order, plan);
    }
    return block_rows == 64 ? emulate_launch<8, 64>(s, a, c.M, order, plan) : emulate_launch<8, 128>(s, a, c.M, order, plan);
  });
}

}  // namespace

TEST_CASE("wgmma layout: the swizzled A tile, the descriptors, the accumulators, the shared memory") {
  // Every (row, chunk) of a tile at its own 16-byte slot inside the tile; eight threads of one row (chunks 0..7)
  // write eight different chunk positions of the row's 128 bytes.
  for (const int rows : {64, 128}) {
    std::vector<int> seen(static_cast<size_t>(rows * 8), 0);
    for (int m = 0; m < rows; ++m)
      for (int q = 0; q < 8; ++q) {
        const int offset = dq::wgmma_a_chunk_offset(m, q);
        REQUIRE(offset % 16 == 0);
        REQUIRE(offset / 128 == m);
        ++seen[static_cast<size_t>(offset / 16)];
      }
    for (const int n : seen) REQUIRE(n == 1);
  }
  // The descriptor's fields, as the PTX ISA lays them out.
  const uint64_t d = dq::wgmma_b_descriptor(3 * 1024, 3);
  const Descriptor f = decode(d);
  CHECK(f.start == 3 * 1024 + 96);
  CHECK(f.stride == 1024);
  CHECK(f.leading == 16);
  CHECK(f.swizzle == 1u);
  CHECK(f.base_offset == 0u);
  CHECK((d & ((uint64_t{3} << 14) | (uint64_t{3} << 30) | (uint64_t{7} << 46) | (uint64_t{0x3FF} << 52))) == 0u);
  // Accumulators: each (row, output) of a row block's column exactly once across the two warpgroups.
  for (const int rows : {64, 128}) {
    std::vector<int> seen(static_cast<size_t>(rows * dq::kStripeTileN), 0);
    for (int pair = 0; pair < 2; ++pair)
      for (int w = 0; w < 4; ++w)
        for (int lane = 0; lane < 32; ++lane)
          for (int e = 0; e < rows / 2; ++e) {
            const dq::StripeRowCol rc = dq::wgmma_acc_position(w, pair, lane, e);
            REQUIRE(rc.row >= 0);
            REQUIRE(rc.row < rows);
            REQUIRE(rc.col / 16 == 2 * w + pair);  // warpgroup `pair` holds outputs 32w + 16·pair .. + 15
            ++seen[static_cast<size_t>(rc.row * dq::kStripeTileN + rc.col)];
          }
    for (const int n : seen) REQUIRE(n == 1);
  }
  // Shared memory: stages keep the A tiles 1024-aligned; two blocks of either instance fit a Hopper SM (228 KiB,
  // 227 KiB a block), with the block's 1 KiB of static shared memory and its reservation.
  for (const int bits : {4, 8})
    for (const int rows : {64, 128}) {
      REQUIRE(dq::wgmma_stage_bytes(bits, rows) % 1024 == 0);
      REQUIRE(dq::wgmma_a_stage_bytes(rows) % 1024 == 0);
      REQUIRE(2 * (dq::wgmma_smem_bytes(bits, rows) + 1024 + 16) <= 228 * 1024);
    }
  // Row blocks: every row in exactly one, none empty, within the layer's column counters.
  for (int64_t M = 1; M <= dq::kStripeMaxRows; ++M)
    for (const int rows : {64, 128}) {
      const int64_t blocks = dq::wgmma_m_blocks(M, rows);
      REQUIRE(blocks * rows >= M);
      REQUIRE((blocks - 1) * rows < M);
      REQUIRE(blocks <= dq::kStripeMaxMTiles);
    }
}

TEST_CASE("wgmma launch (emulated) is exact on exact data and deterministic, every option combination") {
  uint32_t seed = 70;
  // both instances: one row block of 64, one of 128 rows
  each_option_combination({32, 64, 0}, [](int64_t group) -> int64_t { return group == 32 ? 5 : group == 64 ? 77 : 40; },
                          [&](const Case& c) { check_case(c, seed++); });
}

TEST_CASE("wgmma launch (emulated) within the fp32 bound: row blocks, padding, one and many segments") {
  const Case cases[] = {
      {1, 128, 64, 64, 4, 0, false, false, false, 1},         // one tile, one block: the direct store
      {64, 264, 1024, 128, 4, 1, false, false, false, 20},    // padded N, many segments per column
      {65, 136, 160, 32, 8, 0, true, false, false, 5},        // padded K, act-order, one row block of 128
      {200, 128, 256, 128, 4, 0, false, true, false, 3},      // two row blocks of 128, the second part full
      {130, 256, 640, 64, 8, 1, false, false, false, 3},      // stripes longer than the pipeline, across columns
  };
  uint32_t seed = 900;
  for (const Case& c : cases) check_case(c, seed++);
  // The row block forced either way (LinearTuning::wgmma_rows): three row blocks of 64, one of 128 for 33 rows.
  check_case({130, 136, 192, 64, 4, 0, false, false, false, 4}, seed++, 64);
  check_case({33, 136, 192, 64, 8, 1, true, false, false, 4}, seed++, 128);
}
