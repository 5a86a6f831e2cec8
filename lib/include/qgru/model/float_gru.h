#pragma once
// The float GRU: weights in qgru's internal layout and the reference executor (haste's formulation, see
// qgru/gru_tensors.h). Importers convert PyTorch (r, z, n) and haste ([C, 3H]) layouts once, at load.
#include <map>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru {

// One cell (one layer, one direction). Row-major, gate order z, r, n along the 3H axis.
struct GruCellWeights {
  int input_size = 0;       // C of this layer (layer 0: the model's input size; later layers: D * H)
  int hidden_size = 0;      // H
  std::vector<float> W;     // [3H, C]
  std::vector<float> R;     // [3H, H]
  std::vector<float> bw;    // [3H] (zeros when the source has no bias)
  std::vector<float> br;    // [3H]
};

struct FloatGruModel {
  int input_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_directions = 1;               // 1 or 2
  std::vector<GruCellWeights> cells;    // index layer * num_directions + direction
  std::string source_layout;            // "pytorch" or "haste", as detected or chosen

  const GruCellWeights& cell(int layer, int direction) const {
    return cells.at(static_cast<size_t>(layer * num_directions + direction));
  }
};

enum class WeightLayout { Auto, PyTorch, Haste };

// Parse "auto" | "pytorch" | "haste"; throws qgru::Error otherwise.
WeightLayout parse_weight_layout(const std::string& text);

// Accepted names, under one optional common prefix (e.g. "encoder.rnn."; other tensors are ignored):
//   pytorch: nn.GRU weight_ih_l{k}[_reverse] [3H, C], weight_hh_l{k} [3H, H], bias_ih_l{k}, bias_hh_l{k} [3H]
//            (gates r, z, n), or nn.GRUCell weight_ih, weight_hh, bias_ih, bias_hh;
//   haste:   W [C, 3H], R [H, 3H], bx, br [3H] (gates z, r, n), W_l{k}[_reverse] ... for several layers, or
//            haste_pytorch.GRU's kernel, recurrent_kernel, bias, recurrent_bias (the prefix ends with '.').
// Biases are optional (zeros). Auto detection refuses a file holding names of both layouts.
// Build a model from named tensors (as read from a safetensors file). `source` names the file in errors.
// Inconsistent shapes are refused with a message naming the tensor, its shape and the expected shape.
FloatGruModel float_gru_from_tensors(const std::map<std::string, Tensor>& tensors, WeightLayout layout,
                                     const std::string& source);
// Read a safetensors file and build the model.
FloatGruModel load_float_gru(const std::string& path, WeightLayout layout = WeightLayout::Auto);

// Every tensor of one cell's time step, for observers (calibration, verify). Pointers are valid only
// during the callback. Shapes: x [N, C_layer], h_prev/h_new [N, H], the two linears [N, 3H] (gates z, r, n),
// gate inputs/outputs [N, H].
struct FloatStepView {
  int layer = 0;
  int direction = 0;
  int t = 0;          // time index in the input sequence (the reverse direction visits T-1 .. 0)
  int batch = 0;      // N
  int input_size = 0;
  int hidden_size = 0;
  const float* x = nullptr;
  const float* h_prev = nullptr;
  const float* weight_ih_linear = nullptr;
  const float* weight_hh_linear = nullptr;
  const float* update_gate_input = nullptr;
  const float* update_gate_output = nullptr;
  const float* reset_gate_input = nullptr;
  const float* reset_gate_output = nullptr;
  const float* new_gate_input = nullptr;
  const float* new_gate_output = nullptr;
  const float* h_new = nullptr;
};

class FloatGruObserver {
 public:
  virtual ~FloatGruObserver() = default;
  virtual void on_step(const FloatStepView& step) = 0;
};

struct FloatGruResult {
  int T = 0, N = 0;
  std::vector<float> output;  // [T, N, D*H] (directions concatenated, as PyTorch returns)
  std::vector<float> h_n;     // [L*D, N, H]
};

// Run the float GRU. x: [T, N, C] time-major; h0: [L*D, N, H] or nullptr for zeros.
FloatGruResult run_float_gru(const FloatGruModel& model, const float* x, int T, int N, const float* h0,
                             FloatGruObserver* observer = nullptr);

// [N, T, C] <-> [T, N, C] (the same function both ways with the first two extents swapped).
std::vector<float> swap_first_two_axes(const std::vector<float>& values, int64_t d0, int64_t d1, int64_t rest);

}  // namespace qgru
