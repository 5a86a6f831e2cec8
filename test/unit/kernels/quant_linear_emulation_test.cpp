// Host emulation of cuda/src/quant_linear_kernels.cu's block loop with the kernel's own QGRU_HD pieces:
// plan_linear's grid and split-K ranges, the double-buffered pipeline (load_stage for every thread into the
// stage of the next k tile: A chunks with the act-order gather, packed W words; dequant_stage_column for every
// thread from the current stage into the W tile, zero/scale once per group), the tile product in double
// standing in for WMMA, and the epilogue's per-warp fragment walk (fragment_element). Compared with a direct reference Σ_k a[m,k]·RN(s·(u − z)) built
// from independently packed codes. Catches indexing, padding, group, zero-format and split-K mistakes on a
// machine without a GPU; only WMMA itself and the memory system are left to the GPU self-test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "gptq_test_layer.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/kernels/linear_plan.h"
#include "qgru/kernels/quant_linear_tile.h"
#include "qgru/half.h"

namespace dq = qgru::kernels;

namespace {

struct Problem {
  int64_t M, N, K, group;
  int bits, zero_adjust;
  bool act_order;
};

using Layer = qgru::test::GptqLayer;

Layer make_layer(const Problem& p, std::mt19937& rng) {
  const uint32_t maxq = (1u << p.bits) - 1u;
  const int64_t G = (p.K + p.group - 1) / p.group;
  Layer l;
  l.codes.resize(static_cast<size_t>(p.K * p.N));
  l.zeros.resize(static_cast<size_t>(G * p.N));
  l.scales.resize(static_cast<size_t>(G * p.N));
  for (auto& c : l.codes) c = static_cast<uint32_t>(rng()) & maxq;
  for (auto& z : l.zeros) z = static_cast<uint32_t>(rng()) % maxq + static_cast<uint32_t>(p.zero_adjust);
  for (auto& s : l.scales) s = qgru::float_to_half_bits(0.001f + static_cast<float>(static_cast<uint32_t>(rng()) % 1000) * 1e-5f);
  qgru::test::pack_layer(l, p.K, p.N, G, p.group, p.bits, p.zero_adjust, p.act_order, rng);
  return l;
}

// The kernel's block loop on the host. Returns C [M, N] in double (before the final fp16 rounding).
template <int Bits>
std::vector<double> emulate_kernel(const Problem& p, const Layer& l, const std::vector<uint16_t>& a, int config_index) {
  dq::LinearTuning tuning;
  tuning.config_index = config_index;
  const dq::LinearPlan plan = dq::plan_linear({p.M, p.N, p.K, p.bits, p.group}, 132, tuning);
  REQUIRE_MESSAGE(plan.supported, plan.reason);
  const dq::TileConfig& cfg = dq::kTileConfigs[plan.config_index];
  REQUIRE(cfg.bits == Bits);
  dq::ActOrderPlan order;
  REQUIRE(dq::plan_act_order(l.g_idx, p.K, p.group, order).empty());
  const std::vector<int32_t> qweight =
      order.identity ? l.qweight : dq::permute_qweight_rows(l.qweight, p.K, p.N, p.bits, order.perm);
  const auto* qw = reinterpret_cast<const uint32_t*>(qweight.data());
  const auto* qz = reinterpret_cast<const uint32_t*>(l.qzeros.data());
  REQUIRE(reinterpret_cast<uintptr_t>(qw) % 16 == 0);  // the 16-byte stage copies
  const int BM = cfg.block_m, BN = cfg.block_n, BK = cfg.block_k, ldA = BK + 8, ldW = BN + 8;
  const int threads = 32 * cfg.warps_m * cfg.warps_n, per = 32 / Bits;
  const int warp_tile_m = BM / cfg.warps_m, warp_tile_n = BN / cfg.warps_n;
  std::vector<double> c(static_cast<size_t>(p.M * p.N), 0.0);
  std::vector<uint16_t> a_stage[2], w_s(static_cast<size_t>(BK * ldW));
  std::vector<uint32_t> w_stage[2];
  for (int s = 0; s < 2; ++s) {
    a_stage[s].resize(static_cast<size_t>(BM * ldA));
    w_stage[s].resize(static_cast<size_t>(BK / per * BN));
  }
  int64_t unwritten = 0;  // tile entries the loaders never wrote (poison 0xFFFF is a NaN, never a code)
  std::vector<int> written(static_cast<size_t>(BM * BN));
  for (int64_t bz = 0; bz < plan.grid_z; ++bz) {
    for (int64_t by = 0; by < plan.grid_y; ++by) {
      for (int64_t bx = 0; bx < plan.grid_x; ++bx) {
        const int64_t n0 = bx * BN, m0 = by * BM;
        const dq::KTileRange range = dq::split_k_range(plan.k_tiles, plan.k_tiles_per_split, bz);
        std::vector<double> acc(static_cast<size_t>(BM * BN), 0.0);
        const int32_t* perm = order.identity ? nullptr : order.perm.data();
        const auto load = [&](int s, int64_t k0) {
          std::fill(a_stage[s].begin(), a_stage[s].end(), uint16_t{0xFFFF});  // poison: every used entry is written
          std::fill(w_stage[s].begin(), w_stage[s].end(), 0xDEADBEEFu);
          for (int tid = 0; tid < threads; ++tid)
            dq::load_stage<Bits>(a.data(), perm, qw, p.M, p.N, p.K, m0, n0, k0, BM, BN, BK, tid, threads,
                                 a_stage[s].data(), ldA, w_stage[s].data());
        };
        if (range.begin < range.end) load(0, range.begin * BK);
        for (int64_t kt = range.begin; kt < range.end; ++kt) {
          const int s = static_cast<int>((kt - range.begin) & 1);
          if (kt + 1 < range.end) load(s ^ 1, (kt + 1) * BK);
          std::fill(w_s.begin(), w_s.end(), uint16_t{0xFFFF});
          for (int tid = 0; tid < threads; ++tid)
            dq::dequant_stage_column<Bits>(w_stage[s].data(), qz, l.scales.data(), p.N, p.group, p.zero_adjust, kt * BK,
                                           n0, tid % BN, tid / BN, threads / BN, BN, BK, w_s.data(), ldW);
          for (int r = 0; r < BM; ++r)
            for (int col = 0; col < BN; ++col) {
              double sum = 0;
              for (int kk = 0; kk < BK; ++kk) {
                const uint16_t av = a_stage[s][static_cast<size_t>(r * ldA + kk)], wv = w_s[static_cast<size_t>(kk * ldW + col)];
                unwritten += (av == 0xFFFF) + (wv == 0xFFFF);
                sum += static_cast<double>(qgru::half_bits_to_float(av)) * qgru::half_bits_to_float(wv);
              }
              acc[static_cast<size_t>(r * BN + col)] += sum;
            }
        }
        // Epilogue: warp (wm, wn), fragment (i, j), element e -> C, each block-tile element exactly once.
        std::fill(written.begin(), written.end(), 0);
        for (int warp = 0; warp < cfg.warps_m * cfg.warps_n; ++warp) {
          const int wm = warp / cfg.warps_n, wn = warp % cfg.warps_n;
          for (int i = 0; i < warp_tile_m / 16; ++i)
            for (int j = 0; j < warp_tile_n / 16; ++j)
              for (int e = 0; e < 256; ++e) {
                const dq::TileCoord f = dq::fragment_element(e);
                const int r = wm * warp_tile_m + i * 16 + f.row, col = wn * warp_tile_n + j * 16 + f.col;
                ++written[static_cast<size_t>(r * BN + col)];
                const int64_t m = m0 + r, n = n0 + col;
                if (m < p.M && n < p.N) c[static_cast<size_t>(m * p.N + n)] += acc[static_cast<size_t>(r * BN + col)];
              }
        }
        for (int count : written) REQUIRE(count == 1);
      }
    }
  }
  CHECK(unwritten == 0);
  return c;
}

void check_problem(const Problem& p, uint32_t seed, int config_index = -1) {
  CAPTURE(config_index);
  std::mt19937 rng(seed);
  const Layer l = make_layer(p, rng);
  std::vector<uint16_t> a(static_cast<size_t>(p.M * p.K));
  for (auto& v : a) v = qgru::float_to_half_bits(static_cast<float>(static_cast<uint32_t>(rng()) % 2001) / 1000.0f - 1.0f);
  const std::vector<double> got =
      p.bits == 4 ? emulate_kernel<4>(p, l, a, config_index) : emulate_kernel<8>(p, l, a, config_index);
  double norm = 0;
  for (int64_t m = 0; m < p.M; ++m) {
    for (int64_t n = 0; n < p.N; ++n) {
      const qgru::test::ReferenceSum r = qgru::test::reference_output(l.codes, l.zeros, l.scales, l.g_idx, a, p.K, p.N, m, n);
      const double ref = r.value, mag = r.magnitude;
      norm += ref * ref;
      const double diff = std::fabs(got[static_cast<size_t>(m * p.N + n)] - ref);
      REQUIRE_MESSAGE(diff <= 1e-12 * (mag + 1e-30), "M=" << p.M << " N=" << p.N << " K=" << p.K << " bits=" << p.bits
                                                          << " at m=" << m << " n=" << n << ": emulated "
                                                          << got[static_cast<size_t>(m * p.N + n)] << " reference " << ref);
    }
  }
  CHECK(norm > 0);
}

}  // namespace

