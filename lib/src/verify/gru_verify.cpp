#include "qgru/verify/gru_verify.h"

#include <algorithm>
#include <array>

#include "qgru/base/error.h"
#include "qgru/io/sequence_io.h"
#include "qgru/runtime/quant_executor.h"

namespace qgru {
namespace {

// The tensors compared per step; h is the new state of the step (h_new), as calibration observes it.
constexpr std::array<GruTensor, 10> kComparedTensors = kObservedGruTensors;

int tensor_width(GruTensor tensor, int input_size, int hidden_size) {
  switch (tensor) {
    case GruTensor::x: return input_size;
    case GruTensor::weight_ih_linear:
    case GruTensor::weight_hh_linear: return 3 * hidden_size;
    default: return hidden_size;
  }
}

const float* float_tensor(const FloatStepView& step, GruTensor tensor) {
  switch (tensor) {
    case GruTensor::x: return step.x;
    case GruTensor::h: return step.h_new;
    case GruTensor::weight_ih_linear: return step.weight_ih_linear;
    case GruTensor::weight_hh_linear: return step.weight_hh_linear;
    case GruTensor::update_gate_input: return step.update_gate_input;
    case GruTensor::update_gate_output: return step.update_gate_output;
    case GruTensor::reset_gate_input: return step.reset_gate_input;
    case GruTensor::reset_gate_output: return step.reset_gate_output;
    case GruTensor::new_gate_input: return step.new_gate_input;
    case GruTensor::new_gate_output: return step.new_gate_output;
    default: return nullptr;
  }
}

const int32_t* quant_tensor(const QuantStepView& step, GruTensor tensor) {
  switch (tensor) {
    case GruTensor::x: return step.q_x;
    case GruTensor::h: return step.q_h_new;
    case GruTensor::weight_ih_linear: return step.q_weight_ih_linear;
    case GruTensor::weight_hh_linear: return step.q_weight_hh_linear;
    case GruTensor::update_gate_input: return step.q_update_gate_input;
    case GruTensor::update_gate_output: return step.q_update_gate_output;
    case GruTensor::reset_gate_input: return step.q_reset_gate_input;
    case GruTensor::reset_gate_output: return step.q_reset_gate_output;
    case GruTensor::new_gate_input: return step.q_new_gate_input;
    case GruTensor::new_gate_output: return step.q_new_gate_output;
    default: return nullptr;
  }
}

// Index of (layer, direction, tensor slot) in the report's tensor list.
size_t comparison_index(int layer, int direction, int num_directions, size_t slot) {
  return (static_cast<size_t>(layer * num_directions + direction)) * kComparedTensors.size() + slot;
}

// Holds every float intermediate of one chunk: [cell][t][slot] -> values [n_chunk, width].
class FloatRecorder : public FloatGruObserver {
 public:
  FloatRecorder(int cells, int T) : steps_(static_cast<size_t>(cells) * static_cast<size_t>(T)), T_(T) {}
  void set_num_directions(int num_directions) { num_directions_ = num_directions; }

  void on_step(const FloatStepView& step) override {
    auto& slots = steps_[static_cast<size_t>((step.layer * num_directions_ + step.direction) * T_ + step.t)];
    for (size_t slot = 0; slot < kComparedTensors.size(); ++slot) {
      const GruTensor tensor = kComparedTensors[slot];
      const size_t count = static_cast<size_t>(step.batch) *
                           static_cast<size_t>(tensor_width(tensor, step.input_size, step.hidden_size));
      const float* values = float_tensor(step, tensor);
      slots[slot].assign(values, values + count);
    }
  }

  const std::vector<float>& values(int cell, int t, size_t slot) const {
    return steps_[static_cast<size_t>(cell * T_ + t)][slot];
  }

 private:
  std::vector<std::array<std::vector<float>, kComparedTensors.size()>> steps_;
  int T_;
  int num_directions_ = 1;
};

class QuantComparer : public QuantGruObserver {
 public:
  QuantComparer(const FloatRecorder& recorder, GruVerifyReport& report, int num_directions)
      : recorder_(recorder), report_(report), num_directions_(num_directions) {}

  void on_step(const QuantStepView& step) override {
    const int cell = step.layer * num_directions_ + step.direction;
    for (size_t slot = 0; slot < kComparedTensors.size(); ++slot) {
      const GruTensor tensor = kComparedTensors[slot];
      const std::vector<float>& reference = recorder_.values(cell, step.t, slot);
      const int32_t* codes = quant_tensor(step, tensor);
      const TensorQuant& quant = step.quant(tensor);
      TensorComparison& comparison = report_.tensors[comparison_index(step.layer, step.direction, num_directions_, slot)];
      ErrorMetrics& at_step = comparison.per_step[static_cast<size_t>(step.t)];
      ErrorMetrics here;
      const size_t width = reference.size() / static_cast<size_t>(step.batch);
      for (size_t i = 0; i < reference.size(); ++i) {
        if (!row_is_valid(step.lengths, step.t, static_cast<int>(i / width))) continue;  // padding
        here.add(reference[i], quant.dequantize(codes[i]));
      }
      at_step.merge(here);
      comparison.overall.merge(here);
    }
  }

