// Host emulation of the stripes quantized linear (cuda/src/quant_linear_stripes.cu) with the kernel's own
// QGRU_HD pieces (qgru/kernels/stripe_linear.h): the load-time repack, the stripe partition, the pipeline's
// stage loads in the kernel's slot order, the per-lane words and group parameters read from the stages (prepared
// where a group row starts and kept across the group's tiles, as in the kernel), the in-register dequantization into B fragments, the A fragments through an
// emulated ldmatrix.x4, the column epilogue (direct store, or partial slots + counter + the last block's
// fixed-order sum). The mma.sync m16n8k16 fragment layouts are written here again from the PTX ISA's tables,
// independently of the header, and the result is compared with a float64 product of the plain dequantized
// checkpoint weights (act-order through the original g_idx): exactly where every sum is exact (integral
// activations, power-of-two scales), within the fp32 accumulation bound otherwise. Only the tensor cores'
// own summation order and the memory system are left to the GPU self-test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "qgru/half.h"
#include "gptq_test_layer.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/kernels/stripe_linear.h"
#include "stripe_emulation.h"

namespace dq = qgru::kernels;

namespace {

using namespace qgru::test::stripes;  // the emulations' shared layer, epilogue and reference

// ---- mma.sync.m16n8k16 .f16 fragments, from the PTX ISA's figures (independent of stripe_linear.h) ----
// A (16 x 16, row): register r of lane l holds rows l/4 + 8·(r % 2), columns 2·(l % 4) + 8·(r / 2) + {0, 1}.
// B (16 x 8, col):  register r holds rows (k) 2·(l % 4) + 8·r + {0, 1}, column (n) l / 4.
// C/D (16 x 8 f32): element c holds row l/4 + 8·(c / 2), column 2·(l % 4) + c % 2.

// D = A·B + C for one warp; sums in double, stored to fp32 (the tensor core's products are exact; its sum order
// is its own: within the bound the inexact cases allow).
void mma_m16n8k16(const uint32_t a[32][4], const uint32_t b[32][2], float c[32][4]) {
  double A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < 4; ++r) {
      const int row = l / 4 + 8 * (r % 2), col = 2 * (l % 4) + 8 * (r / 2);
      A[row][col] = lo(a[l][r]);
      A[row][col + 1] = hi(a[l][r]);
    }
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < 2; ++r) {
      const int k = 2 * (l % 4) + 8 * r, n = l / 4;
      B[k][n] = lo(b[l][r]);
      B[k + 1][n] = hi(b[l][r]);
    }
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e) {
      const int row = l / 4 + 8 * (e / 2), col = 2 * (l % 4) + e % 2;
      double sum = c[l][e];
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
      c[l][e] = static_cast<float>(sum);
    }
}

// ldmatrix.x4 (PTX ISA): lanes 8i .. 8i+7 give the row addresses of matrix i; lane t receives, in register i,
// the two halves at columns 2·(t % 4), +1 of row t / 4 of matrix i.
void ldmatrix_x4(const std::vector<uint16_t>& smem, const int address[32], uint32_t out[32][4]) {
  for (int t = 0; t < 32; ++t)
    for (int i = 0; i < 4; ++i) {
      const int row_address = address[8 * i + t / 4] + 2 * (t % 4);
      out[t][i] = smem[static_cast<size_t>(row_address)] | (static_cast<uint32_t>(smem[static_cast<size_t>(row_address + 1)]) << 16);
    }
}