TEST_CASE("kernel block loop (emulated) matches the reference: partial tiles, split-K, zero formats, act-order") {
  const Problem problems[] = {
      {1, 136, 256, 64, 4, 0, false},   // one row, split-K, partial column tile
      {2, 128, 64, 8, 4, 0, false},     // group 8: four groups per k tile (zero/scale reloaded at each)
      {3, 136, 96, 4, 8, 1, false},     // 8-bit, group 4: eight groups per k tile
      {5, 264, 128, 32, 4, 1, false},   // v1 zeros, group 32
      {33, 128, 64, 64, 4, 0, true},    // large tile, partial row tile, act-order
      {3, 136, 256, 256, 8, 1, false},  // 8-bit, one group, v1 zeros
      {40, 128, 128, 32, 8, 0, true},   // 8-bit act-order, large tile
  };
  uint32_t seed = 100;
  for (const Problem& p : problems) check_problem(p, seed++);
}

TEST_CASE("every tile configuration's block loop (emulated) matches the reference where its k tile divides K") {
  const Problem problems[] = {
      {1, 136, 256, 64, 4, 0, false},  {2, 128, 128, 8, 4, 0, false},  {3, 136, 192, 4, 8, 1, false},
      {33, 128, 128, 64, 4, 0, true},  {40, 128, 128, 32, 8, 0, true}, {17, 264, 256, 128, 8, 1, false},
  };
  uint32_t seed = 200;
  int runs = 0;
  for (const Problem& p : problems) {
    for (int i = 0; i < dq::kTileConfigCount; ++i) {
      if (dq::kTileConfigs[i].bits != p.bits || p.K % dq::kTileConfigs[i].block_k != 0) continue;
      check_problem(p, seed++, i);
      ++runs;
    }
  }
  CHECK(runs == 18);  // three configurations per bit width, every problem
}
