#include "qgru/runtime/quant_run.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/quantize_input.h"
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

// The narrowest integer dtype holding every code in [q_min, q_max]: int8, uint8, int16, else int32.
template <class Code>
Tensor codes_as(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  std::vector<Code> narrowed(values.begin(), values.end());  // in range: the caller's code range holds them
  return Tensor::from_vector(std::move(shape), narrowed);
}

Tensor narrowest_codes_tensor(const std::vector<int32_t>& values, std::vector<int64_t> shape, int64_t q_min, int64_t q_max) {
  if (q_min >= -128 && q_max <= 127) return codes_as<int8_t>(values, std::move(shape));
  if (q_min >= 0 && q_max <= 255) return codes_as<uint8_t>(values, std::move(shape));
  if (q_min >= -32768 && q_max <= 32767) return codes_as<int16_t>(values, std::move(shape));
  return codes_as<int32_t>(values, std::move(shape));
}

// The union of the h code ranges of the cells of `layers` (with 0 in it).
std::pair<int64_t, int64_t> h_code_range(const QuantizedGru& model, int first_layer, int last_layer) {
  int64_t q_min = 0, q_max = 0;
  for (int l = first_layer; l <= last_layer; ++l) {
    for (int d = 0; d < model.num_directions; ++d) {
      const TensorQuant& h = model.cell(l, d).q(GruTensor::h);
      q_min = std::min<int64_t>(q_min, h.qmin());
      q_max = std::max<int64_t>(q_max, h.qmax());
    }
  }
  return {q_min, q_max};
}

// The output codes [T, N, F] (time-major values) as [T, N, F], or [N, T, F] when batch_first, in the narrowest
// dtype holding the last layer's h codes.
Tensor output_codes_tensor(const QuantizedGru& model, const std::vector<int32_t>& time_major, int T, int N, int F,
                           bool batch_first) {
  std::vector<int32_t> values = time_major;
  if (batch_first) {
    for (int t = 0; t < T; ++t) {
      for (int n = 0; n < N; ++n) {
        const size_t from = (static_cast<size_t>(t) * N + n) * F, to = (static_cast<size_t>(n) * T + t) * F;
        std::copy_n(time_major.begin() + static_cast<std::ptrdiff_t>(from), F, values.begin() + static_cast<std::ptrdiff_t>(to));
      }
    }
  }
  const std::vector<int64_t> shape = batch_first ? std::vector<int64_t>{N, T, F} : std::vector<int64_t>{T, N, F};
  const auto [q_min, q_max] = h_code_range(model, model.num_layers - 1, model.num_layers - 1);
  return narrowest_codes_tensor(values, shape, q_min, q_max);
}