// One launch on the host: the grid's blocks (stripe x row block of plan.m_frags m16 fragments, one dimension:
// stripe_grid_block) run in `block_order`, each to completion (any order the GPU may run them in); the
// counters must be back at 0 afterwards.
template <int Bits, int MFrags>
Emulated emulate_launch(const dq::StripeWeights& s, const std::vector<uint16_t>& a, int64_t M,
                        const std::vector<int64_t>& block_order, const dq::StripePlan& plan) {
  const std::vector<uint16_t> a_in = qgru::test::stripes::gather_act_order(s, a, M);  // act-order: A'[m, k'] = A[m, perm[k']]
  Emulated out;
  out.c.assign(static_cast<size_t>(M * s.N), 0xFFFFu);  // NaN sentinel: every output must be written once
  out.c_fp32.assign(static_cast<size_t>(M * s.N), std::nanf(""));
  std::vector<float> workspace(static_cast<size_t>(plan.max_segments * M * s.n_padded), std::nanf(""));
  REQUIRE(plan.m_frags == MFrags);
  REQUIRE(plan.m_blocks * MFrags * dq::kStripeTileM >= M);
  REQUIRE((plan.m_blocks - 1) * MFrags * dq::kStripeTileM < M);  // no row block without a row
  std::vector<uint32_t> counters(static_cast<size_t>(plan.m_blocks * plan.n_tiles), 0u);
  REQUIRE(counters.size() <= static_cast<size_t>(dq::stripe_counter_count(s.n_padded)));
  {
    const uint16_t* a_rows[MFrags];
    for (int f = 0; f < MFrags; ++f) a_rows[f] = nullptr;
    for (const int64_t linear : block_order) {
      const dq::StripeGridBlock grid = dq::stripe_grid_block(static_cast<int32_t>(linear), static_cast<int32_t>(plan.m_blocks));
      const int64_t block = grid.block, mb = grid.row_block;
      const dq::TileRange range = dq::stripe_block_range(block, plan.tiles, plan.tiles_per_block);
      REQUIRE(range.begin < range.end);
      const dq::StripeWalk walk = dq::stripe_walk(block, plan.tiles, plan.tiles_per_block, plan.k_tiles, s.group_size);
      float acc[MFrags][4][4][32][4] = {};  // [m16 fragment][warp][n fragment][lane][element]
      // the lane's prepared group operands, per warp, kept across tiles until a group row starts (as the kernel)
      dq::StripeLaneGroups<Bits> groups[4][32] = {};
      // The pipeline: kStripeStages stages, each poisoned before its load (a word, A half or group row the
      // loads did not write is read as garbage or NaN and fails the comparison), filled by every thread's
      // stripe_load_tile in the kernel's slot order (the tile of step i into slot i % stages, loaded
      // stages - 1 steps ahead by a second cursor over the walk).
      const dq::StripeSources sources{s.words.data(), a_in.data(), s.params.data(), M, static_cast<int32_t>(s.K), s.n_padded};
      std::vector<uint32_t> stage_words[dq::kStripeStages], stage_params[dq::kStripeStages];
      std::vector<uint16_t> stage_a[dq::kStripeStages];
      // Each thread's first chunk of the loaded tile, taken once at the stripe's start and stepped one tile per
      // advance of the load cursor, as the kernel's (ahead_words) are; kept as offsets into the words (the kernel's
      // pointer runs up to three tiles past the stripe without being read) and held to stripe_tile_thread_words.
      std::vector<int64_t> ahead_offsets(dq::kStripeThreads);
      const auto step_ahead_words = [&](int64_t tiles) {
        for (auto& o : ahead_offsets) o += tiles * dq::stripe_tile_words(Bits);
      };
      const auto load = [&](const dq::StripeCursor& at, int slot) {
        stage_words[slot].assign(static_cast<size_t>(dq::stripe_tile_words(Bits)), 0xDEADBEEFu);
        stage_a[slot].assign(static_cast<size_t>(dq::stripe_a_stage_bytes(MFrags) / 2), 0xFFFFu);
        stage_params[slot].assign(static_cast<size_t>(2 * dq::kStripeTileN), 0xFFFFFFFFu);
        const dq::StripeStage stage{stage_words[slot].data(), stage_a[slot].data(), stage_params[slot].data()};
        for (int tid = 0; tid < dq::kStripeThreads; ++tid) {
          for (int f = 0; f < MFrags; ++f) a_rows[f] = dq::stripe_a_row(sources, mb * MFrags + f, tid);
          const uint32_t* thread_words = s.words.data() + ahead_offsets[static_cast<size_t>(tid)];
          REQUIRE(thread_words == dq::stripe_tile_thread_words<Bits>(sources, at.t, tid));
          // as the kernel: the stepped address for one fragment, null (the address from the tile index) otherwise
          dq::stripe_load_tile<Bits, MFrags>(sources, a_rows, walk, at, tid, MFrags == 1 ? thread_words : nullptr, stage, 0);
        }
      };
      dq::StripeCursor at = dq::stripe_walk_start(walk), ahead = at;
      for (int tid = 0; tid < dq::kStripeThreads; ++tid) {
        ahead_offsets[static_cast<size_t>(tid)] = dq::stripe_tile_thread_words<Bits>(sources, ahead.t, tid) - s.words.data();
      }
      for (int i = 0; i < dq::kStripeStages - 1; ++i) {
        if (ahead.t < walk.end) load(ahead, i);
        dq::stripe_walk_advance(walk, ahead);
        step_ahead_words(1);
      }
      for (int i = 0; at.t < walk.end; ++i, dq::stripe_walk_advance(walk, at)) {
        if (ahead.t < walk.end) load(ahead, (i + dq::kStripeStages - 1) % dq::kStripeStages);
        dq::stripe_walk_advance(walk, ahead);
        step_ahead_words(1);
        const int slot = i % dq::kStripeStages;
        const int64_t nt = at.nt;
        for (int w = 0; w < 4; ++w) {
          for (int h = 0; h < 2; ++h) {
            if (dq::stripe_cursor_needs_params(walk, at, h)) {
              for (int lane = 0; lane < 32; ++lane) groups[w][lane] = dq::stripe_lane_groups_from_stage<Bits>(stage_params[slot].data(), h, w, lane);
            }
            uint32_t b[4][2][32][2];  // [n fragment][k-step][lane][register]
            for (int lane = 0; lane < 32; ++lane) {
              uint32_t words[Bits];
              dq::stripe_lane_words<Bits>(stage_words[slot].data(), w, h, lane, words);
              const dq::StripeBFragments f = dq::stripe_dequant_lane<Bits>(words, groups[w][lane]);
              for (int j = 0; j < 4; ++j)
                for (int ks = 0; ks < 2; ++ks)
                  for (int r = 0; r < 2; ++r) b[j][ks][lane][r] = f.b[j][ks][r];
            }
            for (int ks = 0; ks < 2; ++ks)
              for (int f = 0; f < MFrags; ++f) {  // one dequantization, every m16 fragment
                int address[32];
                for (int lane = 0; lane < 32; ++lane) address[lane] = dq::stripe_a_ldmatrix_offset(lane, h, ks, f);
                uint32_t a_frag[32][4];
                ldmatrix_x4(stage_a[slot], address, a_frag);
                for (int j = 0; j < 4; ++j) mma_m16n8k16(a_frag, b[j][ks], acc[f][w][j]);
              }
          }
        }
        // End of the block's part of column nt: the epilogue.
        if (dq::stripe_cursor_segment_end(walk, at)) {
          const dq::StripeSegment col = dq::stripe_cursor_segment(walk, at);
          auto each = [&](auto&& fn) {
            for (int f = 0; f < MFrags; ++f)
              for (int w = 0; w < 4; ++w)
                for (int j = 0; j < 4; ++j)
                  for (int lane = 0; lane < 32; ++lane)
                    for (int e = 0; e < 4; ++e) {
                      const dq::StripeRowCol rc = dq::stripe_acc_position(w, j, lane, e);
                      const int64_t m = (mb * MFrags + f) * dq::kStripeTileM + rc.row, n = nt * dq::kStripeTileN + rc.col;
                      fn(m, n, acc[f][w][j][lane][e]);
                    }
          };
          column_end(out, workspace, counters, s, M, plan.n_tiles, mb, MFrags * dq::kStripeTileM, nt, col, each);
          for (auto& m_frag : acc)
            for (auto& warp : m_frag)
              for (auto& frag : warp)
                for (auto& lane : frag)
                  for (float& e : lane) e = 0.0f;
        }
      }
    }
  }
  for (const uint32_t c : counters) REQUIRE(c == 0u);
  return out;
}

