#pragma once
// The float GRU: weights in qgru's internal layout and the reference executor (haste's formulation, see
// qgru/gru_tensors.h). Importers (qgru/import/) convert PyTorch (r, z, n) and haste ([C, 3H]) layouts once,
// at load.
#include <map>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"
#include "qgru/io/sequence_io.h"  // row_is_valid

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
  std::string source_layout;            // "pytorch", "haste" or "onnx", as detected or chosen
  // The cell variant (qgru/gru_tensors.h). true: r multiplies R_n h + br_n (PyTorch, cuDNN, haste; ONNX
  // linear_before_reset = 1). false: r multiplies h before the recurrent product,
  // n = tanh(W_n x + bw_n + R_n (r ⊙ h) + br_n) (ONNX's default linear_before_reset = 0, Keras reset_after=False).
  bool linear_before_reset = true;

  const GruCellWeights& cell(int layer, int direction) const {
    return cells.at(static_cast<size_t>(layer * num_directions + direction));
  }
};

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
  // [N] sequence lengths or null (all T): rows with t >= lengths[n] are padding at this step (their state
  // does not change); observers skip them (qgru::row_is_valid).
  const int32_t* lengths = nullptr;
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

// sha256 of the weights themselves, whatever form they came in: the shapes, the cell variant and every cell's
// W, R, bw, br as float32, in qgru's layout (gate order z, r, n), as bytes in a fixed order. The same
// weights give the same hash from a state dict with or without a prefix, float32 or float64 (values that
// float32 holds), PyTorch's or haste's layout. The identity of a model held in memory (the Python package's
// provenance); a model read from a file is known by the file's own sha256 instead.
std::string float_gru_weights_sha256(const FloatGruModel& model);

// Run the float GRU. x: [T, N, C] time-major; h0: [L*D, N, H] or nullptr for zeros. lengths: [N] sequence
// lengths in [0, T] or nullptr (every row has T steps): as PyTorch's packed sequences and ONNX's sequence_lens,
// steps t >= lengths[n] leave row n's state unchanged and output 0 there, h_n is the state after its last
// valid step, and the reverse direction starts at the row's own last step t = lengths[n] - 1.
FloatGruResult run_float_gru(const FloatGruModel& model, const float* x, int T, int N, const float* h0,
                             FloatGruObserver* observer = nullptr, const int32_t* lengths = nullptr);

}  // namespace qgru
