// GPTQ against a float64 re-implementation of the reference update rule written plainly here (no blocks,
// no BLAS/LAPACK: Gauss-Jordan inverse, textbook Cholesky), and GPTQ's error against round-to-nearest.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gptq_test_util.h"
#include "qgru/base/error.h"
#include "qgru/gptq/gptq.h"

namespace {

using gptq_test::activations_kmajor;
using gptq_test::hessian_plain;
using gptq_test::normal_values;
using gptq_test::output_error_plain;
using gptq_test::plain_inverse;
using gptq_test::plain_upper_cholesky;

struct Plain {
  std::vector<int32_t> codes;  // [N, K] original order
  std::vector<double> scales;  // [G, N]
  std::vector<int32_t> zeros;
  std::vector<int32_t> g_idx;
};

void plain_params(const std::vector<double>& W, int64_t N, int64_t K, int64_t c0, int64_t c1, int bits, bool sym,
                  std::vector<double>& scale, std::vector<double>& zero) {
  const double maxq = std::pow(2.0, bits) - 1.0;
  scale.assign(static_cast<size_t>(N), 0.0);
  zero.assign(static_cast<size_t>(N), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    double lo = 0.0, hi = 0.0;
    for (int64_t k = c0; k < std::min(c1, K); ++k) {
      lo = std::min(lo, W[static_cast<size_t>(n * K + k)]);
      hi = std::max(hi, W[static_cast<size_t>(n * K + k)]);
    }
    if (sym) {
      hi = std::max(-lo, hi);
      if (lo < 0) lo = -hi;
    }
    if (lo == 0 && hi == 0) { lo = -1; hi = 1; }
    scale[static_cast<size_t>(n)] = (hi - lo) / maxq;
    zero[static_cast<size_t>(n)] = sym ? (maxq + 1) / 2 : std::nearbyint(-lo / scale[static_cast<size_t>(n)]);
  }
}

enum class Order { kNatural, kActOrder, kGroupAware };

// Group-aware order as GPTQModel's gar_ref.py writes it, loop by loop: per full group, its columns by
// descending diag; groups by descending max diag; columns of a last partial group appended in order.
std::vector<int64_t> plain_group_aware_perm(const std::vector<double>& H, int64_t K, int64_t gs) {
  auto diag = [&](int64_t i) { return H[static_cast<size_t>(i * K + i)]; };
  const int64_t groups = K / gs;
  std::vector<std::vector<int64_t>> local(static_cast<size_t>(groups));
  std::vector<int64_t> group_order(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t i = g * gs; i < (g + 1) * gs; ++i) local[static_cast<size_t>(g)].push_back(i);
    std::stable_sort(local[static_cast<size_t>(g)].begin(), local[static_cast<size_t>(g)].end(),
                     [&](int64_t a, int64_t b) { return diag(a) > diag(b); });
    group_order[static_cast<size_t>(g)] = g;
  }
  auto group_max = [&](int64_t g) {
    double best = diag(g * gs);
    for (int64_t i = g * gs; i < (g + 1) * gs; ++i) best = std::max(best, diag(i));
    return best;
  };
  std::stable_sort(group_order.begin(), group_order.end(), [&](int64_t a, int64_t b) { return group_max(a) > group_max(b); });
  std::vector<int64_t> perm;
  for (int64_t g : group_order) perm.insert(perm.end(), local[static_cast<size_t>(g)].begin(), local[static_cast<size_t>(g)].end());
  for (int64_t i = groups * gs; i < K; ++i) perm.push_back(i);
  return perm;
}