// The launch of the kernel instance the plan names (bits, m16 fragments per block).
Emulated emulate(int bits, const dq::StripeWeights& s, const std::vector<uint16_t>& a, int64_t M,
                 const std::vector<int64_t>& block_order, const dq::StripePlan& plan) {
  if (bits == 4) {
    return plan.m_frags == 1   ? emulate_launch<4, 1>(s, a, M, block_order, plan)
           : plan.m_frags == 2 ? emulate_launch<4, 2>(s, a, M, block_order, plan)
                               : emulate_launch<4, 4>(s, a, M, block_order, plan);
  }
  return plan.m_frags == 1   ? emulate_launch<8, 1>(s, a, M, block_order, plan)
         : plan.m_frags == 2 ? emulate_launch<8, 2>(s, a, M, block_order, plan)
                             : emulate_launch<8, 4>(s, a, M, block_order, plan);
}

void check_case(const Case& c, uint32_t seed) {
  check_case_with(c, seed, [&](const dq::StripeWeights& s, const std::vector<uint16_t>& a, bool reverse) {
    const dq::StripePlan plan = dq::plan_stripes(c.M, s.n_padded, s.k_padded, c.target_blocks);
    return emulate(c.bits, s, a, c.M, block_order(plan.blocks * plan.m_blocks, reverse), plan);
  });
}

