#pragma once
// Golden vectors: every intermediate code of every step of the CPU integer executor for a few sequences,
// in one safetensors file, so that a hardware team (RTL simulation, a DSP port, an independent
// re-implementation such as scripts/reference_fixed_point.py) can compare its numbers with qgru's, code
// for code, and find the first (layer, direction, t, n, channel) where they part. The arithmetic is the
// one of docs/FIXED_POINT.md; the names are those of docs/FIXED_POINT.md §3 (B-1/B-2, C-1..C-4).
//
// File layout (all tensors C order, little-endian):
//   __metadata__: "format" = "qgru.golden_vectors", "version" = "1", "tool_version", "artifact_sha256"
//     (sha256 of the artifact's JSON file), "artifact_tensor_file_sha256", "T", "N", "num_layers",
//     "num_directions", "input_size", "hidden_size", "time_index" = "input" (see below).
//   input.q_x      [T, N, C]     I32  the model's input codes (layer 0's x space)
//   input.q_h0     [L*D, N, H]   I32  the initial state codes of every cell (its own h space)
//   output.q_y     [T, N, D*H]   I32  the output codes (direction d at columns [d*H, (d+1)*H), last layer's h)
//   output.q_h_n   [L*D, N, H]   I32  the final state codes of every cell
//   and per cell, prefix "l<layer>.d<direction>." (d = 1 is the reverse direction):
//   q_x                        [T, N, C_l]  this layer's x codes (layer > 0: requantized from layer l-1)
//   gemm_x                     [T, N, 3H]   Σ_k q_W[c,k] q_x[k], raw (B-1 GEMM, no zero-point correction)
//   gemm_x_corrected           [T, N, 3H]   gemm_x - W_sum[c] * zp_x (B-1 step 1)
//   q_bw_in_gemm_x             [3H]         rshift_round(q_bw[c], shift_bw_to_gemm_x[c]) (B-1 step 2)
//   q_weight_ih_linear         [T, N, 3H]   B-1 result, gates z, r, n at columns [0,H), [H,2H), [2H,3H)
//   q_h_prev                   [T, N, H]    the state entering the step that consumes x[t]
//   gemm_h, gemm_h_corrected   [T, N, 3H]   as gemm_x, with R and q_h_prev (B-2)
//   q_br_in_gemm_h             [3H]
//   q_weight_hh_linear         [T, N, 3H]
//   q_update_gate_input, q_update_gate_output, q_reset_gate_input, q_reset_gate_output,
//   q_new_gate_input, q_new_gate_output   [T, N, H]   (C-1, C-2, C-3)
//   q_new_gate_aligned_to_h    [T, N, H]    C-4 step 1 (not saturated)
//   q_h_new                    [T, N, H]    C-4 result: h after the step that consumed x[t]
//   q_reset_hidden             [T, N, H]    only for the linear_before_reset = 0 cell (the artifact's
//                                           "linear_before_reset": false): C-2a, r ⊙ h in h's space; that cell's
//                                           gemm_h / gemm_h_corrected n channels are Σ_k q_R[2H+j,k] q_reset_hidden[k]
//                                           (the step's second GEMM) and q_weight_hh_linear's n channels B-2 of them
// The time axis is always the input's time index t ("time_index" = "input"): the reverse direction
// visits t = T-1 .. 0, so its q_h_prev[t] is its q_h_new[t+1] (and q_h0 at t = T-1).
// Accumulator tensors (gemm_*) are I32 when every value fits int32, else I64; codes are always I32.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

constexpr const char* kGoldenVectorsFormat = "qgru.golden_vectors";
constexpr int kGoldenVectorsVersion = 1;

struct GoldenVectorsOptions {
  std::string artifact_sha256;              // sha256 of the artifact JSON (metadata only)
  std::string artifact_tensor_file_sha256;  // its tensor file's sha256 (metadata only)
};

struct GoldenVectors {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Run the CPU integer executor on input codes q_x [T, N, C] (layer 0's x space; refused when outside its
// code range) and q_h0 [L*D, N, H] (nullptr: the code of 0.0 in each cell's h space) and collect every
// intermediate. The GEMM accumulators are recomputed here from the codes and the artifact's weights, and
// the linears derived from them are checked against the executor's (an internal error if they differ).
GoldenVectors make_golden_vectors(const QuantizedGru& model, const int32_t* q_x, int T, int N, const int32_t* q_h0,
                                  const GoldenVectorsOptions& options);

// The same as the bytes of a safetensors file (`qgru run --dump-intermediates` hands them to the run's output
// group: QuantRunOptions::extra_output).
std::vector<uint8_t> serialize_golden_vectors(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                              const int32_t* q_h0, const GoldenVectorsOptions& options);

// The same, writing the safetensors file atomically.
void write_golden_vectors(const std::string& path, const QuantizedGru& model, const int32_t* q_x, int T, int N,
                          const int32_t* q_h0, const GoldenVectorsOptions& options);

// Float input x [T, N, C] (and h0 [L*D, N, H] floats or nullptr) quantized with the model's x and h
// parameters (round half away from zero, saturating), then as above. `first_sequences` > 0 keeps only the
// first that many sequences of the batch (golden files are meant to stay small).
void write_golden_vectors_from_floats(const std::string& path, const QuantizedGru& model, const float* x, int T,
                                      int N, const float* h0, int first_sequences,
                                      const GoldenVectorsOptions& options);

// Options for an artifact on disk: the sha256 of `artifact_json_path` and of its tensor file.
GoldenVectorsOptions golden_options_for_artifact(const std::string& artifact_json_path);

}  // namespace qgru
