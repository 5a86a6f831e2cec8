// The per-row GPTQ arithmetic that the CPU path and the CUDA kernels share (qgru/gptq/row_block.h), held to
// GPTQ's inner loop written plainly here (a copy of the row, every later column updated after each column,
// std::nearbyint / std::clamp), on layers from isotropic and correlated activations, for every column order,
// static groups and none, with the CPU's layout (stride 1) and the device's (rows interleaved, stride N):
// codes and errors bit for bit. Also the column plan (g_idx, parameter slots) and the device packer's words.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gptq_test_util.h"
#include "qgru/gptq/column_plan.h"
#include "qgru/gptq/device_plan.h"
#include "qgru/gptq/gptq.h"
#include "qgru/gptq/pack.h"
#include "qgru/gptq/quantizer.h"
#include "qgru/gptq/row_block.h"

namespace {

using gptq_test::activations_kmajor;
using gptq_test::hessian_plain;
using gptq_test::normal_values;
using gptq_test::plain_inverse;
using gptq_test::plain_upper_cholesky;

struct BlockOut {
  std::vector<int32_t> codes;
  std::vector<double> err;
};

// GPTQ's inner loop for one row, as the reference writes it.
BlockOut plain_row_block(const double* w, const double* u, int64_t ldu, int64_t count, const double* scale,
                         const double* zero, int64_t maxq) {
  std::vector<double> w1(w, w + count);
  BlockOut out{std::vector<int32_t>(static_cast<size_t>(count)), std::vector<double>(static_cast<size_t>(count))};
  for (int64_t i = 0; i < count; ++i) {
    const double s = scale[i], z = zero[i];
    const double q = std::clamp(std::nearbyint(w1[static_cast<size_t>(i)] / s) + z, 0.0, static_cast<double>(maxq));
    out.codes[static_cast<size_t>(i)] = static_cast<int32_t>(q);
    const double e = (w1[static_cast<size_t>(i)] - s * (q - z)) / u[i * ldu + i];
    out.err[static_cast<size_t>(i)] = e;
    for (int64_t j = i + 1; j < count; ++j) w1[static_cast<size_t>(j)] -= e * u[i * ldu + j];
  }
  return out;
}

template <int kTile>
void check_tile(const std::vector<double>& W, const std::vector<double>& U, int64_t N, int64_t K, int64_t i1,
                int64_t count, const qgru::gptq::ColumnPlan& plan, const std::vector<double>& scales,
                const std::vector<double>& zeros, int64_t maxq) {
  // The device's layout: W transposed ([K, N]), Err and codes [count, N]: row n's entries N apart.
  std::vector<double> Wt(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) Wt[static_cast<size_t>(k * N + n)] = W[static_cast<size_t>(n * K + k)];
  std::vector<double> err(static_cast<size_t>(count * N)), margin(static_cast<size_t>(count * N));
  std::vector<int32_t> codes(static_cast<size_t>(count * N));
  int64_t code_mismatches = 0, err_mismatches = 0;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> scale(static_cast<size_t>(count)), zero(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const size_t s = static_cast<size_t>(plan.slot[static_cast<size_t>(i1 + i)] * N + n);
      scale[static_cast<size_t>(i)] = scales[s];
      zero[static_cast<size_t>(i)] = zeros[s];
    }
    const BlockOut want = plain_row_block(&W[static_cast<size_t>(n * K + i1)], &U[static_cast<size_t>(i1 * K + i1)], K,
                                          count, scale.data(), zero.data(), maxq);
    // CPU layout.
    std::vector<double> err_row(static_cast<size_t>(count));
    std::vector<int32_t> code_row(static_cast<size_t>(count));
    qgru::gptq::gptq_row_block<kTile>(&W[static_cast<size_t>(n * K + i1)], 1, err_row.data(), 1, code_row.data(), 1,
                                      &U[static_cast<size_t>(i1 * K + i1)], K, count, &plan.slot[static_cast<size_t>(i1)],
                                      &scales[static_cast<size_t>(n)], &zeros[static_cast<size_t>(n)], N, maxq);
    // Device layout, with the tie margins.
    qgru::gptq::gptq_row_block<kTile>(&Wt[static_cast<size_t>(i1 * N + n)], N, &err[static_cast<size_t>(n)], N,
                                      &codes[static_cast<size_t>(n)], N, &U[static_cast<size_t>(i1 * K + i1)], K, count,
                                      &plan.slot[static_cast<size_t>(i1)], &scales[static_cast<size_t>(n)],
                                      &zeros[static_cast<size_t>(n)], N, maxq, &margin[static_cast<size_t>(n)], N);
    for (int64_t i = 0; i < count; ++i) {
      const size_t d = static_cast<size_t>(i * N + n);
      code_mismatches += code_row[static_cast<size_t>(i)] != want.codes[static_cast<size_t>(i)];
      code_mismatches += codes[d] != want.codes[static_cast<size_t>(i)];
      // Bit equality (memcmp): == would let −0.0 and 0.0 pass and fail NaN against itself.
      err_mismatches += std::memcmp(&err_row[static_cast<size_t>(i)], &want.err[static_cast<size_t>(i)], 8) != 0;
      err_mismatches += std::memcmp(&err[d], &want.err[static_cast<size_t>(i)], 8) != 0;
      CHECK(margin[d] >= 0.0);
      CHECK(margin[d] <= 0.5);
    }
  }
  CHECK(code_mismatches == 0);
  CHECK(err_mismatches == 0);
}

