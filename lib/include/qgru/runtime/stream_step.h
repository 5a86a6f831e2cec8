#pragma once
// Streaming: a unidirectional model advanced a frame at a time, its state kept by the caller.
//
// The state of N independent streams is the h codes of every layer, q_h [L, N, H], layer l's codes in cell
// (l, 0)'s h space: exactly the h_n codes of a whole-sequence run (qgru/runtime/quant_executor.h) and, fed
// back as its q_h0, where the next run starts. Advancing the state by frames x[0..F) therefore gives the
// same codes as one run over the concatenated sequence: each frame is the whole-sequence executor's time
// step (B-1 of that frame, B-2 from the state, the cell per element, requantization into the next layer's x
// space), only cut where the caller's buffers begin. test/unit/runtime/stream_step_test.cpp checks it on
// every preset, multi-layer, both executors, against one whole run.
//
// A reverse direction reads its sequence from the end, so a bidirectional model cannot stream:
// step_layer_loop refuses it (qgru::Error naming the directions).
//
// No allocation on the step path: a GruCellStepper allocates its working memory for a batch of N when it is
// made (make_reference_stepper, FastQuantGru::make_stepper); step_layer_loop and step_cell then write only
// into memory given to them. A stepper is one stream group's scratch: use one per thread (the model and a
// FastQuantGru are shared read-only).
#include <cstdint>
#include <memory>
#include <string>

#include "qgru/runtime/quantized_gru.h"

namespace qgru {

class GruCellStepper {
 public:
  virtual ~GruCellStepper() = default;
  // Cell (layer, 0) advanced by one frame for the stepper's N streams.
  //   q_x: [N, C_layer] codes in the cell's x space (within its code range: the caller checked them);
  //   q_h: [N, H] codes in the cell's h space (within range): the state before the frame on entry, after it
  //        on return; the new codes are also the cell's output of this frame.
  virtual void step_cell(int layer, const int32_t* q_x, int32_t* q_h) = 0;
  virtual int batch() const = 0;
};

// A streaming state held by a device executor (the CUDA executor's QuantGruCudaStream: h stays on the device
// between frames, every buffer made with the state). The runtime C API's states on a device context step through it;
// its codes equal step_layer_loop's. Shapes as step_layer_loop: x [frames, N, C], y [frames, N, H], the state
// [L, N, H] codes.
class DeviceStepper {
 public:
  virtual ~DeviceStepper() = default;
  virtual void step(const float* x, int frames, float* y) = 0;                  // floats quantized on the device; y or null
  virtual void step_codes(const int32_t* q_x, int frames, int32_t* y_codes) = 0;  // q_x range-checked first
  virtual void get_codes(int32_t* q_h) const = 0;
  virtual void set_codes(const int32_t* q_h) = 0;  // codes within each layer's h range (the caller checked)
};

// The reference executor's cell (quant_executor.cpp: the same integer GEMMs and gru_cell_element), with
// [N, 3H] accumulators allocated here once.
std::unique_ptr<GruCellStepper> make_reference_stepper(const QuantizedGru& model, int N);

// Advance a unidirectional model by `frames` frames of N = stepper.batch() streams.
//   q_x:    [frames, N, C] codes in layer 0's x space, all checked before the state changes (qgru::Error
//           naming the first code outside x's range; the state is then unchanged);
//   q_h:    [L, N, H] the state (codes within each layer's h range), updated in place;
//   out:    [frames, N, H] the last layer's codes after each frame, or null;
//   next_x: [N, H] scratch for the codes requantized into the next layer's x space (unused when L = 1).
// Allocates nothing (but for the error message of a refused input).
void step_layer_loop(const QuantizedGru& model, const int32_t* q_x, int frames, int32_t* q_h, int32_t* out,
                     int32_t* next_x, GruCellStepper& stepper);

// Why `model` cannot stream, or "" when it can (a bidirectional model cannot).
std::string streaming_refusal(const QuantizedGru& model);

}  // namespace qgru
