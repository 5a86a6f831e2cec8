#pragma once
// Shared by the host emulations of the kernels on the stripes weight layout (stripe_linear_test.cpp: the mma.sync
// kernel; stripe_wgmma_test.cpp: the wgmma kernel): the test layers, the emulated launch's output, the column
// epilogue both kernels share (direct store, or partial slots + counter + the last block's fixed-order sum, with
// the kernels' own QGRU_HD pieces), and the comparison with a float64 product of the plain dequantized checkpoint
// weights (act-order through the original g_idx): exactly where every sum is exact (integral activations,
// power-of-two scales), within the fp32 accumulation bound otherwise.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <random>
#include <vector>

#include "gptq_test_layer.h"
#include "qgru/half.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/kernels/stripe_linear.h"

namespace qgru::test::stripes {

namespace dq = qgru::kernels;

struct Case {
  int64_t M, N, K, group;  // group = K: one group ("-1", per channel)
  int bits, zero_adjust;
  bool act_order, symmetric, exact_data;
  int64_t target_blocks;
};

using Layer = GptqLayer;

inline Layer make_layer(const Case& c, std::mt19937& rng) {
  const uint32_t maxq = (1u << c.bits) - 1u;
  const int64_t G = (c.K + c.group - 1) / c.group;
  Layer l;
  l.codes.resize(static_cast<size_t>(c.K * c.N));
  l.zeros.resize(static_cast<size_t>(G * c.N));
  l.scales.resize(static_cast<size_t>(G * c.N));
  // Extremes first (gemmlowp MakeTestVals), then random codes.
  for (size_t i = 0; i < l.codes.size(); ++i) l.codes[i] = i < 4 ? (i % 2 ? maxq : 0u) : (static_cast<uint32_t>(rng()) & maxq);
  for (auto& z : l.zeros) {
    // symmetric: GPTQ stores 2^(bits-1) (v2) or 2^(bits-1) - 1 (v1, read back + 1): the true zero is 2^(bits-1)
    z = c.symmetric ? (1u << (c.bits - 1)) : static_cast<uint32_t>(rng()) % (maxq + 1) + static_cast<uint32_t>(c.zero_adjust);
  }
  for (auto& s : l.scales) {
    s = c.exact_data ? qgru::float_to_half_bits(std::ldexp(1.0f, -static_cast<int>(rng() % 4)))
                     : qgru::float_to_half_bits(0.001f + static_cast<float>(static_cast<uint32_t>(rng()) % 1000) * 1e-5f);
  }
  qgru::test::pack_layer(l, c.K, c.N, G, c.group, c.bits, c.zero_adjust, c.act_order, rng);
  return l;
}

// The two halves of a packed pair.
inline float lo(uint32_t pair) { return qgru::half_bits_to_float(static_cast<uint16_t>(pair & 0xFFFFu)); }
inline float hi(uint32_t pair) { return qgru::half_bits_to_float(static_cast<uint16_t>(pair >> 16)); }

struct Emulated {
  std::vector<uint16_t> c;     // fp16 [M, N]
  std::vector<float> c_fp32;   // the fp32 value each output was rounded from
};

// Act-order: the per-call gather of the activations, A'[m, k'] = A[m, perm[k']] (a copy of A without a permutation).
inline std::vector<uint16_t> gather_act_order(const dq::StripeWeights& s, const std::vector<uint16_t>& a, int64_t M) {
  std::vector<uint16_t> a_in = a;
  if (!s.perm.empty()) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t kp = 0; kp < s.K; ++kp) a_in[static_cast<size_t>(m * s.K + kp)] = a[static_cast<size_t>(m * s.K + s.perm[static_cast<size_t>(kp)])];
  }
  return a_in;
}

// The grid's blocks 0 .. count - 1 in launch order, or reversed (any order the GPU may run them in).
inline std::vector<int64_t> block_order(int64_t count, bool reverse) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  if (reverse) std::reverse(order.begin(), order.end());
  return order;
}

// The end of a block's part of column nt (segment col.segment of col.segments) for row block mb of rows_per_block
// rows: each(fn) calls fn(m, n, value) for every accumulator of the block (row m of the launch, output n of the
// padded layer). One segment: fp16 C straight away. Otherwise the partial slots, the counter of (row block,
// column), and in the block that completes it the fixed-order sum, thread by thread as the kernel's first 128
// threads take it (stripe_sum_pass); every output is written exactly once.
template <class Each>
void column_end(Emulated& out, std::vector<float>& workspace, std::vector<uint32_t>& counters, const dq::StripeWeights& s,
                int64_t M, int64_t n_tiles, int64_t mb, int64_t rows_per_block, int64_t nt, const dq::StripeSegment& col,
                Each each) {
  const int64_t segment = col.segment;
  REQUIRE(segment >= 0);
  REQUIRE(segment < col.segments);
  if (col.segments == 1) {
    each([&](int64_t m, int64_t n, float v) {
      if (m >= M || n >= s.N) return;
      REQUIRE(out.c[static_cast<size_t>(m * s.N + n)] == 0xFFFFu);
      out.c[static_cast<size_t>(m * s.N + n)] = qgru::float_to_half_bits(v);
      out.c_fp32[static_cast<size_t>(m * s.N + n)] = v;
    });
    return;
  }
  each([&](int64_t m, int64_t n, float v) {
    if (m < M) workspace[static_cast<size_t>(dq::stripe_partial_index(segment, m, n, M, s.n_padded))] = v;
  });
  uint32_t& counter = counters[static_cast<size_t>(mb * n_tiles + nt)];
  const uint32_t arrived = counter++;
  if (arrived + 1 != static_cast<uint32_t>(col.segments)) return;
  // the last block sums in slot order, thread by thread, each taking its groups of 4 outputs kStripeSumGroups at a
  // time, as the kernel's
  const int64_t first_row = mb * rows_per_block;
  const int64_t rows = std::min<int64_t>(M - first_row, rows_per_block);
  const int64_t sum_groups = rows * (dq::kStripeTileN / 4);
  for (int tid = 0; tid < dq::kStripeThreads; ++tid)
    for (int64_t e0 = tid; e0 < sum_groups; e0 += int64_t{dq::kStripeThreads} * dq::kStripeSumGroups) {
      dq::StripeSumGroup group_at[dq::kStripeSumGroups];
      dq::StripeFloat4 sums[dq::kStripeSumGroups];
      const int count = dq::stripe_sum_pass(workspace.data(), first_row, nt, e0, sum_groups, M, s.n_padded, col.segments,
                                            group_at, sums);
      for (int g = 0; g < count; ++g) {
        REQUIRE(group_at[g].row < M);
        if (group_at[g].n >= s.N) continue;
        for (int v = 0; v < 4; ++v) {
          const size_t o = static_cast<size_t>(group_at[g].row * s.N + group_at[g].n + v);
          REQUIRE(out.c[o] == 0xFFFFu);
          out.c[o] = qgru::float_to_half_bits(sums[g].v[v]);
          out.c_fp32[o] = sums[g].v[v];
        }
      }
    }
  counter = 0;
}