// A layer, its U (upper Cholesky factor of the damped inverse, permuted by the plan) and parameter tables.
void check_layer(int64_t N, int64_t K, int bits, int64_t gs, int64_t block, int order, bool static_groups, bool sym,
                 int rank) {
  CAPTURE(N); CAPTURE(K); CAPTURE(bits); CAPTURE(gs); CAPTURE(block); CAPTURE(order); CAPTURE(static_groups);
  CAPTURE(sym); CAPTURE(rank);
  const int64_t M = 2 * K;
  const auto H0 = hessian_plain(activations_kmajor(K, M, rank, 31), K, M);
  auto W = normal_values(static_cast<size_t>(N * K), 7, 0.05);
  qgru::gptq::GptqOptions options;
  options.bits = bits;
  options.group_size = gs;
  options.act_order = order == 1;
  options.group_aware = order == 2;
  options.static_groups = static_groups;
  options.sym = sym;
  std::vector<double> diagonal(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) diagonal[static_cast<size_t>(k)] = H0[static_cast<size_t>(k * K + k)];
  const qgru::gptq::ColumnPlan plan = qgru::gptq::plan_columns(diagonal, options);
  std::vector<double> Wp(W.size()), Hp(H0.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < K; ++p) Wp[static_cast<size_t>(n * K + p)] = W[static_cast<size_t>(n * K + plan.perm[static_cast<size_t>(p)])];
  double mean = 0.0;
  for (int64_t p = 0; p < K; ++p) {
    for (int64_t q = 0; q < K; ++q)
      Hp[static_cast<size_t>(p * K + q)] = H0[static_cast<size_t>(plan.perm[static_cast<size_t>(p)] * K + plan.perm[static_cast<size_t>(q)])];
    mean += diagonal[static_cast<size_t>(p)];
  }
  for (int64_t p = 0; p < K; ++p) Hp[static_cast<size_t>(p * K + p)] += 0.01 * mean / static_cast<double>(K);
  const auto U = plain_upper_cholesky(plain_inverse(Hp, K), K);
  // Tables as the plan fills them: from the permuted W at each group start, or once.
  std::vector<double> scales(static_cast<size_t>(plan.tables * N)), zeros(scales.size());
  const auto fill = [&](int64_t row, const qgru::gptq::RowParams& p) {
    std::copy(p.scale.begin(), p.scale.end(), scales.begin() + row * N);
    std::copy(p.zero.begin(), p.zero.end(), zeros.begin() + row * N);
  };
  if (plan.find_at.empty()) {
    for (int64_t t = 0; t < plan.tables; ++t) fill(t, qgru::gptq::find_params(W.data(), N, K, t * plan.group_width, (t + 1) * plan.group_width, bits, sym));
  }
  for (size_t f = 0; f < plan.find_at.size(); ++f) {
    fill(plan.find_slot[f], qgru::gptq::find_params(Wp.data(), N, K, plan.find_at[f], plan.find_at[f] + plan.group_width, bits, sym));
  }
  const int64_t maxq = qgru::gptq::max_code(bits);
  for (int64_t i1 = 0; i1 < K; i1 += block) {
    const int64_t count = std::min(block, K - i1);
    check_tile<1>(Wp, U, N, K, i1, count, plan, scales, zeros, maxq);
    check_tile<8>(Wp, U, N, K, i1, count, plan, scales, zeros, maxq);
    check_tile<qgru::gptq::kRowBlockTile>(Wp, U, N, K, i1, count, plan, scales, zeros, maxq);
    check_tile<64>(Wp, U, N, K, i1, count, plan, scales, zeros, maxq);
  }
}

}  // namespace