// The reference's fasterquant with blocksize = K (so every in-block update is applied before a group
// starts, which equals the blocked algorithm when group starts fall on block starts). Group-aware order:
// GPTQModel's, with the parameters of a processed group stored at its storage group and g_idx = k / gs.
Plain plain_gptq(std::vector<double> W, int64_t N, int64_t K, std::vector<double> H, int bits, int64_t gs,
                 Order order, bool sym, double damp) {
  const bool act_order = order == Order::kActOrder;
  const double maxq = std::pow(2.0, bits) - 1.0;
  const int64_t G = gs == -1 ? 1 : (K + gs - 1) / gs;
  Plain out;
  out.codes.assign(static_cast<size_t>(N * K), 0);
  out.scales.assign(static_cast<size_t>(G * N), 0.0);
  out.zeros.assign(static_cast<size_t>(G * N), 0);
  out.g_idx.assign(static_cast<size_t>(K), 0);
  std::vector<double> scale, zero;
  plain_params(W, N, K, 0, K, bits, sym, scale, zero);
  for (int64_t i = 0; i < K; ++i) {
    if (H[static_cast<size_t>(i * K + i)] == 0) {
      H[static_cast<size_t>(i * K + i)] = 1;
      for (int64_t n = 0; n < N; ++n) W[static_cast<size_t>(n * K + i)] = 0;
    }
  }
  std::vector<int64_t> perm(static_cast<size_t>(K));
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return H[static_cast<size_t>(a * K + a)] > H[static_cast<size_t>(b * K + b)];
    });
  } else if (order == Order::kGroupAware) {
    perm = plain_group_aware_perm(H, K, gs == -1 ? K : gs);
  }
  std::vector<double> Wp(W.size()), Hp(H.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < K; ++p) Wp[static_cast<size_t>(n * K + p)] = W[static_cast<size_t>(n * K + perm[p])];
  for (int64_t p = 0; p < K; ++p)
    for (int64_t q = 0; q < K; ++q) Hp[static_cast<size_t>(p * K + q)] = H[static_cast<size_t>(perm[p] * K + perm[q])];
  double mean = 0;
  for (int64_t i = 0; i < K; ++i) mean += Hp[static_cast<size_t>(i * K + i)] / static_cast<double>(K);
  for (int64_t i = 0; i < K; ++i) Hp[static_cast<size_t>(i * K + i)] += damp * mean;
  const std::vector<double> U = plain_upper_cholesky(plain_inverse(Hp, K), K);
  for (int64_t i = 0; i < K; ++i) {
    if (gs != -1 && i % gs == 0) {
      plain_params(Wp, N, K, i, i + gs, bits, sym, scale, zero);
      const int64_t g = act_order ? i / gs : perm[i] / gs;
      for (int64_t n = 0; n < N; ++n) {
        out.scales[static_cast<size_t>(g * N + n)] = scale[static_cast<size_t>(n)];
        out.zeros[static_cast<size_t>(g * N + n)] = static_cast<int32_t>(zero[static_cast<size_t>(n)]);
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      const double w = Wp[static_cast<size_t>(n * K + i)];
      const double s = scale[static_cast<size_t>(n)], z = zero[static_cast<size_t>(n)];
      const double q = std::clamp(std::nearbyint(w / s) + z, 0.0, maxq);
      out.codes[static_cast<size_t>(n * K + perm[i])] = static_cast<int32_t>(q);
      const double err = (w - s * (q - z)) / U[static_cast<size_t>(i * K + i)];
      for (int64_t j = i; j < K; ++j) Wp[static_cast<size_t>(n * K + j)] -= err * U[static_cast<size_t>(i * K + j)];
    }
    if (gs != -1) out.g_idx[static_cast<size_t>(perm[i])] = static_cast<int32_t>((act_order ? i : perm[i]) / gs);
  }
  if (gs == -1) {
    for (int64_t n = 0; n < N; ++n) {
      out.scales[static_cast<size_t>(n)] = scale[static_cast<size_t>(n)];
      out.zeros[static_cast<size_t>(n)] = static_cast<int32_t>(zero[static_cast<size_t>(n)]);
    }
  }
  return out;
}

