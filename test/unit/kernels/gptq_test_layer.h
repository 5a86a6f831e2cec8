#pragma once
// Test helper: a GPTQ checkpoint layer packed from plain codes and true zero points, written independently of
// the kernels' accessors (qgru/kernels/gptq_layout.h), so emulation tests can compare against the plain values.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "qgru/half.h"
#include "qgru/kernels/gptq_layout.h"

namespace qgru::test {

struct PackedGptq {
  std::vector<int32_t> qweight, qzeros;  // [K·bits/32, N], [G, N·bits/32]
};

// codes [K, N] in [0, 2^bits); zeros [G, N] true zero points (the stored field is zero - zero_adjust).
inline PackedGptq pack_gptq(const std::vector<uint32_t>& codes, const std::vector<uint32_t>& zeros, int64_t K,
                            int64_t N, int64_t G, int bits, int zero_adjust) {
  const int per = 32 / bits;
  PackedGptq p;
  p.qweight.assign(static_cast<size_t>(K / per * N), 0);
  p.qzeros.assign(static_cast<size_t>(G * (N / per)), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      auto& w = p.qweight[static_cast<size_t>((k / per) * N + n)];
      w = static_cast<int32_t>(static_cast<uint32_t>(w) | (codes[static_cast<size_t>(k * N + n)] << (bits * (k % per))));
    }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < N; ++n) {
      auto& w = p.qzeros[static_cast<size_t>(g * (N / per) + n / per)];
      const uint32_t stored = zeros[static_cast<size_t>(g * N + n)] - static_cast<uint32_t>(zero_adjust);
      w = static_cast<int32_t>(static_cast<uint32_t>(w) | (stored << (bits * (n % per))));
    }
  return p;
}

// A layer as the emulation tests make it: plain values (filled by each test, to its own distribution) and the
// checkpoint tensors packed from them by pack_layer.
struct GptqLayer {
  std::vector<uint32_t> codes, zeros;  // [K, N]; [G, N] true zero points (zero_adjust included)
  std::vector<int32_t> qweight, qzeros, g_idx;
  std::vector<uint16_t> scales;  // [G, N] fp16 bits
};

// Packs l.codes / l.zeros into qweight / qzeros and sets g_idx to k / group, shuffled by `rng` for act-order.
inline void pack_layer(GptqLayer& l, int64_t K, int64_t N, int64_t G, int64_t group, int bits, int zero_adjust,
                       bool act_order, std::mt19937& rng) {
  PackedGptq packed = pack_gptq(l.codes, l.zeros, K, N, G, bits, zero_adjust);
  l.qweight = std::move(packed.qweight);
  l.qzeros = std::move(packed.qzeros);
  l.g_idx.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) l.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / group);
  if (act_order) std::shuffle(l.g_idx.begin(), l.g_idx.end(), rng);
}

// Output (m, n) of A [M, K] fp16 times the dequantized layer, in float64, from the plain values: each weight is
// gptq_dequant_reference(code, zero, scale) of its checkpoint group g_idx[k] (any order). Also Σ|products|,
// the magnitude an accumulation bound scales with.
struct ReferenceSum {
  double value = 0, magnitude = 0;
};
inline ReferenceSum reference_output(const std::vector<uint32_t>& codes, const std::vector<uint32_t>& zeros,
                                     const std::vector<uint16_t>& scales, const std::vector<int32_t>& g_idx,
                                     const std::vector<uint16_t>& a, int64_t K, int64_t N, int64_t m, int64_t n) {
  ReferenceSum r;
  for (int64_t k = 0; k < K; ++k) {
    const int32_t g = g_idx[static_cast<size_t>(k)];
    const uint16_t w = kernels::gptq_dequant_reference(codes[static_cast<size_t>(k * N + n)], zeros[static_cast<size_t>(g * N + n)],
                                                       scales[static_cast<size_t>(g * N + n)]);
    const double prod = static_cast<double>(half_bits_to_float(a[static_cast<size_t>(m * K + k)])) * half_bits_to_float(w);
    r.value += prod;
    r.magnitude += std::fabs(prod);
  }
  return r;
}

}  // namespace qgru::test