TEST_CASE("gptq_row_block_matches_the_plain_inner_loop_bit_for_bit") {
  for (int rank : {0, 6}) {          // isotropic, correlated
    for (int order : {0, 1, 2}) {    // natural, act-order, group-aware
      check_layer(8, 96, 4, 32, 40, order, false, false, rank);   // blocks not on group starts, a 16-wide last block
      check_layer(8, 96, 4, 32, 40, order, true, false, rank);    // static groups
      check_layer(6, 80, 3, -1, 80, order, false, true, rank);    // one group per row, symmetric, one block
      check_layer(4, 72, 2, 16, 33, order, false, false, rank);   // a last partial group of 8, odd blocks
      check_layer(4, 64, 8, 64, 64, order, false, false, rank);
    }
  }
}

TEST_CASE("gptq_column_plan_slots_and_g_idx_follow_the_options") {
  const std::vector<double> diagonal = {1, 5, 3, 5, 2, 9, 0.5, 3, 7, 1, 4, 4, 6, 8, 2, 0.25};
  qgru::gptq::GptqOptions options;
  options.group_size = 4;
  options.act_order = true;
  auto plan = qgru::gptq::plan_columns(diagonal, options);
  CHECK(plan.perm == std::vector<int64_t>{5, 13, 8, 12, 1, 3, 10, 11, 2, 7, 4, 14, 0, 9, 6, 15});
  CHECK(plan.find_at == std::vector<int64_t>{0, 4, 8, 12});
  CHECK(plan.find_slot == std::vector<int32_t>{0, 1, 2, 3});
  for (int64_t p = 0; p < 16; ++p) {
    CHECK(plan.slot[static_cast<size_t>(p)] == p / 4);
    CHECK(plan.g_idx[static_cast<size_t>(plan.perm[static_cast<size_t>(p)])] == p / 4);
  }
  options.static_groups = true;  // parameters by storage group, found once
  plan = qgru::gptq::plan_columns(diagonal, options);
  CHECK(plan.find_at.empty());
  for (int64_t p = 0; p < 16; ++p) CHECK(plan.slot[static_cast<size_t>(p)] == plan.perm[static_cast<size_t>(p)] / 4);
  for (int64_t k = 0; k < 16; ++k) CHECK(plan.g_idx[static_cast<size_t>(k)] == k / 4);
  options.static_groups = false;
  options.act_order = false;
  options.group_aware = true;  // groups move whole: the slot of a processed group is its storage group
  plan = qgru::gptq::plan_columns(diagonal, options);
  CHECK(plan.find_slot == std::vector<int32_t>{1, 3, 2, 0});
  for (int64_t p = 0; p < 16; ++p) CHECK(plan.slot[static_cast<size_t>(p)] == plan.perm[static_cast<size_t>(p)] / 4);
  // Blocks of 6 over 16 columns: [0, 6) finds at 0, 4; [6, 12) at 8; [12, 16) at 12.
  const auto blocks = qgru::gptq::plan_blocks(plan, 6);
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[0].begin == 0);
  CHECK(blocks[0].end == 6);
  CHECK(blocks[0].find_begin == 0);
  CHECK(blocks[0].find_end == 2);
  CHECK(blocks[1].find_begin == 2);
  CHECK(blocks[1].find_end == 3);
  CHECK(blocks[2].begin == 12);
  CHECK(blocks[2].end == 16);
  CHECK(blocks[2].find_end == 4);
  CHECK(qgru::gptq::plan_blocks(plan, int64_t{1} << 40).size() == 1);  // a block wider than K is K wide
  options.group_size = -1;
  plan = qgru::gptq::plan_columns(diagonal, options);
  CHECK(plan.tables == 1);
  CHECK(plan.find_at.empty());
  CHECK(plan.g_idx == std::vector<int32_t>(16, 0));
}