void check_against_plain(int64_t N, int64_t K, int bits, int64_t gs, int64_t block, Order order, bool sym) {
  CAPTURE(N); CAPTURE(K); CAPTURE(bits); CAPTURE(gs); CAPTURE(block); CAPTURE(static_cast<int>(order)); CAPTURE(sym);
  const int64_t M = 64;
  const auto X = activations_kmajor(K, M, 4, 11);
  const auto H = hessian_plain(X, K, M);
  const auto W = normal_values(static_cast<size_t>(N * K), 5, 0.1);
  qgru::gptq::GptqOptions options;
  options.bits = bits;
  options.group_size = gs;
  options.block_size = block;
  options.act_order = order == Order::kActOrder;
  options.group_aware = order == Order::kGroupAware;
  options.sym = sym;
  const auto got = qgru::gptq::gptq_quantize(W, N, K, H, options);
  const Plain want = plain_gptq(W, N, K, H, bits, gs, order, sym, 0.01);
  int mismatches = 0;
  for (size_t i = 0; i < want.codes.size(); ++i) {
    if (got.codes[i] != want.codes[i] && mismatches++ < 3) {
      MESSAGE("code mismatch at n=" << i / K << " k=" << i % K << ": library " << got.codes[i] << ", plain "
                                    << want.codes[i]);
    }
  }
  CHECK(mismatches == 0);
  CHECK(got.g_idx == want.g_idx);
  CHECK(got.zeros == want.zeros);
  REQUIRE(got.scales.size() == want.scales.size());
  for (size_t i = 0; i < want.scales.size(); ++i) CHECK(got.scales[i] == doctest::Approx(want.scales[i]).epsilon(1e-12));
}

// A diagonal H [16, 16] whose diagonal exercises ties: 1, 5, 3, 5, 2, 9, 0.5, 3, 7, 1, 4, 4, 6, 8, 2, 0.25.
std::vector<double> ordering_hessian() {
  const double diag[16] = {1, 5, 3, 5, 2, 9, 0.5, 3, 7, 1, 4, 4, 6, 8, 2, 0.25};
  std::vector<double> H(16 * 16, 0.0);
  for (size_t i = 0; i < 16; ++i) H[i * 16 + i] = diag[i];
  return H;
}

}  // namespace

TEST_CASE("gptq_codes_match_plain_float64_reference_small_case") {
  const Order natural = Order::kNatural, act = Order::kActOrder;
  check_against_plain(4, 16, 4, -1, 4, natural, false);   // K = 16, N = 4, lazy blocks of 4
  check_against_plain(4, 16, 4, 8, 4, natural, false);    // groups of 8 start on block starts
  check_against_plain(4, 16, 3, 8, 8, act, false);        // act-order with groups
  check_against_plain(8, 32, 2, 16, 8, natural, true);    // symmetric 2-bit
  check_against_plain(8, 32, 8, -1, 128, act, false);     // one block larger than K
  check_against_plain(6, 24, 4, 16, 8, natural, false);   // K not a multiple of the group size: last group of 8
}

// --block-size and --group-size past K once allocated N·block_size doubles (a block of 10^8 columns on a
// [16, 64] layer asked for 12.8 GB) and overflowed g·group_size: a block or group wider than K is K wide.
TEST_CASE("gptq_block_or_group_wider_than_k_allocates_nothing_more_and_matches_one_block") {
  const Order natural = Order::kNatural, act = Order::kActOrder, aware = Order::kGroupAware;
  const int64_t huge = int64_t{1} << 40;
  check_against_plain(16, 64, 4, -1, huge, natural, false);
  check_against_plain(16, 64, 4, -1, INT64_MAX, act, false);
  check_against_plain(16, 64, 4, huge, 16, aware, false);  // one group of K
  check_against_plain(16, 64, 3, huge, huge, natural, true);
  const auto W = normal_values(16 * 64, 5, 0.1);
  const auto H = hessian_plain(activations_kmajor(64, 64, 4, 11), 64, 64);
  qgru::gptq::GptqOptions options;
  options.group_size = INT64_MAX;
  options.block_size = INT64_MAX;
  const auto one_group = qgru::gptq::gptq_quantize(W, 16, 64, H, options);
  CHECK(one_group.G == 1);
  CHECK(one_group.g_idx == std::vector<int32_t>(64, 0));
  CHECK(qgru::gptq::rtn_quantize(W, 16, 64, options).G == 1);
  // Groups inside one block take their parameters from W as the block found it (the reference's rule), so a
  // block of 2^63 - 1 columns is exactly a block of K = 64.
  options.group_size = 32;
  const auto huge_block = qgru::gptq::gptq_quantize(W, 16, 64, H, options);
  options.block_size = 64;
  const auto k_block = qgru::gptq::gptq_quantize(W, 16, 64, H, options);
  CHECK(huge_block.codes == k_block.codes);
  CHECK(huge_block.scales == k_block.scales);
  CHECK(huge_block.zeros == k_block.zeros);
}