// The walk of every block of a plan against the division formulas the walk replaces (tile t is column t / k_tiles,
// k tile t % k_tiles; half h reads group row (64 kt + 32 h) / group_size and loads it when that is a group's start
// or h == 0 starts the block's part of the column; the part ends at the column's last k tile or the stripe's
// end, and stripe_column numbers its segment). Returns the number of tiles walked; the first mismatch ends the test.
int64_t check_walks(int64_t n_tiles, int64_t k_tiles, int64_t target, int64_t group_size) {
  const dq::StripePlan p = dq::plan_stripes(1, n_tiles * dq::kStripeTileN, k_tiles * dq::kStripeTileK, target);
  int64_t walked = 0;
  for (int64_t b = 0; b < p.blocks; ++b) {
    const dq::TileRange range = dq::stripe_block_range(b, p.tiles, p.tiles_per_block);
    const dq::StripeWalk walk = dq::stripe_walk(b, p.tiles, p.tiles_per_block, p.k_tiles, group_size);
    dq::StripeCursor c = dq::stripe_walk_start(walk);
    for (int64_t t = range.begin; t < range.end; ++t, dq::stripe_walk_advance(walk, c)) {
      const int64_t nt = t / k_tiles, kt = t % k_tiles;
      const bool segment_start = t == range.begin || kt == 0, segment_end = t + 1 == range.end || (t + 1) % k_tiles == 0;
      bool same = c.t == t && c.nt == nt && c.kt == kt && c.segment_start == segment_start &&
                  dq::stripe_cursor_segment_end(walk, c) == segment_end && c.t < walk.end;
      for (int h = 0; h < 2; ++h) {
        const int64_t k = kt * dq::kStripeTileK + 32 * h;
        same = same && dq::stripe_cursor_group(walk, c, h) == k / group_size &&
               dq::stripe_cursor_needs_params(walk, c, h) == ((h == 0 && segment_start) || k % group_size == 0);
      }
      if (same && segment_end) {
        const dq::StripeColumn col = dq::stripe_column(nt, k_tiles, p.tiles_per_block);
        const dq::StripeSegment got = dq::stripe_cursor_segment(walk, c);
        same = got.segment == b - col.first_block && got.segments == col.segments;
      }
      if (!same) {
        FAIL("walk differs: n_tiles=" << n_tiles << " k_tiles=" << k_tiles << " tiles_per_block=" << p.tiles_per_block
                                      << " group_size=" << group_size << " block " << b << " tile " << t);
      }
      ++walked;
    }
    REQUIRE_MESSAGE(c.t == range.end, "block " << b << ": the walk stops at the stripe's end");  // and nowhere else
    REQUIRE(c.t >= walk.end);
  }
  REQUIRE(walked == p.tiles);
  return walked;
}