TEST_CASE("gptq_stream_word_packs_as_the_checkpoint_packer") {
  for (int bits : {2, 3, 4, 8}) {
    CAPTURE(bits);
    const int64_t N = 8, K = 96;  // K·bits a multiple of 32 for every width
    std::vector<int32_t> codes(static_cast<size_t>(N * K));
    const auto noise = normal_values(codes.size(), 3);
    for (size_t i = 0; i < codes.size(); ++i) {
      codes[i] = static_cast<int32_t>(std::fabs(noise[i]) * 1000.0) % (1 << bits);
    }
    codes[0] = (1 << bits) - 1;  // all ones at a word edge
    const auto want = qgru::gptq::pack_qweight(codes, N, K, bits, "test");
    const int64_t words = K * bits / 32;
    for (int64_t w = 0; w < words; ++w) {
      for (int64_t n = 0; n < N; ++n) {
        const uint32_t got = qgru::gptq::stream_word(&codes[static_cast<size_t>(n * K)], 1, K, w, bits);
        CHECK(got == static_cast<uint32_t>(want[static_cast<size_t>(w * N + n)]));
      }
    }
  }
}

TEST_CASE("gptq_device_plan_sizes_chunks_and_refuses_what_does_not_fit") {
  // 12 bytes per value: 256 MiB holds 2^28 / (12·4096) = 5461 rows of K = 4096; never more than M, at least 1.
  CHECK(qgru::gptq::hessian_chunk_rows(4096, 262144, uint64_t{256} << 20) == 5461);
  CHECK(qgru::gptq::hessian_chunk_rows(4096, 100, uint64_t{256} << 20) == 100);
  CHECK(qgru::gptq::hessian_chunk_rows(1 << 24, 100, 1024) == 1);
  // Every buffer, each rounded up to 256 bytes, for N = 10, K = 96, B = 40, G = 3, 4 bits.
  const auto up = [](uint64_t bytes) { return (bytes + 255) / 256 * 256; };
  const auto b = qgru::gptq::device_gptq_bytes(10, 96, 40, 3, 4, false);
  CHECK(b.weight == 2 * up(10 * 96 * 8));
  CHECK(b.matrices == 3 * up(96 * 96 * 8));
  CHECK(b.block == up(40 * 10 * 8));
  CHECK(b.tables == up(3 * 10 * 16));
  CHECK(b.codes == 2 * up(96 * 10 * 4) + up(12 * 10 * 4));
  CHECK(b.small == 3 * up(96 * 8) + up(96 * 4));
  CHECK(b.tie_margin == 0);
  CHECK(b.total == b.weight + b.matrices + b.block + b.tables + b.codes + b.small);
  const auto with_ties = qgru::gptq::device_gptq_bytes(10, 96, 40, 3, 4, true);
  CHECK(with_ties.total == b.total + up(96 * 10 * 8));
  CHECK(qgru::gptq::device_gptq_bytes(10, 96, int64_t{1} << 40, 3, 4, false).block == up(96 * 10 * 8));  // B <= K
  CHECK(qgru::gptq::device_gptq_bytes(int64_t{1} << 40, int64_t{1} << 40, 128, 1, 4, false).total == UINT64_MAX);
  // The 4096 × 11008 benchmark layer: three 11008² float64 matrices dominate (2.7 GiB of 3.7).
  const auto big = qgru::gptq::device_gptq_bytes(4096, 11008, 128, 86, 4, false);
  CHECK(big.matrices == 3 * up(uint64_t{11008} * 11008 * 8));
  CHECK(qgru::gptq::device_memory_refusal(4096, 11008, big.total, big.total).empty());
  const std::string refusal = qgru::gptq::device_memory_refusal(4096, 11008, big.total, big.total - 1);
  CHECK(refusal.find("[4096, 11008] layer needs 3.") != std::string::npos);
  CHECK(refusal.find("GiB are free") != std::string::npos);
}
