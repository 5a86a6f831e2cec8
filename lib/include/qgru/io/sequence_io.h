#pragma once
// Sequences and states as files, for every executor (float and quantized): reading x [T, N, C] (or
// [N, T, C] batch-first) and h0 [L*D, N, H] from .npy/.npz with their shapes checked against the model,
// and turning results back into tensors of the caller's layout.
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru {

// A batch of sequences, time-major: values [T, N, C].
struct SequenceBatch {
  int T = 0, N = 0, C = 0;
  std::vector<float> values;
};

// Read x from `path` (any float dtype; see read_array() for .npz keys). Refused, with one line naming the
// file: a rank other than 3, C != input_size ("x.npy: expected [T, N, 8] with C = 8, got [5, 2, 7]"),
// T or N of zero, an integer dtype, NaN or infinite values.
SequenceBatch read_sequence_input(const std::string& path, int input_size, bool batch_first);
// The same checks on an array already in memory (the Python package's); `source` names it in the messages.
SequenceBatch sequence_input_from_tensor(const Tensor& tensor, const std::string& source, int input_size,
                                         bool batch_first);

// Read h0 [L*D, N, H] from `path`; any other shape, an integer dtype or a non-finite value is refused.
std::vector<float> read_initial_state(const std::string& path, int layers_times_directions, int N, int H);
std::vector<float> initial_state_from_tensor(const Tensor& tensor, const std::string& source, int layers_times_directions,
                                             int N, int H);

// Whether row n of step t is inside its sequence (lengths [N] or null: every row has every step).
inline bool row_is_valid(const int32_t* lengths, int t, int n) { return lengths == nullptr || t < lengths[n]; }

// Read sequence lengths [N] (any integer dtype) from `path`, each in [0, T]; refused otherwise, naming the
// row. One per batch row: steps t >= lengths[n] of row n are padding (qgru::run_float_gru).
std::vector<int32_t> read_sequence_lengths(const std::string& path, int N, int T);
std::vector<int32_t> sequence_lengths_from_tensor(const Tensor& tensor, const std::string& source, int N, int T);
// The same check for lengths in memory (nullptr: none); throws qgru::Error naming the first bad row.
void check_sequence_lengths(const int32_t* lengths, int T, int N);

// A float32 tensor [T, N, F] from time-major values, or [N, T, F] when batch_first.
Tensor sequence_output_tensor(const std::vector<float>& time_major, int T, int N, int F, bool batch_first);

// [N, T, C] <-> [T, N, C] (the same function both ways with the first two extents swapped).
std::vector<float> swap_first_two_axes(const std::vector<float>& values, int64_t d0, int64_t d1, int64_t rest);

}  // namespace qgru