TEST_CASE("gptq_group_aware_order_matches_plain_reference_and_keeps_storage_groups") {
  const Order aware = Order::kGroupAware;
  check_against_plain(4, 32, 4, 8, 8, aware, false);    // 4 groups reordered, each sorted inside
  check_against_plain(6, 40, 3, 16, 8, aware, false);   // a last partial group of 8 stays last
  check_against_plain(8, 32, 2, 16, 16, aware, true);   // symmetric 2-bit
  check_against_plain(4, 16, 4, -1, 4, aware, false);   // one group: the act-order permutation, g_idx all 0
}

TEST_CASE("gptq_group_aware_g_idx_stays_in_storage_order_while_columns_move") {
  const int64_t N = 4, K = 16, gs = 4;
  const auto H = ordering_hessian();
  const auto W = normal_values(static_cast<size_t>(N * K), 8);
  qgru::gptq::GptqOptions options;
  options.group_size = gs;
  options.group_aware = true;
  const auto result = qgru::gptq::gptq_quantize(W, N, K, H, options);
  // Group maxima 5, 9, 7, 8: groups 1, 3, 2, 0; inside each, descending diag, ties in column order.
  const std::vector<int64_t> want_perm = {5, 7, 4, 6, 13, 12, 14, 15, 8, 10, 11, 9, 1, 3, 2, 0};
  CHECK(result.perm == want_perm);
  for (int64_t k = 0; k < K; ++k) CHECK(result.g_idx[static_cast<size_t>(k)] == k / gs);
  // Scales are found on the group's own columns: a group whose W is scaled by 100 has scales 100× larger.
  auto W_big = W;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 12; k < 16; ++k) W_big[static_cast<size_t>(n * K + k)] *= 100.0;
  const auto big = qgru::gptq::gptq_quantize(W_big, N, K, H, options);
  for (int64_t n = 0; n < N; ++n) {
    CHECK(big.scales[static_cast<size_t>(3 * N + n)] > 20.0 * big.scales[static_cast<size_t>(0 * N + n)]);
  }
  options.act_order = true;  // act_order wins over group_aware
  CHECK(qgru::gptq::gptq_quantize(W, N, K, H, options).perm ==
        std::vector<int64_t>{5, 13, 8, 12, 1, 3, 10, 11, 2, 7, 4, 14, 0, 9, 6, 15});
}

TEST_CASE("gptq_error_not_above_rtn_on_correlated_data") {
  const int64_t N = 32, K = 64, M = 512;
  for (int rank : {0, 8}) {
    CAPTURE(rank);
    const auto X = activations_kmajor(K, M, rank, 21);
    const auto H = hessian_plain(X, K, M);
    const auto W = normal_values(static_cast<size_t>(N * K), 9, 0.05);
    qgru::gptq::GptqOptions options;
    options.group_size = 32;
    const auto gptq = qgru::gptq::dequantize(qgru::gptq::gptq_quantize(W, N, K, H, options));
    const auto rtn = qgru::gptq::dequantize(qgru::gptq::rtn_quantize(W, N, K, options));
    const double e_gptq = output_error_plain(W, gptq, X, N, K, M);
    const double e_rtn = output_error_plain(W, rtn, X, N, K, M);
    const double e_w = output_error_plain(W, {}, X, N, K, M);
    REQUIRE(e_w > 0);
    REQUIRE(e_rtn > 0);
    CHECK(e_gptq < e_rtn);
    if (rank > 0) CHECK(e_gptq < 0.5 * e_rtn);  // correlated inputs: GPTQ compensates most of the error
    // output_energy through H (float32 products) equals the error measured on X itself.
    std::vector<double> D(W.size());
    for (size_t i = 0; i < W.size(); ++i) D[i] = W[i] - gptq[i];
    CHECK(qgru::gptq::output_energy(D, N, K, H) == doctest::Approx(e_gptq).epsilon(1e-5));
  }
}

