#pragma once
// The runtime C API's objects behind its opaque handles (qgru/qgru_runtime.h), shared by its sources.
#include <memory>
#include <string>
#include <vector>

#include "qgru/qgru_runtime.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/runtime/stream_step.h"

namespace qgru::runtime_capi {

// A failure with the status the C API answers (the message is what qgru_rt_last_error() says).
struct StatusError {
  qgru_rt_status status;
  std::string message;
};

// A whole-model executor on a device other than the CPU (the CUDA one, cuda_device.cpp). run_codes has
// run_quantized_gru_codes's contract (lengths null: every sequence has T steps); failures are StatusError.
class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  virtual QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                                   const int32_t* lengths) const = 0;
  virtual std::string describe() const = 0;
};

// The CUDA executor on device `device_id`: StatusError DEVICE_NOT_BUILT in a build without CUDA,
// DEVICE_UNAVAILABLE, NOT_SUPPORTED (a cell no kernel covers) or EXECUTION_FAILED otherwise.
std::unique_ptr<DeviceExecutor> make_cuda_executor(const QuantizedGru& model, int device_id);

struct Context {
  std::shared_ptr<const QuantizedGru> model;
  qgru_rt_context_options options{};
  std::unique_ptr<FastQuantGru> fast;        // CPU, executor FAST (its support() may send runs to the reference)
  std::unique_ptr<DeviceExecutor> device;    // CUDA
  std::string description;

  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                           const int32_t* lengths = nullptr) const {
    if (device) return device->run_codes(q_x, T, N, q_h0, lengths);
    if (fast) return fast->run_codes(q_x, T, N, q_h0, nullptr, lengths);
    return run_quantized_gru_codes(*model, q_x, T, N, q_h0, nullptr, lengths);
  }
  // Float x and h0 (quantized with their tensors' parameters, saturating) with run_quantized_gru's contract: on
  // the fast executor its float entry, which quantizes x straight into the VNNI operand bytes (one pass where
  // quantize_values + run_codes make three: int32 codes, int16, u8), the same codes.
  QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths) const {
    if (!device && fast) return fast->run(x, T, N, h0, nullptr, lengths);
    if (!device) return run_quantized_gru(*model, x, T, N, h0, nullptr, lengths);
    const std::vector<int32_t> q_x = quantize_values(model->input_quant(), x, static_cast<size_t>(T) * N * model->input_size);
    const std::vector<int32_t> q_h0 = quantize_initial_state(*model, h0, N);
    return device->run_codes(q_x.data(), T, N, q_h0.empty() ? nullptr : q_h0.data(), lengths);
  }
  // The CPU stepper for a batch of N (the fast one where it applies); null on a device.
  std::unique_ptr<GruCellStepper> make_stepper(int N) const {
    if (device) return nullptr;
    std::unique_ptr<GruCellStepper> stepper = fast ? fast->make_stepper(N) : nullptr;
    return stepper ? std::move(stepper) : make_reference_stepper(*model, N);
  }
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
  std::unique_ptr<qgru::GruCellStepper> stepper;       // CPU; null on a device (steps run whole there)
  std::vector<int32_t> next_x;                         // [N, H] step_layer_loop's scratch
  std::vector<int32_t> frame_x, frame_y;               // [N, C], [N, H] one frame of the float step
};
