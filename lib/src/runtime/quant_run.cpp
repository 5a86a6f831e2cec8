#include "qgru/runtime/quant_run.h"

#include <algorithm>
#include <chrono>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/quant_executor.h"

namespace qgru {
namespace {

bool is_integer_dtype(DType dtype) {
  return dtype == DType::I64 || dtype == DType::I32 || dtype == DType::I16 || dtype == DType::I8 || dtype == DType::U8;
}

// x codes [T, N, C] (time-major) from an integer array, each inside x's code range.
std::vector<int32_t> read_input_codes(const Tensor& tensor, const std::string& path, const TensorQuant& x_quant,
                                      int input_size, bool batch_first, int& T, int& N) {
  if (tensor.rank() != 3 || tensor.shape[2] != input_size || tensor.shape[0] == 0 || tensor.shape[1] == 0) {
    throw Error(path + ": expected integer x codes " + std::string(batch_first ? "[N, T, " : "[T, N, ") +
                std::to_string(input_size) + "], got " + shape_string(tensor.shape));
  }
  const std::vector<int64_t> wide = tensor_to_i64(tensor, path);
  const int64_t d0 = tensor.shape[0], d1 = tensor.shape[1];
  T = static_cast<int>(batch_first ? d1 : d0);
  N = static_cast<int>(batch_first ? d0 : d1);
  std::vector<int32_t> codes(wide.size());
  for (int64_t a = 0; a < d0; ++a) {
    for (int64_t b = 0; b < d1; ++b) {
      // Time-major destination index: (t, n) = batch_first ? (b, a) : (a, b).
      const int64_t t = batch_first ? b : a, n = batch_first ? a : b;
      for (int64_t c = 0; c < input_size; ++c) {
        const int64_t value = wide[static_cast<size_t>((a * d1 + b) * input_size + c)];
        if (value < x_quant.qmin() || value > x_quant.qmax()) {
          throw Error(path + ": x code " + std::to_string(value) + " at [" + std::to_string(a) + ", " +
                      std::to_string(b) + ", " + std::to_string(c) + "] is outside x's code range [" +
                      std::to_string(x_quant.qmin()) + ", " + std::to_string(x_quant.qmax()) + "] (" +
                      describe_quant(x_quant) + ")");
        }
        codes[static_cast<size_t>((t * N + n) * input_size + c)] = static_cast<int32_t>(value);
      }
    }
  }
  return codes;
}

// The codes as the narrowest integer dtype that holds every code of the last layer's h spaces (int8, uint8,
// int16, else int32), [T, N, F] from time-major values or [N, T, F] when batch_first.
template <class Code>
Tensor codes_tensor_as(const std::vector<int32_t>& time_major, int F, const std::vector<int64_t>& shape,
                       bool batch_first, int T, int N) {
  std::vector<Code> values(time_major.size());
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < N; ++n) {
      const size_t from = (static_cast<size_t>(t) * N + n) * F;
      const size_t to = (batch_first ? static_cast<size_t>(n) * T + t : static_cast<size_t>(t) * N + n) * F;
      for (int f = 0; f < F; ++f) values[to + f] = static_cast<Code>(time_major[from + f]);  // in range: the h spaces'
    }
  }
  return Tensor::from_vector(shape, values);
}

Tensor codes_tensor(const QuantizedGru& model, const std::vector<int32_t>& time_major, int T, int N, int F, bool batch_first) {
  int64_t q_min = 0, q_max = 0;
  for (int d = 0; d < model.num_directions; ++d) {
    const TensorQuant& h = model.cell(model.num_layers - 1, d).q(GruTensor::h);
    q_min = std::min<int64_t>(q_min, h.qmin());
    q_max = std::max<int64_t>(q_max, h.qmax());
  }
  const std::vector<int64_t> shape = batch_first ? std::vector<int64_t>{N, T, F} : std::vector<int64_t>{T, N, F};
  if (q_min >= -128 && q_max <= 127) return codes_tensor_as<int8_t>(time_major, F, shape, batch_first, T, N);
  if (q_min >= 0 && q_max <= 255) return codes_tensor_as<uint8_t>(time_major, F, shape, batch_first, T, N);
  if (q_min >= -32768 && q_max <= 32767) return codes_tensor_as<int16_t>(time_major, F, shape, batch_first, T, N);
  return codes_tensor_as<int32_t>(time_major, F, shape, batch_first, T, N);
}

}  // namespace

