#pragma once
// Float against integer, side by side on the same inputs: the final output, h_n, and every intermediate
// tensor of every layer and direction (docs/FIXED_POINT.md §2), each also per time step. The integer run
// follows its own state (no teacher forcing), so intermediate errors include the drift of h over time,
// as a deployment would see it.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "qgru/gru_tensors.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/verify/error_metrics.h"

namespace qgru {

struct TensorComparison {
  int layer = 0;
  int direction = 0;
  GruTensor tensor = GruTensor::x;
  ErrorMetrics overall;
  std::vector<ErrorMetrics> per_step;  // index t (time index in the input sequence)
};

struct GruVerifyReport {
  int T = 0, N = 0;
  ErrorMetrics output;                        // [T, N, D*H], all steps
  std::vector<ErrorMetrics> output_per_step;  // index t
  ErrorMetrics h_n;
  std::vector<TensorComparison> tensors;      // (layer, direction, tensor) in data-flow order
};

struct GruVerifyOptions {
  // Float intermediates are held for one chunk of the batch at a time; the chunk is sized so that they stay
  // under this many bytes (at least one sequence per chunk).
  size_t max_chunk_bytes = size_t{256} << 20;
};

// x: [T, N, C] time-major floats; h0: [L*D, N, H] or nullptr. Throws qgru::Error when the two models do not
// describe the same GRU (sizes, layers, directions).
// lengths: [N] sequence lengths or nullptr; padded steps are run as padding by both models and left out of
// every figure (the output's and each tensor's).
GruVerifyReport verify_gru(const FloatGruModel& float_model, const QuantizedGru& quant_model, const float* x,
                           int T, int N, const float* h0, const GruVerifyOptions& options = {},
                           const int32_t* lengths = nullptr);

}  // namespace qgru
