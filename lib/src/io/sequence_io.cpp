#include "qgru/io/sequence_io.h"

#include <cmath>

#include "qgru/io/npy.h"

namespace qgru {
namespace {

bool is_float_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
}

std::vector<float> finite_float_values(const Tensor& tensor, const std::string& path) {
  if (!is_float_dtype(tensor.dtype)) {
    throw Error(path + ": expected a float array (float32, float64, float16, bfloat16), got " +
                dtype_name(tensor.dtype));
  }
  std::vector<float> values = tensor_to_f32(tensor);
  require_finite(values, path + ": ", " (as float32); inputs must be finite");
  return values;
}

}  // namespace

SequenceBatch read_sequence_input(const std::string& path, int input_size, bool batch_first) {
  return sequence_input_from_tensor(read_array(path), path, input_size, batch_first);
}

SequenceBatch sequence_input_from_tensor(const Tensor& tensor, const std::string& path, int input_size,
                                         bool batch_first) {
  const std::string expected = std::string(batch_first ? "[N, T, " : "[T, N, ") + std::to_string(input_size) + "]" +
                               (batch_first ? " (batch-first)" : "") + " with C = " + std::to_string(input_size);
  if (tensor.rank() != 3 || tensor.shape[2] != input_size) {
    throw Error(path + ": expected " + expected + ", got " + shape_string(tensor.shape));
  }
  const int64_t T = tensor.shape[batch_first ? 1 : 0];
  const int64_t N = tensor.shape[batch_first ? 0 : 1];
  if (T < 1 || N < 1) {
    throw Error(path + ": expected " + expected + " with T >= 1 and N >= 1, got " + shape_string(tensor.shape));
  }
  if (T > (1 << 30) || N > (1 << 30)) {
    throw Error(path + ": shape " + shape_string(tensor.shape) + " is too large");
  }
  SequenceBatch batch;
  batch.T = static_cast<int>(T);
  batch.N = static_cast<int>(N);
  batch.C = input_size;
  batch.values = finite_float_values(tensor, path);
  if (batch_first) batch.values = swap_first_two_axes(batch.values, N, T, input_size);
  return batch;
}

std::vector<float> read_initial_state(const std::string& path, int layers_times_directions, int N, int H) {
  return initial_state_from_tensor(read_array(path), path, layers_times_directions, N, H);
}

std::vector<float> initial_state_from_tensor(const Tensor& tensor, const std::string& path, int layers_times_directions,
                                             int N, int H) {
  const std::vector<int64_t> expected{layers_times_directions, N, H};
  if (tensor.shape != expected) {
    throw Error(path + ": expected h0 [L*D, N, H] = " + shape_string(expected) + ", got " +
                shape_string(tensor.shape));
  }
  return finite_float_values(tensor, path);
}

void check_sequence_lengths(const int32_t* lengths, int T, int N) {
  if (lengths == nullptr) return;
  for (int n = 0; n < N; ++n) {
    if (lengths[n] < 0 || lengths[n] > T) {
      throw Error("sequence length " + std::to_string(lengths[n]) + " of row " + std::to_string(n) +
                  " is outside [0, T = " + std::to_string(T) + "]");
    }
  }
}

std::vector<int32_t> read_sequence_lengths(const std::string& path, int N, int T) {
  return sequence_lengths_from_tensor(read_array(path), path, N, T);
}

std::vector<int32_t> sequence_lengths_from_tensor(const Tensor& tensor, const std::string& path, int N, int T) {
  if (tensor.rank() != 1 || tensor.shape[0] != N) {
    throw Error(path + ": expected sequence lengths [N] = [" + std::to_string(N) + "] (one per batch row), got " +
                shape_string(tensor.shape));
  }
  if (tensor.dtype != DType::I64 && tensor.dtype != DType::I32 && tensor.dtype != DType::I16 && tensor.dtype != DType::I8 &&
      tensor.dtype != DType::U8) {
    throw Error(path + ": expected integer sequence lengths, got " + std::string(dtype_name(tensor.dtype)));
  }
  const std::vector<int64_t> wide = tensor_to_i64(tensor, path);
  std::vector<int32_t> lengths(wide.size());
  for (size_t n = 0; n < wide.size(); ++n) {
    if (wide[n] < 0 || wide[n] > T) {
      throw Error(path + ": sequence length " + std::to_string(wide[n]) + " of row " + std::to_string(n) +
                  " is outside [0, T = " + std::to_string(T) + "]");
    }
    lengths[n] = static_cast<int32_t>(wide[n]);
  }
  return lengths;
}

Tensor sequence_output_tensor(const std::vector<float>& time_major, int T, int N, int F, bool batch_first) {
  if (batch_first) {
    return Tensor::from_vector<float>({N, T, F}, swap_first_two_axes(time_major, T, N, F));
  }
  return Tensor::from_vector<float>({T, N, F}, time_major);
}

std::vector<float> swap_first_two_axes(const std::vector<float>& values, int64_t d0, int64_t d1, int64_t rest) {
  if (d0 < 0 || d1 < 0 || rest < 0 || static_cast<int64_t>(values.size()) != d0 * d1 * rest) {
    throw Error("swap_first_two_axes: " + std::to_string(values.size()) + " values do not fill [" +
                std::to_string(d0) + ", " + std::to_string(d1) + ", " + std::to_string(rest) + "]");
  }
  std::vector<float> out(values.size());
  const size_t R = static_cast<size_t>(rest);
  for (int64_t i = 0; i < d0; ++i) {
    for (int64_t j = 0; j < d1; ++j) {
      const auto from = values.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(i * d1 + j)) * R);
      std::copy(from, from + static_cast<std::ptrdiff_t>(R),
                out.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(j * d0 + i) * R));
    }
  }
  return out;
}

}  // namespace qgru