// Every distinct partition of a shape: the plan depends on the target only through tiles_per_block, which takes
// each value ceil(T / target) once as the target runs from 1 to T.
int64_t check_walks_every_partition(int64_t n_tiles, int64_t k_tiles, int64_t group_size) {
  const int64_t tiles = n_tiles * k_tiles;
  int64_t walked = 0, last_per = 0;
  for (int64_t target = 1; target <= tiles; ++target) {
    const int64_t per = (tiles + target - 1) / target;
    if (per == last_per) continue;
    last_per = per;
    walked += check_walks(n_tiles, k_tiles, target, group_size);
  }
  return walked;
}

}  // namespace

TEST_CASE("stripes walk: every step of every stripe equals the division formulas it replaces") {
  int64_t walked = 0;
  // K up to 3072, N up to 4096: every partition, groups crossed twice per tile (32), not a power of two (96),
  // one group.
  for (int64_t k_tiles = 1; k_tiles <= 48; ++k_tiles)
    for (const int64_t n_tiles : {1, 2, 3, 7, 32})
      for (const int64_t group_size : {int64_t{32}, int64_t{96}, k_tiles * dq::kStripeTileK}) {
        CAPTURE(k_tiles);
        CAPTURE(n_tiles);
        walked += check_walks_every_partition(n_tiles, k_tiles, group_size);
      }
  // Every group size that is a multiple of 32 up to K (one group when it covers K), K up to 4096.
  for (int64_t k_tiles = 1; k_tiles <= 64; ++k_tiles)
    for (int64_t group_size = 32; group_size <= k_tiles * dq::kStripeTileK; group_size += 32) {
      if (group_size > 512 && group_size % 512 != 0 && group_size != k_tiles * dq::kStripeTileK) continue;
      walked += check_walks_every_partition(3, k_tiles, group_size);
    }
  // Large layers (4096, 11008) at the partitions an H200 / H100 plans and a few odd ones.
  for (const int64_t k_tiles : {64, 172})
    for (const int64_t n_tiles : {32, 86})
      for (const int64_t target : {1, 5, 264, 456, 528, 1000, 100000})
        for (const int64_t group_size : {int64_t{128}, k_tiles * dq::kStripeTileK}) walked += check_walks(n_tiles, k_tiles, target, group_size);
  MESSAGE("tiles walked: " << walked);
  CHECK(walked > 10000000);
}

TEST_CASE("stripes layout refuses a layer beyond the walk's 32-bit indices") {
  CHECK(dq::stripe_unsupported_reason(4, int64_t{1} << 20, int64_t{1} << 18, 128).empty());  // 2^14 · 2^11 tiles
  CHECK(dq::stripe_unsupported_reason(4, int64_t{1} << 24, int64_t{1} << 20, 128).find("too large") != std::string::npos);
  CHECK(dq::stripe_unsupported_reason(4, int64_t{1} << 31, 8, 128).find("too large") != std::string::npos);
  CHECK(dq::stripe_unsupported_reason(4, 64, int64_t{1} << 31, 64).find("too large") != std::string::npos);
}

