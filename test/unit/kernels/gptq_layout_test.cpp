// GPTQ layout accessors against a plain bit-packing loop, the exact reference against the fast path, and the
// act-order preparation (a permutation that keeps every product, refusals that say why).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "qgru/kernels/fast_dequant.h"
#include "qgru/kernels/gptq_layout.h"

namespace dq = qgru::kernels;

namespace {

struct Codes {
  int64_t K, N;
  int bits;
  std::vector<uint32_t> codes;  // [K, N]
  std::vector<int32_t> qweight;  // [K*bits/32, N]
};

Codes random_codes(int64_t K, int64_t N, int bits, uint32_t seed) {
  std::mt19937 rng(seed);
  Codes c{K, N, bits, std::vector<uint32_t>(static_cast<size_t>(K * N)), std::vector<int32_t>(static_cast<size_t>(K * bits / 32 * N), 0)};
  for (auto& v : c.codes) v = static_cast<uint32_t>(rng()) & ((1u << bits) - 1u);
  // plain packing loop: bit b of the K stream of column n is bit b % 32 of word b / 32
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) {
      for (int b = 0; b < bits; ++b) {
        const int64_t stream_bit = k * bits + b;
        const uint32_t bit = (c.codes[static_cast<size_t>(k * N + n)] >> b) & 1u;
        auto& word = c.qweight[static_cast<size_t>((stream_bit / 32) * N + n)];
        word = static_cast<int32_t>(static_cast<uint32_t>(word) | (bit << (stream_bit % 32)));
      }
    }
  }
  return c;
}

const uint32_t* words(const std::vector<int32_t>& v) { return reinterpret_cast<const uint32_t*>(v.data()); }

}  // namespace

TEST_CASE("gptq_weight_code reads what a plain bit-stream packer wrote, for 4 and 8 bits") {
  for (int bits : {4, 8}) {
    const Codes c = random_codes(64, 24, bits, 21);
    for (int64_t k = 0; k < c.K; ++k) {
      for (int64_t n = 0; n < c.N; ++n) {
        REQUIRE(dq::gptq_weight_code(words(c.qweight), c.N, bits, k, n) == c.codes[static_cast<size_t>(k * c.N + n)]);
      }
    }
  }
}

TEST_CASE("gptq_zero reads row-packed zeros and adds the v1 adjustment") {
  // zeros [2, 16] for 4 bits: 2 words per row
  std::vector<int32_t> qzeros = {static_cast<int32_t>(0x76543210u), static_cast<int32_t>(0xFEDCBA98u),
                                 static_cast<int32_t>(0x01234567u), static_cast<int32_t>(0x89ABCDEFu)};
  CHECK(dq::gptq_zero(words(qzeros), 16, 4, 0, 0, 0) == 0u);
  CHECK(dq::gptq_zero(words(qzeros), 16, 4, 0, 9, 0) == 9u);
  CHECK(dq::gptq_zero(words(qzeros), 16, 4, 1, 0, 0) == 7u);
  CHECK(dq::gptq_zero(words(qzeros), 16, 4, 1, 15, 1) == 9u);  // stored 8, v1 reads 8 + 1
  CHECK(dq::gptq_zero(words(qzeros), 16, 4, 0, 15, 1) == 16u);  // stored maxq reads maxq + 1
}

TEST_CASE("fast raw dequant of a GPTQ word equals the exact reference for each k of the word") {
  const Codes c = random_codes(32, 8, 4, 5);
  const uint16_t scale = 0x2A3D;
  for (int64_t kw = 0; kw < 4; ++kw) {
    for (int64_t n = 0; n < 8; ++n) {
      const uint32_t word = words(c.qweight)[kw * 8 + n];
      const dq::F16x2x4 h = dq::dequant_u4x8_raw(word, 9, scale);
      for (int pair = 0; pair < 4; ++pair) {
        for (int high = 0; high < 2; ++high) {
          const int64_t k = kw * 8 + dq::raw_pair_element(8, pair, high);
          const uint16_t got = static_cast<uint16_t>(high ? h.pair[pair] >> 16 : h.pair[pair] & 0xFFFFu);
          REQUIRE(got == dq::gptq_dequant_reference(c.codes[static_cast<size_t>(k * 8 + n)], 9, scale));
        }
      }
    }
  }
}

TEST_CASE("trivial g_idx needs no permutation") {
  std::vector<int32_t> g_idx(256);
  for (int k = 0; k < 256; ++k) g_idx[static_cast<size_t>(k)] = k / 64;
  dq::ActOrderPlan plan;
  CHECK(dq::plan_act_order(g_idx, 256, 64, plan).empty());
  CHECK(plan.identity);
  CHECK(plan.perm.empty());
}

TEST_CASE("act-order g_idx: sorted permutation keeps every product a[k]*w[k,n] (exact integers)") {
  const int64_t K = 128, N = 16, group = 32;
  std::vector<int32_t> order(K);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(8);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> g_idx(K);
  for (int64_t i = 0; i < K; ++i) g_idx[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / group);
  dq::ActOrderPlan plan;
  REQUIRE(dq::plan_act_order(g_idx, K, group, plan).empty());
  REQUIRE(!plan.identity);
  std::vector<int32_t> sorted = plan.perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t k = 0; k < K; ++k) REQUIRE(sorted[static_cast<size_t>(k)] == k);
  for (int64_t kp = 0; kp < K; ++kp) REQUIRE(g_idx[static_cast<size_t>(plan.perm[static_cast<size_t>(kp)])] == kp / group);

  const Codes c = random_codes(K, N, 4, 13);
  const std::vector<int32_t> permuted = dq::permute_qweight_rows(c.qweight, K, N, 4, plan.perm);
  std::vector<int64_t> a(K);
  for (auto& v : a) v = static_cast<int64_t>(static_cast<uint32_t>(rng()) % 2001) - 1000;
  for (int64_t n = 0; n < N; ++n) {
    int64_t original = 0, reordered = 0;
    for (int64_t k = 0; k < K; ++k) original += a[static_cast<size_t>(k)] * c.codes[static_cast<size_t>(k * N + n)];
    for (int64_t kp = 0; kp < K; ++kp) {
      const int32_t k = plan.perm[static_cast<size_t>(kp)];
      reordered += a[static_cast<size_t>(k)] * dq::gptq_weight_code(words(permuted), N, 4, kp, n);
    }
    REQUIRE(original == reordered);
    REQUIRE(original != 0);
  }
}

TEST_CASE("act-order refusals name the problem: wrong length, out-of-range group, unequal groups") {
  dq::ActOrderPlan plan;
  CHECK(dq::plan_act_order(std::vector<int32_t>(10, 0), 16, 8, plan).find("expected K = 16") != std::string::npos);
  std::vector<int32_t> bad(16, 0);
  bad[3] = 5;
  CHECK(dq::plan_act_order(bad, 16, 8, plan).find("g_idx[3] = 5") != std::string::npos);
  std::vector<int32_t> unequal(16, 0);
  for (int k = 0; k < 16; ++k) unequal[static_cast<size_t>(k)] = k < 12 ? 1 : 0;  // group 1 holds 12
  CHECK(dq::plan_act_order(unequal, 16, 8, plan).find("inputs per group") != std::string::npos);
}