// h0 codes [L*D, N, H] from an integer array, each inside its cell's h code range.
std::vector<int32_t> read_initial_state_codes(const std::string& path, const QuantizedGru& model, int N) {
  const Tensor tensor = read_array(path);
  const int LD = model.num_layers * model.num_directions;
  const int H = model.hidden_size;
  const std::vector<int64_t> expected{LD, N, H};
  if (!is_integer_dtype(tensor.dtype)) {
    throw Error(path + ": expected integer h0 codes [L*D, N, H], got " + std::string(dtype_name(tensor.dtype)) +
                " (float states go to --h0)");
  }
  if (tensor.shape != expected) {
    throw Error(path + ": expected h0 codes [L*D, N, H] = " + shape_string(expected) + ", got " + shape_string(tensor.shape));
  }
  const std::vector<int64_t> wide = tensor_to_i64(tensor, path);
  std::vector<int32_t> codes(wide.size());
  const size_t per_cell = static_cast<size_t>(N) * static_cast<size_t>(H);
  for (size_t i = 0; i < wide.size(); ++i) {
    const size_t cell = i / per_cell;
    const TensorQuant& h = model.cells[cell].q(GruTensor::h);
    if (wide[i] < h.qmin() || wide[i] > h.qmax()) {
      throw Error(path + ": h0 code " + std::to_string(wide[i]) + " at [" + std::to_string(cell) + ", " +
                  std::to_string(i % per_cell / static_cast<size_t>(H)) + ", " + std::to_string(i % static_cast<size_t>(H)) +
                  "] is outside the h code range [" + std::to_string(h.qmin()) + ", " + std::to_string(h.qmax()) +
                  "] of layer " + std::to_string(model.cells[cell].layer) + " direction " +
                  std::to_string(model.cells[cell].direction) + " (" + describe_quant(h) + ")");
    }
    codes[i] = static_cast<int32_t>(wide[i]);
  }
  return codes;
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

namespace {

// The initial state as given: codes (--h0-codes) or floats (--h0) and their codes; both empty when neither.
struct InitialState {
  std::vector<float> floats;
  std::vector<int32_t> codes;
};

InitialState read_initial_state_once(const std::string& h0_path, const std::string& h0_codes_path,
                                     const QuantizedGru& model, int N) {
  if (!h0_path.empty() && !h0_codes_path.empty()) {
    throw UsageError("--h0 " + h0_path + " and --h0-codes " + h0_codes_path + ": give the initial state once, as floats "
                     "or as codes");
  }
  InitialState state;
  if (!h0_codes_path.empty()) {
    state.codes = read_initial_state_codes(h0_codes_path, model, N);
  } else if (!h0_path.empty()) {
    state.floats = read_initial_state(h0_path, model.num_layers * model.num_directions, N, model.hidden_size);
    state.codes = quantize_initial_state(model, state.floats.data(), N);
  }
  return state;
}

}  // namespace

std::vector<int32_t> read_quant_run_initial_state(const std::string& h0_path, const std::string& h0_codes_path,
                                                 const QuantizedGru& model, int N) {
  return read_initial_state_once(h0_path, h0_codes_path, model, N).codes;
}

QuantRunSummary run_quantized_files(const QuantRunOptions& options) {
  const QuantizedGru model = read_artifact(options.artifact_path);
  const int H = model.hidden_size;
  const int LD = model.num_layers * model.num_directions;

  QuantRunSummary summary;
  const QuantRunInput x = read_quant_run_input(options.input_path, model, options.batch_first);
  summary.input_was_codes = x.is_codes;
  const InitialState h0 = read_initial_state_once(options.h0_path, options.h0_codes_path, model, x.N);
  const int32_t* q_h0_data = h0.codes.empty() ? nullptr : h0.codes.data();

  ExecutorRequest request;
  request.device = options.device;
  request.executor = options.executor;
  const std::unique_ptr<Executor> executor = make_executor(model, request);
  summary.executor = executor->name();
  summary.executor_detail = executor->detail();
  summary.fallbacks = executor->fallbacks();

  std::vector<int32_t> lengths_values;
  if (!options.lengths_path.empty()) lengths_values = read_sequence_lengths(options.lengths_path, x.N, x.T);
  const int32_t* lengths = lengths_values.empty() ? nullptr : lengths_values.data();
  // On a device, a float call whose caller reads no codes (no --codes, --h0-codes or extra output) goes through the
  // executor's float entry point: with the CUDA device flow, x is quantized on the device and only the floats come
  // back (run_floats; h0's floats quantized by quantize_initial_state inside, as read_initial_state_once does here).
  // The time then includes the upload and the quantization of x.
  const bool floats_on_device = summary.executor == "cuda" && !x.is_codes && options.codes_path.empty() &&
                                options.h0_codes_path.empty() && !(options.extra_output && !options.extra_output_path.empty());
  // Otherwise every executor runs on codes: float x is quantized here with x's parameters (docs/FIXED_POINT.md §5),
  // as each executor's float entry point would, so that the time below is the executor's alone. quantize_fast gives
  // TensorQuant::quantize's codes exactly, vectorized (the scalar loop costs about 10 ns per value).
  std::vector<int32_t> q_x_quantized(x.is_codes || floats_on_device ? 0 : x.values.size());
  if (!x.is_codes && !floats_on_device) quantize_fast(model.input_quant(), x.values.data(), x.values.size(), q_x_quantized.data());
  const int32_t* q_x = x.is_codes ? x.q_x.data() : q_x_quantized.data();
  const auto start = std::chrono::steady_clock::now();
  const QuantGruResult result =
      floats_on_device
          ? executor->run_floats(x.values.data(), x.T, x.N, h0.floats.empty() ? nullptr : h0.floats.data(), lengths)
          : executor->run_codes(q_x, x.T, x.N, q_h0_data, lengths);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int F = model.num_directions * H;
  const Tensor y = sequence_output_tensor(result.output, x.T, x.N, F, options.batch_first);
  AtomicFileGroup outputs;
  const std::vector<uint8_t> y_bytes = serialize_npy(y);
  outputs.add(options.output_path).write(y_bytes.data(), y_bytes.size());
  if (!options.codes_path.empty()) {
    const std::vector<uint8_t> bytes =
        serialize_npy(output_codes_tensor(model, result.output_codes, x.T, x.N, F, options.batch_first));
    outputs.add(options.codes_path).write(bytes.data(), bytes.size());
  }
  if (!options.hn_path.empty()) {
    const std::vector<uint8_t> bytes =
        serialize_npy(Tensor::from_vector<float>({LD, x.N, H}, result.h_n));
    outputs.add(options.hn_path).write(bytes.data(), bytes.size());
  }
  if (!options.hn_codes_path.empty()) {
    const auto [q_min, q_max] = h_code_range(model, 0, model.num_layers - 1);
    const std::vector<uint8_t> bytes = serialize_npy(narrowest_codes_tensor(result.h_n_codes, {LD, x.N, H}, q_min, q_max));
    outputs.add(options.hn_codes_path).write(bytes.data(), bytes.size());
  }
  if (!options.extra_output_path.empty() && options.extra_output) {
    const std::vector<uint8_t> bytes = options.extra_output(model, q_x, x.T, x.N, q_h0_data);
    outputs.add(options.extra_output_path).write(bytes.data(), bytes.size());
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