TEST_CASE("stripes repack puts every code where the mma B fragment of its lane expects it") {
  // A layer whose code at (k, n) encodes (k + 3n) mod 16 and scale 1, zero 0: the B fragments must reproduce it.
  for (const int bits : {4, 8}) {
    CAPTURE(bits);
    const int64_t K = 128, N = 256;
    const int per = 32 / bits;
    const uint32_t maxq = (1u << bits) - 1u;
    std::vector<int32_t> qweight(static_cast<size_t>(K / per * N), 0), qzeros(static_cast<size_t>(N / per), 0);
    std::vector<uint16_t> scales(static_cast<size_t>(N), qgru::float_to_half_bits(1.0f));
    auto code_of = [&](int64_t k, int64_t n) { return static_cast<uint32_t>(k * 7 + 3 * n) & maxq; };
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        auto& w = qweight[static_cast<size_t>((k / per) * N + n)];
        w = static_cast<int32_t>(static_cast<uint32_t>(w) | (code_of(k, n) << (bits * (k % per))));
      }
    const dq::StripeWeights s = dq::repack_stripes(bits, K, N, K, 0, qweight, qzeros, scales, dq::ActOrderPlan{});
    const int64_t k_tiles = K / dq::kStripeTileK;
    int64_t checked = 0;
    for (int64_t nt = 0; nt < N / dq::kStripeTileN; ++nt)
      for (int64_t kt = 0; kt < k_tiles; ++kt)
        for (int w = 0; w < 4; ++w)
          for (int h = 0; h < 2; ++h)
            for (int lane = 0; lane < 32; ++lane) {
              uint32_t words[8];  // the lane's words, read one by one through stripe_word_index
              for (int word = 0; word < bits; ++word) {
                words[word] = s.words[static_cast<size_t>(dq::stripe_word_index(bits, k_tiles, nt, kt, w, h, lane, word))];
              }
              const uint32_t params[4] = {s.params[0], s.params[0], s.params[0], s.params[0]};
              const dq::StripeBFragments f =
                  bits == 4 ? dq::stripe_dequant_lane<4>(words, params) : dq::stripe_dequant_lane<8>(words, params);
              for (int j = 0; j < 4; ++j)
                for (int ks = 0; ks < 2; ++ks)
                  for (int r = 0; r < 2; ++r)
                    for (int half = 0; half < 2; ++half) {
                      // the PTX B fragment: register r of lane holds k = 2(l%4) + 8r + half, n = l/4
                      const int64_t k = kt * 64 + 32 * h + 16 * ks + 2 * (lane % 4) + 8 * r + half;
                      const int64_t n = nt * 128 + 32 * w + 8 * j + lane / 4;
                      const float got = half ? hi(f.b[j][ks][r]) : lo(f.b[j][ks][r]);
                      REQUIRE_MESSAGE(got == static_cast<float>(code_of(k, n)), "k=" << k << " n=" << n << " lane " << lane);
                      ++checked;
                    }
            }
    CHECK(checked == K * N);
  }
}

TEST_CASE("stripes partition: every tile in exactly one block, segments counted, no empty block") {
  for (const int64_t n_tiles : {1, 3, 32, 86})
    for (const int64_t k_tiles : {1, 2, 64, 172})
      for (const int64_t target : {1, 5, 132, 528, 100000}) {
        const dq::StripePlan p = dq::plan_stripes(1, n_tiles * 128, k_tiles * 64, target);
        CAPTURE(n_tiles);
        CAPTURE(k_tiles);
        CAPTURE(target);
        REQUIRE(p.blocks >= 1);
        REQUIRE(p.blocks <= std::max<int64_t>(1, std::min(target, p.tiles)));
        std::vector<int> seen(static_cast<size_t>(p.tiles), 0);
        std::vector<int64_t> segments(static_cast<size_t>(n_tiles), 0);
        for (int64_t b = 0; b < p.blocks; ++b) {
          const dq::TileRange r = dq::stripe_block_range(b, p.tiles, p.tiles_per_block);
          REQUIRE(r.begin < r.end);
          int64_t last_column = -1;
          for (int64_t t = r.begin; t < r.end; ++t) {
            ++seen[static_cast<size_t>(t)];
            const int64_t nt = t / k_tiles;
            if (nt != last_column) {
              const dq::StripeColumn col = dq::stripe_column(nt, k_tiles, p.tiles_per_block);
              REQUIRE(b - col.first_block == segments[static_cast<size_t>(nt)]);  // segments numbered in k order
              ++segments[static_cast<size_t>(nt)];
              last_column = nt;
            }
          }
        }
        for (const int v : seen) REQUIRE(v == 1);
        for (int64_t nt = 0; nt < n_tiles; ++nt) {
          const dq::StripeColumn col = dq::stripe_column(nt, k_tiles, p.tiles_per_block);
          REQUIRE(col.segments == segments[static_cast<size_t>(nt)]);
          REQUIRE(col.segments <= p.max_segments);
        }
      }
}

TEST_CASE("stripes launch (emulated) is exact on exact data and deterministic, every option combination") {
  uint32_t seed = 7;
  // the three kernel instances: one, two and four m16 fragments per block
  each_option_combination({32, 64, 96, 0}, [](int64_t group) -> int64_t { return group == 32 ? 21 : group == 64 ? 47 : 3; },
                          [&](const Case& c) { check_case(c, seed++); });
}

