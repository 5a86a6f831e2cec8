#pragma once
// The CUDA executor's whole call on the device (cuda/src/device_flow.cu, QuantGruCuda): what every element kernel
// between the cells computes, QGRU_HD, and the host plan of the call's copies.
//   layer_input_code      the code of x[t, n, k] a cell of layer l reads: the caller's codes (layer 0, run_codes),
//                         the caller's floats quantized (layer 0, run: quantize_input_code), or layer l-1's output
//                         requantized (requantize_h_code of the direction the column belongs to), read straight from
//                         the previous layer's cell outputs [T, N, H] (no [T, N, D·H] array between layers);
//   packed_input_element  that code as the cell's GEMM operand (x or h0: stored = code - offset in the padded layout
//                         of int8_gemm_layout.h, row (t, n) at t·N_p + n, padding 0): pack_signed_steps's values;
//   output_element        the last layer's output [T, N, D·H]: dequantize_code of each direction's code, and the code
//                         itself where the caller asks for codes.
// test/unit/kernels/device_flow_test.cpp runs the whole chain on the host with these functions and the cells'
// host emulation (emulate_gru_cell) and holds it to the reference executor, code for code and float for float.
#include <cstdint>
#include <string>

#include "qgru/hd.h"
#include "qgru/runtime/code_maps.h"

