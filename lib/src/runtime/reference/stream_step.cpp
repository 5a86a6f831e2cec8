// The streaming layer loop (contract in qgru/runtime/stream_step.h).
#include "qgru/runtime/stream_step.h"

#include <algorithm>
#include <string>

#include "qgru/base/error.h"
#include "qgru/runtime/code_maps.h"
#include "qgru/runtime/quant_executor.h"

namespace qgru {

std::string streaming_refusal(const QuantizedGru& model) {
  if (model.num_directions == 1) return "";
  return "the model has " + std::to_string(model.num_directions) +
         " directions; streaming needs a unidirectional model (a reverse direction reads the sequence from its end)";
}

void step_layer_loop(const QuantizedGru& model, const int32_t* q_x, int frames, int32_t* q_h, int32_t* out,
                     int32_t* next_x, GruCellStepper& stepper) {
  const std::string refusal = streaming_refusal(model);
  if (!refusal.empty()) throw Error("step: " + refusal);
  const int N = stepper.batch();
  if (frames < 0) throw Error("step: negative frame count " + std::to_string(frames));
  check_input_codes(model, q_x, frames, N);  // every frame before the state changes
  const int H = model.hidden_size;
  const size_t NH = static_cast<size_t>(N) * H;
  const size_t frame_x = static_cast<size_t>(N) * model.input_size;
  for (int f = 0; f < frames; ++f) {
    const int32_t* layer_x = q_x + static_cast<size_t>(f) * frame_x;
    for (int l = 0; l < model.num_layers; ++l) {
      int32_t* layer_h = q_h + static_cast<size_t>(l) * NH;
      stepper.step_cell(l, layer_x, layer_h);
      if (l + 1 < model.num_layers) {
        // Layer l's new codes into layer l+1's x space: the whole-sequence loop's requantization.
        const HToNextXMap map = h_to_next_x_map(model, l, 0);  // the QGRU_HD map of the device flow too
        for (size_t i = 0; i < NH; ++i) next_x[i] = requantize_h_code(map, layer_h[i]);
        layer_x = next_x;
      }
    }
    if (out) {
      const int32_t* last = q_h + static_cast<size_t>(model.num_layers - 1) * NH;
      std::copy(last, last + NH, out + static_cast<size_t>(f) * NH);
    }
  }
}

}  // namespace qgru
