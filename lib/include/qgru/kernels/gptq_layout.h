#pragma once
// The GPTQ checkpoint layout as the quantized-linear kernels read it, the exact dequantization reference,
// and the load-time act-order preparation. Element accessors are QGRU_HD (the kernels use them); the
// preparation functions are plain host code.
//
// Tensors (AutoGPTQ / GPTQModel, see qgru/gptq/pack.h for the writer):
//   qweight int32 [K·bits/32, N]  word (kw, n) holds codes k = kw·(32/bits) + i, i = 0.., low bits first
//   qzeros  int32 [G, N·bits/32]  word (g, nw) holds zeros n = nw·(32/bits) + i, low bits first;
//                                 zero = stored field + zero_adjust (1 for the "gptq" v1 format, 0 for v2)
//   scales  fp16  [G, N]
//   g_idx   int32 [K]             group of input k (trivial: k / group_size; act-order: any permutation of it)
// Weight w[k, n] = scales[g, n] · (code(k, n) - zero(g, n)), g = g_idx[k]; in fp16 exactly
// RN_fp16(s · (u - z)) (the fast dequantization contract, qgru/kernels/fast_dequant.h).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "qgru/kernels/pack.h"
#include "qgru/half.h"
#include "qgru/hd.h"

namespace qgru::kernels {

// Code of weight (k, n) in qweight [K·bits/32, N] (bits 4 or 8).
QGRU_HD uint32_t gptq_weight_code(const uint32_t* qweight, int64_t N, int bits, int64_t k, int64_t n) {
  const int per_word = 32 / bits;
  return word_field(qweight[(k / per_word) * N + n], bits, static_cast<int>(k % per_word));
}

// Zero point of (group g, output n) from qzeros [G, N·bits/32], zero_adjust added.
QGRU_HD uint32_t gptq_zero(const uint32_t* qzeros, int64_t N, int bits, int64_t g, int64_t n, int zero_adjust) {
  const int per_word = 32 / bits;
  const int64_t words_per_row = N / per_word;
  return word_field(qzeros[g * words_per_row + n / per_word], bits, static_cast<int>(n % per_word)) +
         static_cast<uint32_t>(zero_adjust);
}

// The exact reference for one weight: s · (u - z) is exact in float (11 x 10 significant bits at most),
// then rounded once to fp16. Independent of the packed-half path.
inline uint16_t gptq_dequant_reference(uint32_t code, uint32_t zero, uint16_t scale_bits) {
  const float exact = half_bits_to_float(scale_bits) * static_cast<float>(static_cast<int32_t>(code) - static_cast<int32_t>(zero));
  return float_to_half_bits(exact);
}

// Load-time act-order preparation. The kernels read groups as k' / group_size over a K order k'. For a
// trivial g_idx that is the checkpoint's order (identity). For an act-order g_idx the rows of qweight are
// reordered by a stable sort on g_idx: perm[k'] = original k; the kernel then gathers activation column
// perm[k'] (sum over k' of a[perm[k']] · w[perm[k'], n] = the same product). Supported only when the sorted
// groups are exactly k' / group_size (every group holds group_size inputs, the last one the rest).
struct ActOrderPlan {
  bool identity = true;
  std::vector<int32_t> perm;  // empty when identity; else [K], perm[k'] = k
};

// Returns "" and fills `plan`, or a reason why this g_idx cannot be served.
inline std::string plan_act_order(const std::vector<int32_t>& g_idx, int64_t K, int64_t group_size, ActOrderPlan& plan) {
  plan = ActOrderPlan{};
  if (static_cast<int64_t>(g_idx.size()) != K) {
    return "g_idx has " + std::to_string(g_idx.size()) + " entries, expected K = " + std::to_string(K);
  }
  if (group_size <= 0) return "group_size must be positive (use K for a single group), got " + std::to_string(group_size);
  const int64_t groups = (K + group_size - 1) / group_size;
  bool trivial = true;
  for (int64_t k = 0; k < K; ++k) {
    if (g_idx[k] < 0 || g_idx[k] >= groups) {
      return "g_idx[" + std::to_string(k) + "] = " + std::to_string(g_idx[k]) + " is outside [0, " + std::to_string(groups) + ")";
    }
    trivial = trivial && g_idx[k] == k / group_size;
  }
  if (trivial) return "";
  std::vector<int32_t> perm(static_cast<size_t>(K));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return g_idx[a] < g_idx[b]; });
  for (int64_t kp = 0; kp < K; ++kp) {
    if (g_idx[perm[kp]] != kp / group_size) {
      return "act-order g_idx does not hold group_size = " + std::to_string(group_size) + " inputs per group (group " +
             std::to_string(kp / group_size) + " at sorted position " + std::to_string(kp) + ")";
    }
  }
  plan.identity = false;
  plan.perm = std::move(perm);
  return "";
}

// qweight rows in the order perm: new code (k', n) = old code (perm[k'], n). Exact (a permutation of codes).
inline std::vector<int32_t> permute_qweight_rows(const std::vector<int32_t>& qweight, int64_t K, int64_t N, int bits,
                                                 const std::vector<int32_t>& perm) {
  const int per_word = 32 / bits;
  std::vector<int32_t> out(qweight.size(), 0);
  const auto* in = reinterpret_cast<const uint32_t*>(qweight.data());
  auto* dst = reinterpret_cast<uint32_t*>(out.data());
  for (int64_t kp = 0; kp < K; ++kp) {
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t code = gptq_weight_code(in, N, bits, perm[kp], n);
      dst[(kp / per_word) * N + n] |= code << (bits * (kp % per_word));
    }
  }
  return out;
}

}  // namespace qgru::kernels
