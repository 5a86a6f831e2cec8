#pragma once
// The tensors of the GRU fixed-point data flow (docs/FIXED_POINT.md §2), by name. One list shared by the
// bit-width config, the calibration statistics, the quantization parameters and the reports.
//
// The GRU variant is haste's, fixed here once and referred to everywhere else:
//   weight_ih_linear = W x + bw                        [3H]   W: [3H, C], gates in order z (update), r (reset), n (new)
//   weight_hh_linear = R h + br                        [3H]   R: [3H, H]
//   update_gate_output = sigmoid(weight_ih_linear_z + weight_hh_linear_z)      (z, also called u)
//   reset_gate_output  = sigmoid(weight_ih_linear_r + weight_hh_linear_r)
//   new_gate_output    = tanh(weight_ih_linear_n + reset_gate_output * weight_hh_linear_n)
//   h_new = update_gate_output * h + (1 - update_gate_output) * new_gate_output
// ONNX's default cell (linear_before_reset = 0, Keras reset_after=False) has the same tensors; its
// weight_hh_linear's n channels are R_n (reset_gate_output * h) + br_n and new_gate_output is
// tanh(weight_ih_linear_n + weight_hh_linear_n) (FloatGruModel::linear_before_reset; docs/FIXED_POINT.md §3a).
#include <array>
#include <optional>
#include <string>

namespace qgru {

enum class GruTensor : int {
  x = 0,
  h,
  W,
  R,
  bw,
  br,
  weight_ih_linear,
  weight_hh_linear,
  update_gate_input,
  update_gate_output,
  reset_gate_input,
  reset_gate_output,
  new_gate_input,
  new_gate_output,
  kCount
};

constexpr int kGruTensorCount = static_cast<int>(GruTensor::kCount);

inline const char* gru_tensor_name(GruTensor tensor) {
  static constexpr std::array<const char*, kGruTensorCount> names = {
      "x", "h", "W", "R", "bw", "br", "weight_ih_linear", "weight_hh_linear", "update_gate_input",
      "update_gate_output", "reset_gate_input", "reset_gate_output", "new_gate_input", "new_gate_output"};
  return names[static_cast<int>(tensor)];
}

inline std::optional<GruTensor> gru_tensor_from_name(const std::string& name) {
  for (int i = 0; i < kGruTensorCount; ++i) {
    if (name == gru_tensor_name(static_cast<GruTensor>(i))) return static_cast<GruTensor>(i);
  }
  return std::nullopt;
}

// Weights and biases are known without data; every other tensor is observed during calibration.
inline bool gru_tensor_is_parameter(GruTensor tensor) {
  return tensor == GruTensor::W || tensor == GruTensor::R || tensor == GruTensor::bw || tensor == GruTensor::br;
}

// The activation tensors observed by calibration, in data-flow order.
constexpr std::array<GruTensor, 10> kObservedGruTensors = {
    GruTensor::x, GruTensor::h, GruTensor::weight_ih_linear, GruTensor::weight_hh_linear,
    GruTensor::update_gate_input, GruTensor::update_gate_output, GruTensor::reset_gate_input,
    GruTensor::reset_gate_output, GruTensor::new_gate_input, GruTensor::new_gate_output};

}  // namespace qgru