 private:
  const FloatRecorder& recorder_;
  GruVerifyReport& report_;
  int num_directions_;
};

void check_same_gru(const FloatGruModel& float_model, const QuantizedGru& quant_model) {
  if (float_model.num_layers != quant_model.num_layers || float_model.num_directions != quant_model.num_directions ||
      float_model.input_size != quant_model.cell(0, 0).input_size ||
      float_model.hidden_size != quant_model.cell(0, 0).hidden_size) {
    throw Error("the float model (C=" + std::to_string(float_model.input_size) + ", H=" +
                std::to_string(float_model.hidden_size) + ", layers=" + std::to_string(float_model.num_layers) +
                ", directions=" + std::to_string(float_model.num_directions) +
                ") and the artifact (C=" + std::to_string(quant_model.cell(0, 0).input_size) + ", H=" +
                std::to_string(quant_model.cell(0, 0).hidden_size) + ", layers=" +
                std::to_string(quant_model.num_layers) + ", directions=" +
                std::to_string(quant_model.num_directions) + ") describe different GRUs");
  }
  if (float_model.linear_before_reset != quant_model.linear_before_reset()) {
    const auto name = [](bool lbr) { return std::string(lbr ? "linear_before_reset = 1" : "linear_before_reset = 0"); };
    throw Error("the float model is the " + name(float_model.linear_before_reset) + " GRU cell and the artifact the " +
                name(quant_model.linear_before_reset()) + " one: they describe different GRUs");
  }
}

}  // namespace

GruVerifyReport verify_gru(const FloatGruModel& float_model, const QuantizedGru& quant_model, const float* x,
                           int T, int N, const float* h0, const GruVerifyOptions& options, const int32_t* lengths) {
  check_same_gru(float_model, quant_model);
  const int L = float_model.num_layers;
  const int D = float_model.num_directions;
  const int C = float_model.input_size;
  const int H = float_model.hidden_size;

  GruVerifyReport report;
  report.T = T;
  report.N = N;
  report.output_per_step.resize(static_cast<size_t>(T));
  for (int layer = 0; layer < L; ++layer) {
    for (int direction = 0; direction < D; ++direction) {
      for (GruTensor tensor : kComparedTensors) {
        TensorComparison comparison;
        comparison.layer = layer;
        comparison.direction = direction;
        comparison.tensor = tensor;
        comparison.per_step.resize(static_cast<size_t>(T));
        report.tensors.push_back(std::move(comparison));
      }
    }
  }

  // Bytes of float intermediates per sequence: every step of every cell, every compared tensor.
  const size_t floats_per_step = static_cast<size_t>(std::max(C, D * H)) + static_cast<size_t>(6 * H + 7 * H);
  const size_t bytes_per_sequence = floats_per_step * sizeof(float) * static_cast<size_t>(T) * static_cast<size_t>(L * D);
  const int chunk = static_cast<int>(std::clamp<size_t>(options.max_chunk_bytes / std::max<size_t>(bytes_per_sequence, 1), 1,
                                                        static_cast<size_t>(std::max(N, 1))));

  std::vector<float> x_chunk, h0_chunk;
  for (int n0 = 0; n0 < N; n0 += chunk) {
    const int nb = std::min(chunk, N - n0);
    // Slice x [T, N, C] -> [T, nb, C] and h0 [L*D, N, H] -> [L*D, nb, H].
    x_chunk.resize(static_cast<size_t>(T) * static_cast<size_t>(nb) * static_cast<size_t>(C));
    for (int t = 0; t < T; ++t) {
      std::copy_n(x + (static_cast<size_t>(t) * N + n0) * C, static_cast<size_t>(nb) * C,
                  x_chunk.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * nb * C));
    }
    const float* h0_slice = nullptr;
    if (h0) {
      h0_chunk.resize(static_cast<size_t>(L * D) * static_cast<size_t>(nb) * static_cast<size_t>(H));
      for (int cell = 0; cell < L * D; ++cell) {
        std::copy_n(h0 + (static_cast<size_t>(cell) * N + n0) * H, static_cast<size_t>(nb) * H,
                    h0_chunk.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(cell) * nb * H));
      }
      h0_slice = h0_chunk.data();
    }

    FloatRecorder recorder(L * D, T);
    recorder.set_num_directions(D);
    const int32_t* chunk_lengths = lengths != nullptr ? lengths + n0 : nullptr;
    const FloatGruResult float_result = run_float_gru(float_model, x_chunk.data(), T, nb, h0_slice, &recorder, chunk_lengths);
    QuantComparer comparer(recorder, report, D);
    const QuantGruResult quant_result =
        run_quantized_gru(quant_model, x_chunk.data(), T, nb, h0_slice, &comparer, chunk_lengths);

    const size_t step_values = static_cast<size_t>(nb) * static_cast<size_t>(D * H);
    const size_t row_values = static_cast<size_t>(D * H);
    for (int t = 0; t < T; ++t) {
      ErrorMetrics at_step;
      for (int n = 0; n < nb; ++n) {  // padded rows are 0 in both: left out
        if (!row_is_valid(chunk_lengths, t, n)) continue;
        const size_t at = static_cast<size_t>(t) * step_values + static_cast<size_t>(n) * row_values;
        at_step.add(float_result.output.data() + at, quant_result.output.data() + at, static_cast<int64_t>(row_values));
      }
      report.output_per_step[static_cast<size_t>(t)].merge(at_step);
      report.output.merge(at_step);
    }
    report.h_n.add(float_result.h_n.data(), quant_result.h_n.data(), static_cast<int64_t>(float_result.h_n.size()));
  }
  return report;
}

}  // namespace qgru
