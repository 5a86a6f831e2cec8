#pragma once
// Names shared by the artifact writer and reader: the cell prefix, and the derived shifts with the member
// each one is stored in, so that the two sides cannot disagree about a key.
#include <string>
#include <vector>

#include "qgru/runtime/cell_quant_params.h"
#include "qgru/version.h"

#define QGRU_ARTIFACT_TOOL_VERSION QGRU_VERSION_STRING

namespace qgru {

inline std::string artifact_cell_prefix(int layer, int direction) {
  return "layer" + std::to_string(layer) + ".dir" + std::to_string(direction) + ".";
}

struct ScalarShiftKey {
  const char* name;
  int32_t GruCellQuantParams::*member;
  int32_t GruCellQuantParams::*multiplier;  // the rescale's multiplier (stored as "multiplier_" + name without "shift_")
};

// "shift_a_to_b" -> "multiplier_a_to_b": the key of a rescale's multiplier beside its shift.
inline std::string multiplier_key(const std::string& shift_key) { return "multiplier_" + shift_key.substr(6); }

// The scalar derived shifts a cell of the given variant stores (docs/FIXED_POINT.md §3, §3a): C-1, C-2 and C-4's
// are shared, C-3's (and C-2a's) belong to the variant.
inline const std::vector<ScalarShiftKey>& scalar_shift_keys(bool linear_before_reset) {
  using P = GruCellQuantParams;
  auto keys_with = [](std::initializer_list<ScalarShiftKey> new_gate) {
    std::vector<ScalarShiftKey> keys = {
        {"shift_weight_ih_linear_to_update_gate_input", &P::shift_weight_ih_linear_to_update_gate_input, &P::multiplier_weight_ih_linear_to_update_gate_input},
        {"shift_weight_hh_linear_to_update_gate_input", &P::shift_weight_hh_linear_to_update_gate_input, &P::multiplier_weight_hh_linear_to_update_gate_input},
        {"shift_weight_ih_linear_to_reset_gate_input", &P::shift_weight_ih_linear_to_reset_gate_input, &P::multiplier_weight_ih_linear_to_reset_gate_input},
        {"shift_weight_hh_linear_to_reset_gate_input", &P::shift_weight_hh_linear_to_reset_gate_input, &P::multiplier_weight_hh_linear_to_reset_gate_input}};
    keys.insert(keys.end(), new_gate);
    keys.push_back({"shift_new_gate_output_to_h", &P::shift_new_gate_output_to_h, &P::multiplier_new_gate_output_to_h});
    keys.push_back({"shift_update_gate_output", &P::shift_update_gate_output, &P::multiplier_update_gate_output});
    return keys;
  };
  static const std::vector<ScalarShiftKey> linear_first = keys_with(
      {{"shift_weight_ih_linear_to_new_gate_input", &P::shift_weight_ih_linear_to_new_gate_input, &P::multiplier_weight_ih_linear_to_new_gate_input},
       {"shift_reset_mul_hh_to_new_gate_input", &P::shift_reset_mul_hh_to_new_gate_input, &P::multiplier_reset_mul_hh_to_new_gate_input}});
  static const std::vector<ScalarShiftKey> reset_first = keys_with(
      {{"shift_reset_mul_h_to_h", &P::shift_reset_mul_h_to_h, &P::multiplier_reset_mul_h_to_h},
       {"shift_weight_ih_linear_to_new_gate_input", &P::shift_weight_ih_linear_to_new_gate_input, &P::multiplier_weight_ih_linear_to_new_gate_input},
       {"shift_weight_hh_linear_to_new_gate_input", &P::shift_weight_hh_linear_to_new_gate_input, &P::multiplier_weight_hh_linear_to_new_gate_input}});
  return linear_before_reset ? linear_first : reset_first;
}

struct ChannelShiftKey {
  const char* name;
  std::vector<int32_t> GruCellQuantParams::*member;
  bool derived;  // recomputed by compute_derived_shifts (else a base shift)
};

inline const std::vector<ChannelShiftKey>& channel_shift_keys() {
  static const std::vector<ChannelShiftKey> keys = {
      {"shift_W", &GruCellQuantParams::shift_W, false},
      {"shift_R", &GruCellQuantParams::shift_R, false},
      {"shift_bw", &GruCellQuantParams::shift_bw, false},
      {"shift_br", &GruCellQuantParams::shift_br, false},
      {"shift_gemm_x_to_weight_ih_linear", &GruCellQuantParams::shift_gemm_x_to_weight_ih_linear, true},
      {"shift_bw_to_gemm_x", &GruCellQuantParams::shift_bw_to_gemm_x, true},
      {"shift_gemm_h_to_weight_hh_linear", &GruCellQuantParams::shift_gemm_h_to_weight_hh_linear, true},
      {"shift_br_to_gemm_h", &GruCellQuantParams::shift_br_to_gemm_h, true}};
  return keys;
}

// The per-channel multipliers of a multiplier-scale cell, beside the derived shifts of the same rescale.
struct ChannelMultiplierKey {
  const char* name;
  std::vector<int32_t> GruCellQuantParams::*member;
};

inline const std::vector<ChannelMultiplierKey>& channel_multiplier_keys() {
  static const std::vector<ChannelMultiplierKey> keys = {
      {"multiplier_gemm_x_to_weight_ih_linear", &GruCellQuantParams::multiplier_gemm_x_to_weight_ih_linear},
      {"multiplier_bw_to_gemm_x", &GruCellQuantParams::multiplier_bw_to_gemm_x},
      {"multiplier_gemm_h_to_weight_hh_linear", &GruCellQuantParams::multiplier_gemm_h_to_weight_hh_linear},
      {"multiplier_br_to_gemm_h", &GruCellQuantParams::multiplier_br_to_gemm_h}};
  return keys;
}

// The per-channel scale mantissas of a multiplier-scale cell's parameter tensors (tensor "mantissa_<X>").
struct ChannelMantissaKey {
  GruTensor tensor;
  std::vector<double> GruCellQuantParams::*member;
};

inline const std::vector<ChannelMantissaKey>& channel_mantissa_keys() {
  static const std::vector<ChannelMantissaKey> keys = {{GruTensor::W, &GruCellQuantParams::mantissa_W},
                                                       {GruTensor::R, &GruCellQuantParams::mantissa_R},
                                                       {GruTensor::bw, &GruCellQuantParams::mantissa_bw},
                                                       {GruTensor::br, &GruCellQuantParams::mantissa_br}};
  return keys;
}

inline const std::vector<int32_t>* parameter_shifts(const GruCellQuantParams& p, GruTensor tensor) {
  switch (tensor) {
    case GruTensor::W: return &p.shift_W;
    case GruTensor::R: return &p.shift_R;
    case GruTensor::bw: return &p.shift_bw;
    case GruTensor::br: return &p.shift_br;
    default: return nullptr;
  }
}

}  // namespace qgru