TEST_CASE("gptq_dead_columns_quantize_to_zero_without_nan") {
  const int64_t N = 4, K = 16, M = 40;
  auto X = activations_kmajor(K, M, 0, 3);
  for (int64_t t = 0; t < M; ++t) X[static_cast<size_t>(5 * M + t)] = 0.0;  // input 5 never fires
  const auto H = hessian_plain(X, K, M);
  const auto W = normal_values(static_cast<size_t>(N * K), 4);
  qgru::gptq::GptqOptions options;
  options.group_size = 8;
  const auto result = qgru::gptq::gptq_quantize(W, N, K, H, options);
  CHECK(result.dead_columns == 1);
  const auto W_hat = qgru::gptq::dequantize(result);
  for (double w : W_hat) REQUIRE(std::isfinite(w));
  for (int64_t n = 0; n < N; ++n) CHECK(W_hat[static_cast<size_t>(n * K + 5)] == 0.0);
}

TEST_CASE("gptq_act_order_g_idx_follows_descending_diag_stably") {
  const int64_t N = 4, K = 16, gs = 4;
  const auto H = ordering_hessian();
  const auto W = normal_values(static_cast<size_t>(N * K), 8);
  qgru::gptq::GptqOptions options;
  options.group_size = gs;
  options.act_order = true;
  const auto result = qgru::gptq::gptq_quantize(W, N, K, H, options);
  const std::vector<int64_t> want_perm = {5, 13, 8, 12, 1, 3, 10, 11, 2, 7, 4, 14, 0, 9, 6, 15};
  CHECK(result.perm == want_perm);
  for (int64_t p = 0; p < K; ++p) CHECK(result.g_idx[static_cast<size_t>(want_perm[static_cast<size_t>(p)])] == p / gs);

  options.static_groups = true;  // static groups keep g_idx in column order
  const auto fixed = qgru::gptq::gptq_quantize(W, N, K, H, options);
  for (int64_t k = 0; k < K; ++k) CHECK(fixed.g_idx[static_cast<size_t>(k)] == k / gs);
  // Static groups' parameters are those of round-to-nearest on the original W.
  const auto rtn = qgru::gptq::rtn_quantize(W, N, K, options);
  CHECK(fixed.scales == rtn.scales);
  CHECK(fixed.zeros == rtn.zeros);
}

TEST_CASE("gptq_non_positive_definite_hessian_retries_then_fails_clearly") {
  const int64_t N = 2, K = 2;
  const std::vector<double> H = {1.0, 3.0, 3.0, 1.0};  // eigenvalues 4 and −2
  const std::vector<double> W = {0.5, -0.25, 0.125, 1.0};
  qgru::gptq::GptqOptions options;
  options.group_size = -1;
  const auto result = qgru::gptq::gptq_quantize(W, N, K, H, options);  // 0.01, 0.1, 1 fail; 10 works
  CHECK(result.damp_used == doctest::Approx(10.0));
  options.max_damp_retries = 2;
  CHECK_THROWS_WITH_AS(qgru::gptq::gptq_quantize(W, N, K, H, options),
                       doctest::Contains("not positive definite"), qgru::Error);
  std::vector<double> H_nan = {1.0, 0.0, 0.0, std::nan("")};
  CHECK_THROWS_WITH_AS(qgru::gptq::gptq_quantize(W, N, K, H_nan, options), doctest::Contains("non-finite"),
                       qgru::Error);
}

TEST_CASE("gptq_refuses_bad_options_and_shapes") {
  const std::vector<double> W(8, 0.5), H = {1, 0, 0, 1};
  qgru::gptq::GptqOptions options;
  options.bits = 5;
  CHECK_THROWS_AS(qgru::gptq::gptq_quantize(W, 4, 2, H, options), qgru::Error);
  options.bits = 4;
  options.group_size = 0;
  CHECK_THROWS_AS(qgru::gptq::gptq_quantize(W, 4, 2, H, options), qgru::Error);
  options.group_size = -1;
  CHECK_THROWS_AS(qgru::gptq::gptq_quantize(W, 4, 3, H, options), qgru::Error);  // W size ≠ N·K
  CHECK_THROWS_AS(qgru::gptq::gptq_quantize(W, 2, 4, H, options), qgru::Error);  // H size ≠ K·K
}
