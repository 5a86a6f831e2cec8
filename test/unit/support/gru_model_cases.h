#pragma once
// Whole-model cases for the executors' code-for-code checks (the persistent GRU kernel's emulation in test_kernels,
// its GPU run in test_cuda_gpu): a calibrated random model of a preset (optionally its multiplier-scale form), input
// codes wider than the calibration data (x saturates at both ends), h0 codes and sequence lengths T, 0, 1, ..., T.
#include <cstdint>
#include <vector>

#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/quant_executor.h"
#include "quant_test_support.h"

namespace qgru::test {

struct GruModelCase {
  const char* preset;
  bool multiplier;  // every tensor's multiplier-scale form (docs/FIXED_POINT.md §1a)
  int H, L, D, N, T;
  bool with_h0, with_lengths, linear_before_reset;
};

struct PreparedGruModel {
  CalibratedCase c;
  std::vector<int32_t> q_x, q_h0, lengths;
  const int32_t* h0() const { return q_h0.empty() ? nullptr : q_h0.data(); }
  const int32_t* lengths_data() const { return lengths.empty() ? nullptr : lengths.data(); }
};

inline PreparedGruModel prepare_gru_model(const GruModelCase& k, int C) {
  BitwidthConfig config = load_bitwidth_config(k.preset);
  for (TensorBitwidth& t : config.tensors) t.multiplier_scale = k.multiplier;
  std::vector<float> h0;
  if (k.with_h0) h0 = random_input(static_cast<size_t>(k.L * k.D * k.N * k.H), 77u + static_cast<uint32_t>(k.H), 0.5f);
  PreparedGruModel m;
  m.c = calibrated_case(C, k.H, k.L, k.D, k.T, k.N, config, 31u + static_cast<uint32_t>(k.H), h0, k.linear_before_reset);
  std::vector<float> x = m.c.x;
  for (float& v : x) v *= 3.0f;
  m.q_x = quantize_values(m.c.quantized.input_quant(), x.data(), x.size());
  m.q_h0 = quantize_initial_state(m.c.quantized, h0.empty() ? nullptr : h0.data(), k.N);
  if (k.with_lengths) {
    for (int n = 0; n < k.N; ++n) m.lengths.push_back(n == 0 ? k.T : (n - 1) % (k.T + 1));
  }
  return m;
}

// Both cells, every preset, multiplier scales, H on edges (1, 31, 32, 33, 257), N 1 / 3 / 33, T 1 to 6, 1 to 3
// layers, one and two directions, h0, lengths.
inline constexpr GruModelCase kPersistentModelCases[] = {
    {"int8", false, 33, 2, 2, 3, 6, true, false, true},    {"int8", false, 33, 2, 2, 3, 6, false, true, false},
    {"int8", true, 31, 1, 1, 33, 4, true, true, true},     {"int8", true, 32, 3, 1, 1, 5, true, false, false},
    {"int8", false, 257, 1, 2, 3, 3, false, true, true},   {"int8", false, 1, 3, 2, 3, 5, true, true, false},
    {"int8", false, 33, 2, 2, 3, 1, true, false, true},    {"int16-activations", false, 33, 2, 2, 3, 4, true, true, true},
    {"int16", true, 31, 1, 2, 3, 4, true, false, false},
};

}  // namespace qgru::test
