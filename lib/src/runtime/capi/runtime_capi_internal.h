#pragma once
// The runtime C API's objects behind its opaque handles (qgru/qgru_runtime.h), shared by its sources.
#include <memory>
#include <string>
#include <vector>

#include "qgru/qgru_runtime.h"
#include "qgru/runtime/executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/runtime/stream_step.h"

namespace qgru::runtime_capi {

// A failure with the status the C API answers (the message is what qgru_rt_last_error() says).
struct StatusError {
  qgru_rt_status status;
  std::string message;
};

struct Context {
  std::shared_ptr<const QuantizedGru> model;
  qgru_rt_context_options options{};
  std::unique_ptr<Executor> executor;  // the chooser's (qgru/runtime/executor.h): CUDA, the fast CPU one or the reference
  std::string description;

  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                           const int32_t* lengths = nullptr) const {
    return executor->run_codes(q_x, T, N, q_h0, lengths);
  }
  // Float x and h0 (quantized with their tensors' parameters, saturating) with run_quantized_gru's contract: on
  // the fast executor its float entry, which quantizes x straight into the VNNI operand bytes (one pass where
  // quantize_values + run_codes make three: int32 codes, int16, u8), the same codes.
  QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths) const {
    return executor->run_floats(x, T, N, h0, lengths);  // the C API's float runs read no codes
  }
  // The CPU stepper for a batch of N (the fast one where it applies); null on a device.
  std::unique_ptr<GruCellStepper> make_stepper(int N) const { return executor->make_stepper(N); }
  // The device's streaming state (CUDA: h kept on the device between frames); null on the CPU.
  std::unique_ptr<DeviceStepper> make_device_stepper(int N) const { return executor->make_device_stepper(N); }
};

}  // namespace qgru::runtime_capi

struct qgru_rt_model {
  std::shared_ptr<const qgru::QuantizedGru> gru;
};

struct qgru_rt_context {
  std::shared_ptr<const qgru::runtime_capi::Context> impl;
};

struct qgru_rt_state {
  std::shared_ptr<const qgru::runtime_capi::Context> context;
  int N = 0;
  std::vector<int32_t> q_h;                            // [L, N, H]
  std::unique_ptr<qgru::GruCellStepper> stepper;       // CPU; null on a device
  std::unique_ptr<qgru::DeviceStepper> device;         // a device's own streaming state (q_h then unused); or null
  std::vector<int32_t> next_x;                         // [N, H] step_layer_loop's scratch
  std::vector<int32_t> frame_x, frame_y;               // [N, C], [N, H] one frame of the float step
};