TEST_CASE("stripes rows: up to 64 rows one row block (each weight byte read once), every row in exactly one block") {
  for (int64_t M = 1; M <= dq::kStripeMaxRows; ++M) {
    CAPTURE(M);
    const int frags = dq::stripe_m_frags(M);
    const int64_t rows_per_block = frags * dq::kStripeTileM, blocks = dq::stripe_m_blocks(M);
    REQUIRE((frags == 1 || frags == 2 || frags == dq::kStripeMaxMFrags));
    REQUIRE(blocks * rows_per_block >= M);          // every row in a block
    REQUIRE((blocks - 1) * rows_per_block < M);     // no block without rows
    if (M <= 64) REQUIRE(blocks == 1);              // one row block: the weights streamed once per launch
    if (M > 16) REQUIRE(frags > 1);                 // no second row block below 64 rows
    REQUIRE(blocks <= dq::kStripeMaxMTiles);        // the layer's column counters hold every (row block, column)
    // the fewest fragments that hold M rows below 64, never more than 2x the rows needed
    if (M <= 64) REQUIRE(rows_per_block < 2 * M + 2 * dq::kStripeTileM);
    const dq::StripePlan p = dq::plan_stripes(M, 256, 512, 10);
    REQUIRE(p.m_frags == frags);
    REQUIRE(p.m_blocks == blocks);
  }
  // The one-dimensional grid: every (stripe, row block) exactly once, a stripe's row blocks adjacent.
  for (const int32_t m_blocks : {1, 2, 3, 16})
    for (const int32_t blocks : {1, 7, 396}) {
      std::vector<int> seen(static_cast<size_t>(blocks * m_blocks), 0);
      for (int32_t linear = 0; linear < blocks * m_blocks; ++linear) {
        const dq::StripeGridBlock g = dq::stripe_grid_block(linear, m_blocks);
        REQUIRE(g.block >= 0);
        REQUIRE(g.block < blocks);
        REQUIRE(g.row_block >= 0);
        REQUIRE(g.row_block < m_blocks);
        REQUIRE(g.block == linear / m_blocks);  // row block fastest
        ++seen[static_cast<size_t>(g.block * m_blocks + g.row_block)];
      }
      for (const int n : seen) REQUIRE(n == 1);
    }
  // The block's shared memory: four stages, each W tile + A rows + group rows, 16-byte aligned regions.
  for (const int bits : {4, 8})
    for (const int frags : {1, 2, 4}) {
      REQUIRE(dq::stripe_a_stage_bytes(frags) % 16 == 0);
      REQUIRE(dq::stripe_stage_bytes(bits, frags) % 16 == 0);
      REQUIRE(dq::stripe_smem_bytes(bits, frags) <= 227 * 1024);  // a Hopper block's opt-in limit
    }
}

TEST_CASE("stripes launch (emulated) within the fp32 bound: row counts, padding, one and many segments") {
  const Case cases[] = {
      {1, 128, 64, 64, 4, 0, false, false, false, 1},        // one tile, one block: the direct store
      {1, 264, 4096, 128, 4, 1, false, false, false, 132},   // padded N, many segments per column
      {16, 136, 160, 32, 4, 0, true, false, false, 5},       // padded K (160 = 2.5 tiles), act-order
      {17, 128, 256, 128, 8, 1, false, true, false, 3},      // two m16 fragments per block, 8-bit symmetric v1
      {5, 256, 200, 200, 8, 0, false, false, false, 100000}, // one group, K not a multiple of 32: per channel
      {33, 136, 384, 64, 8, 0, true, false, false, 11},      // four fragments, three with rows, 8-bit act-order
      {64, 264, 320, 64, 4, 1, false, false, false, 9},      // one full row block of 64, padded N, segments
      {65, 136, 256, 128, 4, 0, true, false, false, 4},      // two row blocks, the second with one row
      {130, 128, 192, 32, 8, 0, false, false, false, 2},     // three row blocks: the weights read three times
      // stripes longer than the pipeline's depth: loads in the steady state of the tile loop, not only the prologue
      {3, 256, 1024, 128, 4, 0, false, false, false, 4},     // 8 tiles a block, two columns, one fragment
      {40, 136, 640, 64, 8, 1, true, false, false, 3},       // 7 tiles a block across a column's end, four fragments
  };
  uint32_t seed = 500;
  for (const Case& c : cases) check_case(c, seed++);
}