// Every option combination on a 192-input, 136-output layer of exact data (integral activations, power-of-two
// scales): 4 and 8 bits, both zero-point formats (zero_adjust 0, 1), symmetric or not, act-order or not, each group
// size of `groups` (0: one group over K); rows(group) gives the M of a group size, so that the combinations reach
// every kernel instance. Act-order with one group is the identity and is left out. check(c) runs each case.
template <class Rows, class Check>
void each_option_combination(std::initializer_list<int64_t> groups, Rows rows, Check check) {
  constexpr int64_t K = 192;
  for (const int bits : {4, 8})
    for (const int zero_adjust : {0, 1})
      for (const bool symmetric : {false, true})
        for (const bool act_order : {false, true})
          for (const int64_t group : groups) {
            if (act_order && group == 0) continue;
            check(Case{rows(group), 136, K, group == 0 ? K : group, bits, zero_adjust, act_order, symmetric, true, 7});
          }
}

// Builds the case's layer and activations, repacks them, runs emulate(s, a, reverse) in both block orders (the
// same bits: deterministic) and compares with the float64 reference.
template <class Emulate>
void check_case_with(const Case& c, uint32_t seed, Emulate emulate) {
  CAPTURE(c.M);
  CAPTURE(c.N);
  CAPTURE(c.K);
  CAPTURE(c.group);
  CAPTURE(c.bits);
  CAPTURE(c.zero_adjust);
  CAPTURE(c.act_order);
  CAPTURE(c.symmetric);
  CAPTURE(c.exact_data);
  CAPTURE(c.target_blocks);
  REQUIRE(dq::stripe_unsupported_reason(c.bits, c.K, c.N, c.group).empty());
  std::mt19937 rng(seed);
  const Layer l = make_layer(c, rng);
  std::vector<uint16_t> a(static_cast<size_t>(c.M * c.K));
  for (auto& v : a) {
    v = c.exact_data ? qgru::float_to_half_bits(static_cast<float>(static_cast<int>(rng() % 5) - 2))
                     : qgru::float_to_half_bits(static_cast<float>(static_cast<uint32_t>(rng()) % 2001) / 1000.0f - 1.0f);
  }
  dq::ActOrderPlan order;
  REQUIRE(dq::plan_act_order(l.g_idx, c.K, c.group, order).empty());
  REQUIRE(order.identity == !c.act_order);
  const dq::StripeWeights s = dq::repack_stripes(c.bits, c.K, c.N, c.group, c.zero_adjust, l.qweight, l.qzeros, l.scales, order);
  const Emulated got = emulate(s, a, false);
  const Emulated again = emulate(s, a, true);
  // Deterministic: the opposite block order gives the same bits.
  REQUIRE(got.c == again.c);

  double norm = 0;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      const ReferenceSum r = reference_output(l.codes, l.zeros, l.scales, l.g_idx, a, c.K, c.N, m, n);
      const double ref = r.value, mag = r.magnitude;
      norm += ref * ref;
      const size_t at = static_cast<size_t>(m * c.N + n);
      if (c.exact_data) {
        // Integral activations, power-of-two scales: every product and partial sum is exact in fp32.
        REQUIRE_MESSAGE(got.c[at] == qgru::float_to_half_bits(static_cast<float>(ref)),
                        "m=" << m << " n=" << n << " got " << qgru::half_bits_to_float(got.c[at]) << " reference " << ref);
      } else {
        // fp32 accumulation: at most K/16 + segments roundings of a partial of magnitude <= mag, each <= 2^-24.
        const double bound = static_cast<double>(c.K + 64) * std::ldexp(mag, -24) + 1e-30;
        REQUIRE_MESSAGE(std::fabs(static_cast<double>(got.c_fp32[at]) - ref) <= bound,
                        "m=" << m << " n=" << n << " got " << got.c_fp32[at] << " reference " << ref << " bound " << bound);
        REQUIRE(got.c[at] == qgru::float_to_half_bits(got.c_fp32[at]));
      }
    }
  CHECK(norm > 0);
}

}  // namespace qgru::test::stripes