namespace qgru::kernels {

enum class LayerInputKind : int32_t {
  Codes = 0,          // codes [T·N, cols] int32 in the layer's x space
  Floats = 1,         // floats [T·N, cols] quantized by `quantizer`
  PreviousLayer = 2,  // cols = D·H: column k from previous[k / H] [T·N, H] requantized by rescale[k / H]
};

// Device (or, in the host emulation, host) pointers and the maps; a POD passed by value to a kernel.
struct LayerInputSource {
  LayerInputKind kind = LayerInputKind::Codes;
  int64_t cols = 0;               // the layer's C (layer 0) or D·H
  const int32_t* codes = nullptr;  // Codes
  const float* values = nullptr;   // Floats
  InputQuantizer quantizer{};      // Floats
  const int32_t* previous[2] = {nullptr, nullptr};  // PreviousLayer: each direction's cell output [T·N, H]
  HToNextXMap rescale[2]{};                          // PreviousLayer: each direction's h -> next x map
  int64_t H = 0;                                     // PreviousLayer
};

// x[row, k] of the layer (row = t·N + n, k < cols) as a code in the layer's x space.
QGRU_HD int32_t layer_input_code(const LayerInputSource& s, int64_t row, int64_t k) {
  if (s.kind == LayerInputKind::Codes) return s.codes[row * s.cols + k];
  if (s.kind == LayerInputKind::Floats) return quantize_input_code(s.quantizer, s.values[row * s.cols + k]);
  // Direction 0 or 1 chosen by a select, not an index: a run-time index into a kernel parameter's array would copy
  // the array to local memory (a stack frame, scripts/check_cuda_spills.sh).
  const bool second = k >= s.H;
  const int32_t q_h = (second ? s.previous[1] : s.previous[0])[row * s.H + (second ? k - s.H : k)];
  return requantize_h_code(second ? s.rescale[1] : s.rescale[0], q_h);
}

// Element idx of the packed operand [steps, N_p, cols_p] (steps·N_p·cols_p elements): code - offset, or 0 in the
// padding (rows n >= N, columns k >= cols). The code lies in the operand's space, which the cell's plan
// (plan_gru_operands) proved fits Stored after `offset`: codes from the caller are range-checked on the host before
// the call, quantized and requantized codes are saturated into the space.
template <class Stored>
QGRU_HD Stored packed_input_element(const LayerInputSource& s, int64_t N, int64_t N_p, int64_t cols_p, int32_t offset,
                                    int64_t idx) {
  const int64_t step_size = N_p * cols_p;
  const int64_t t = idx / step_size;
  const int64_t n = (idx % step_size) / cols_p;
  const int64_t k = idx % cols_p;
  if (n >= N || k >= s.cols) return Stored{0};
  return static_cast<Stored>(layer_input_code(s, t * N + n, k) - offset);
}

// The last layer's cell outputs (previous[d] [T·N, H] as in LayerInputSource) into y [T·N, D·H] floats and, when
// codes is not null, the codes themselves; element idx < T·N·D·H.
struct OutputSink {
  const int32_t* cell_out[2] = {nullptr, nullptr};
  CodeDequantizer dequantizer[2]{};
  int64_t H = 0, D = 1;
  float* y = nullptr;
  int32_t* codes = nullptr;  // null: the caller did not ask for codes
};

QGRU_HD void output_element(const OutputSink& o, int64_t idx) {
  const int64_t DH = o.D * o.H;
  const int64_t row = idx / DH;
  const bool second = (idx % DH) >= o.H;  // direction 1; a select, not an index (see layer_input_code)
  const int64_t j = idx % o.H;
  const int32_t code = (second ? o.cell_out[1] : o.cell_out[0])[row * o.H + j];
  o.y[idx] = dequantize_code(second ? o.dequantizer[1] : o.dequantizer[0], code);
  if (o.codes != nullptr) o.codes[idx] = code;
}

// What one whole call moves between host and device, planned before it runs (the GPU self-test requires the
// executor's count to equal it; test_kernels checks the plan's rules):
//   up:   x (floats for run, codes for run_codes), h0 codes when given, sequence lengths when given;
//   down: the output floats, the h_n codes [L·D, N, H] (h_n's floats are dequantized from them on the host: L·D·N·H
//         values, not a pass over [T, N, ·]), the output codes when asked for, and each persistent cell's error words.
// host passes over [T, N, ·]: run_codes range-checks the caller's codes once (check_input_codes); run none.
struct DeviceCallPlan {
  int uploads = 0;
  int downloads = 0;
  int host_passes = 0;
  int streams = 1;  // one per direction: a bidirectional layer's two cells run concurrently
  int total() const { return uploads + downloads; }
  std::string describe() const {
    return std::to_string(uploads) + " up, " + std::to_string(downloads) + " down, " + std::to_string(host_passes) +
           " host pass(es), " + std::to_string(streams) + " stream(s)";
  }
};

// persistent_cells: the cells that took the persistent kernel, whose error words (12 bytes each) come back after the
// synchronization.
inline DeviceCallPlan plan_device_call(int num_directions, bool float_input, bool has_h0, bool has_lengths,
                                       bool want_output_codes, int persistent_cells = 0) {
  DeviceCallPlan p;
  p.uploads = 1 + (has_h0 ? 1 : 0) + (has_lengths ? 1 : 0);
  p.downloads = 2 + (want_output_codes ? 1 : 0) + persistent_cells;
  p.host_passes = float_input ? 0 : 1;
  p.streams = num_directions;
  return p;
}

// How a streaming state (QuantGruCudaStream, FrameIssue::Graph) issues its next frame of one kind (floats or codes,
// with or without output):
//   Launch   its kernels, GEMMs and copies one by one: the kind's first frame (the cells' plans, cuBLAS's first-call
//            setup and the cells' step graphs are made outside any capture), and every frame when graphs are off
//            (launches asked for, or a capture failed);
//   Capture  the frame into the kind's graph, then replay it: the second frame, and any frame whose cells'
//            workspaces are no longer where the graph was captured (a run of a larger shape moved them: a whole
//            call of a longer T or a larger N, a new state of a larger N);
//   Replay   the kind's graph: every other frame.
enum class FrameAction { Launch, Capture, Replay };
inline FrameAction choose_frame_action(bool graphs, bool kind_launched_once, bool have_graph, bool workspaces_unmoved) {
  if (!graphs || !kind_launched_once) return FrameAction::Launch;
  return have_graph && workspaces_unmoved ? FrameAction::Replay : FrameAction::Capture;
}

}  // namespace qgru::kernels