TEST_CASE("stripes layout refuses what it cannot serve, naming it") {
  CHECK(dq::stripe_unsupported_reason(4, 4096, 4096, 128).empty());
  CHECK(dq::stripe_unsupported_reason(4, 4096, 4096, 4096).empty());
  CHECK(dq::stripe_unsupported_reason(4, 4096, 4096, 16).find("group_size") != std::string::npos);
  CHECK(dq::stripe_unsupported_reason(4, 4100, 4096, 4100).find("K must") != std::string::npos);
  CHECK(dq::stripe_unsupported_reason(3, 4096, 4096, 128).find("4- and 8-bit") != std::string::npos);
}

TEST_CASE("stripes layout dequantized whole equals the reference weight of every code (the dequant-gemm engine)") {
  for (const int bits : {4, 8})
    for (const bool act_order : {false, true}) {
      CAPTURE(bits);
      CAPTURE(act_order);
      const Case c{1, 136, 160, 32, bits, 1, act_order, false, false, 1};
      std::mt19937 rng(900 + static_cast<uint32_t>(bits) + (act_order ? 1u : 0u));
      const Layer l = make_layer(c, rng);
      dq::ActOrderPlan order;
      REQUIRE(dq::plan_act_order(l.g_idx, c.K, c.group, order).empty());
      const dq::StripeWeights s = dq::repack_stripes(bits, c.K, c.N, c.group, c.zero_adjust, l.qweight, l.qzeros, l.scales, order);
      const int64_t k_tiles = s.k_padded / dq::kStripeTileK;
      std::vector<uint16_t> w16(static_cast<size_t>(c.K * c.N), 0xFFFFu);
      for (int64_t nt = 0; nt < s.n_padded / dq::kStripeTileN; ++nt)
        for (int64_t kt = 0; kt < k_tiles; ++kt)
          for (int w = 0; w < 4; ++w)
            for (int h = 0; h < 2; ++h)
              for (int lane = 0; lane < 32; ++lane) {
                const int64_t g = (kt * dq::kStripeTileK + 32 * h) / s.group_size;
                const uint32_t* tile = &s.words[static_cast<size_t>((nt * k_tiles + kt) * dq::stripe_tile_words(bits))];
                uint32_t words[8];
                if (bits == 4) {
                  dq::stripe_lane_words<4>(tile, w, h, lane, words);
                  dq::stripe_dequant_lane_to_matrix<4>(words, &s.params[static_cast<size_t>(g * s.n_padded)], c.K, c.N, nt, kt, w, h, lane, w16.data());
                } else {
                  dq::stripe_lane_words<8>(tile, w, h, lane, words);
                  dq::stripe_dequant_lane_to_matrix<8>(words, &s.params[static_cast<size_t>(g * s.n_padded)], c.K, c.N, nt, kt, w, h, lane, w16.data());
                }
              }
      for (int64_t kp = 0; kp < c.K; ++kp)
        for (int64_t n = 0; n < c.N; ++n) {
          const int64_t k = order.identity ? kp : order.perm[static_cast<size_t>(kp)];  // row k' holds input perm[k']
          const int32_t g = l.g_idx[static_cast<size_t>(k)];
          const uint16_t want = dq::gptq_dequant_reference(l.codes[static_cast<size_t>(k * c.N + n)], l.zeros[static_cast<size_t>(g * c.N + n)],
                                                           l.scales[static_cast<size_t>(g * c.N + n)]);
          REQUIRE_MESSAGE(w16[static_cast<size_t>(kp * c.N + n)] == want, "k'=" << kp << " n=" << n);
        }
    }
}