QuantRunInput read_quant_run_input(const std::string& path, const QuantizedGru& model, bool batch_first) {
  QuantRunInput input;
  const Tensor raw = read_array(path);
  if (is_integer_dtype(raw.dtype)) {
    input.is_codes = true;
    input.q_x = read_input_codes(raw, path, model.input_quant(), model.input_size, batch_first, input.T, input.N);
  } else {
    SequenceBatch x = read_sequence_input(path, model.input_size, batch_first);
    input.T = x.T;
    input.N = x.N;
    input.values = std::move(x.values);
  }
  return input;
}

QuantRunSummary run_quantized_files(const QuantRunOptions& options) {
  const QuantizedGru model = read_artifact(options.artifact_path);
  const GruCellQuantParams& first = model.cell(0, 0);
  const int H = first.hidden_size;
  const int LD = model.num_layers * model.num_directions;

  QuantRunSummary summary;
  const QuantRunInput x = read_quant_run_input(options.input_path, model, options.batch_first);
  summary.input_was_codes = x.is_codes;
  std::vector<float> h0;
  if (!options.h0_path.empty()) h0 = read_initial_state(options.h0_path, LD, x.N, H);

  if (options.executor != "fast" && options.executor != "reference") {
    throw Error("--executor " + options.executor + ": expected fast or reference");
  }
  bool use_fast = options.executor == "fast";
  if (options.device_executor) {
    use_fast = false;
    summary.executor = options.device_executor_name;
  } else if (use_fast) {
    const FastPathSupport support = fast_path_support(model);
    use_fast = support.supported;
    summary.executor = support.supported ? "fast (" + support.isa + ")" : "reference (fast path: " + support.reason + ")";
  } else {
    summary.executor = "reference";
  }

  std::vector<int32_t> lengths_values;
  if (!options.lengths_path.empty()) lengths_values = read_sequence_lengths(options.lengths_path, x.N, x.T);
  const int32_t* lengths = lengths_values.empty() ? nullptr : lengths_values.data();
  const auto start = std::chrono::steady_clock::now();
  QuantGruResult result;
  if (options.device_executor) {
    std::vector<int32_t> q_x_quantized;
    if (!x.is_codes) q_x_quantized = quantize_values(model.input_quant(), x.values.data(), x.values.size());
    const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0.empty() ? nullptr : h0.data(), x.N);
    result = options.device_executor(model, x.is_codes ? x.q_x.data() : q_x_quantized.data(), x.T, x.N,
                                     q_h0.empty() ? nullptr : q_h0.data(), lengths);
  } else if (x.is_codes) {
    const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0.empty() ? nullptr : h0.data(), x.N);
    const int32_t* q_h0_data = q_h0.empty() ? nullptr : q_h0.data();
    result = use_fast ? run_quantized_gru_fast_codes(model, x.q_x.data(), x.T, x.N, q_h0_data, nullptr, lengths)
                      : run_quantized_gru_codes(model, x.q_x.data(), x.T, x.N, q_h0_data, nullptr, lengths);
  } else {
    const float* h0_data = h0.empty() ? nullptr : h0.data();
    result = use_fast ? run_quantized_gru_fast(model, x.values.data(), x.T, x.N, h0_data, nullptr, lengths)
                      : run_quantized_gru(model, x.values.data(), x.T, x.N, h0_data, nullptr, lengths);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int F = model.num_directions * H;
  const Tensor y = sequence_output_tensor(result.output, x.T, x.N, F, options.batch_first);
  AtomicFileGroup outputs;
  const std::vector<uint8_t> y_bytes = serialize_npy(y);
  outputs.add(options.output_path).write(y_bytes.data(), y_bytes.size());
  if (!options.codes_path.empty()) {
    const std::vector<uint8_t> bytes = serialize_npy(codes_tensor(model, result.output_codes, x.T, x.N, F, options.batch_first));
    outputs.add(options.codes_path).write(bytes.data(), bytes.size());
  }
  if (!options.hn_path.empty()) {
    const std::vector<uint8_t> bytes =
        serialize_npy(Tensor::from_vector<float>({LD, x.N, H}, result.h_n));
    outputs.add(options.hn_path).write(bytes.data(), bytes.size());
  }
  outputs.commit_all();

  summary.T = x.T;
  summary.N = x.N;
  summary.output_shape = y.shape;
  if (!result.output.empty()) {
    double sum = 0;
    summary.min = summary.max = result.output[0];
    for (float value : result.output) {
      sum += value;
      summary.min = std::min<double>(summary.min, value);
      summary.max = std::max<double>(summary.max, value);
    }
    summary.mean = sum / static_cast<double>(result.output.size());
  }
  return summary;
}

}  // namespace qgru
