#include "qgru/runtime/layer_loop.h"

#include <algorithm>
#include <string>

#include "qgru/base/error.h"
#include "qgru/io/sequence_io.h"
#include "qgru/runtime/code_maps.h"

namespace qgru {

void store_cell_codes(const int32_t* cell_codes, size_t cell_codes_count, int T, int N, int H, int direction,
                      std::vector<int32_t>& q_h, int32_t* out, int out_stride, int out_offset, const int32_t* lengths) {
  const size_t NH = static_cast<size_t>(N) * H;
  if (cell_codes_count != static_cast<size_t>(T) * NH) {
    throw Error("GRU cell runner: " + std::to_string(cell_codes_count) + " output codes, expected T·N·H = " +
                std::to_string(static_cast<size_t>(T) * NH));
  }
  for (size_t tn = 0; tn < static_cast<size_t>(T) * N; ++tn) {
    std::copy_n(cell_codes + tn * H, H, out + tn * static_cast<size_t>(out_stride) + out_offset);
  }
  if (T == 0) return;
  for (int n = 0; n < N; ++n) {
    const int steps = lengths != nullptr ? lengths[n] : T;
    if (steps == 0) continue;  // never stepped: the starting state
    const size_t last_t = direction == 0 ? static_cast<size_t>(steps) - 1 : 0;
    std::copy_n(cell_codes + last_t * NH + static_cast<size_t>(n) * H, H,
                q_h.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(n) * H));
  }
}

void store_cell_codes(const std::vector<int32_t>& cell_codes, int T, int N, int H, int direction,
                      std::vector<int32_t>& q_h, int32_t* out, int out_stride, int out_offset, const int32_t* lengths) {
  store_cell_codes(cell_codes.data(), cell_codes.size(), T, N, H, direction, q_h, out, out_stride, out_offset, lengths);
}

QuantGruResult run_layer_loop(const QuantizedGru& model, const int32_t* q_x, int T, int N, const int32_t* q_h0,
                              GruCellRunner& runner, const int32_t* lengths) {
  if (T < 0 || N < 0) throw Error("run_quantized_gru: negative shape T=" + std::to_string(T) + " N=" + std::to_string(N));
  if (model.cells.size() != static_cast<size_t>(model.num_layers) * model.num_directions || model.cells.empty()) {
    throw Error("run_quantized_gru: the model has " + std::to_string(model.cells.size()) + " cells, expected " +
                std::to_string(model.num_layers * model.num_directions));
  }
  const int D = model.num_directions;
  const int H = model.hidden_size;
  check_input_codes(model, q_x, T, N);
  check_sequence_lengths(lengths, T, N);
  runner.lengths = lengths;

  QuantGruResult result;
  result.T = T;
  result.N = N;
  result.h_n_codes.resize(static_cast<size_t>(model.num_layers) * D * N * H);
  // Layer 0 reads the caller's codes in place; layer l+1 reads layer l's output requantized into `requantized`.
  const int32_t* layer_input = q_x;
  std::vector<int32_t> requantized;
  std::vector<int32_t> layer_output(static_cast<size_t>(T) * N * D * H);
  for (int l = 0; l < model.num_layers; ++l) {
    for (int d = 0; d < D; ++d) {
      const size_t h_offset = (static_cast<size_t>(l) * D + d) * N * H;
      std::vector<int32_t> q_h = initial_h_codes(model, q_h0, l, d, N);
      runner.run_cell(l, d, layer_input, T, N, q_h, layer_output.data(), D * H, d * H);
      if (q_h.size() != static_cast<size_t>(N) * H) {
        throw Error("run_quantized_gru: the cell runner returned " + std::to_string(q_h.size()) + " state codes for layer " +
                    std::to_string(l) + " direction " + std::to_string(d) + ", expected N·H = " + std::to_string(N * H));
      }
      std::copy(q_h.begin(), q_h.end(), result.h_n_codes.begin() + static_cast<std::ptrdiff_t>(h_offset));
    }
    if (l + 1 < model.num_layers) {
      // Requantize each direction's h codes into layer l+1's x space (shared by its directions): the QGRU_HD map
      // the CUDA executor's device flow runs too (qgru/runtime/code_maps.h; equal to requantize_h_to_next_x).
      const HToNextXMap maps[2] = {h_to_next_x_map(model, l, 0), h_to_next_x_map(model, l, D - 1)};
      requantized.resize(layer_output.size());
      for (size_t i = 0; i < layer_output.size(); ++i) {
        const int d = static_cast<int>((i / static_cast<size_t>(H)) % static_cast<size_t>(D));
        requantized[i] = requantize_h_code(maps[d], layer_output[i]);
      }
      layer_input = requantized.data();
    }
  }

  result.output_codes = std::move(layer_output);
  dequantize_result_fast(model, result);
  return result;
}

}  // namespace qgru
