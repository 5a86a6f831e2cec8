#include "qgru/quant/gru_quant_params.h"

#include <algorithm>
#include <cmath>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/quant/activation_generation.h"

namespace qgru {

namespace {

std::string cell_name(int layer, int direction) {
  return "layer " + std::to_string(layer) + " direction " + std::to_string(direction);
}

}  // namespace

QuantizedRows quantize_rows_symmetric(const std::vector<float>& values, int rows, int cols, int bits, bool per_channel,
                                      bool real_scale) {
  if (static_cast<int64_t>(values.size()) != static_cast<int64_t>(rows) * cols) {
    throw Error("internal: quantize_rows_symmetric given " + std::to_string(values.size()) + " values for [" +
                std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  QuantizedRows result;
  result.codes.resize(values.size());
  result.shift.resize(static_cast<size_t>(rows));
  result.mantissa.resize(static_cast<size_t>(rows));
  auto row_max_abs = [&](int r) {
    double m = 0.0;
    for (int k = 0; k < cols; ++k) m = std::max(m, std::fabs(static_cast<double>(values[static_cast<size_t>(r) * cols + k])));
    return m;
  };
  double tensor_max = 0.0;
  if (!per_channel) {
    for (int r = 0; r < rows; ++r) tensor_max = std::max(tensor_max, row_max_abs(r));
  }
  for (int r = 0; r < rows; ++r) {
    const double m = per_channel ? row_max_abs(r) : tensor_max;
    if (!std::isfinite(m)) throw Error("row " + std::to_string(r) + " holds a value that is not finite");
    const RangeQuantResult rq = real_scale ? real_quant_from_range(-m, m, bits, /*is_unsigned=*/false, /*symmetric=*/true)
                                           : quant_from_range(-m, m, bits, /*is_unsigned=*/false, /*symmetric=*/true);
    if (rq.degenerate) ++result.zero_rows;
    result.shift[static_cast<size_t>(r)] = rq.quant.shift;
    result.mantissa[static_cast<size_t>(r)] = rq.quant.mantissa;
    for (int k = 0; k < cols; ++k) {
      const size_t i = static_cast<size_t>(r) * cols + k;
      result.codes[i] = rq.quant.quantize(values[i]);
    }
  }
  return result;
}

GruCellQuantParams make_cell_quant_params(const GruCellWeights& weights, const BitwidthConfig& config,
                                          const CellRanges& ranges, int layer, int direction, bool linear_before_reset) {
  GruCellQuantParams p;
  p.layer = layer;
  p.direction = direction;
  p.linear_before_reset = linear_before_reset;
  p.input_size = weights.input_size;
  p.hidden_size = weights.hidden_size;
  const int C = weights.input_size;
  const int H = weights.hidden_size;
  const std::string where = cell_name(layer, direction);
  p.multiplier_scales = config.multiplier_scales();

  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    p.quant[static_cast<size_t>(i)] = config.spec(tensor);
    if (gru_tensor_is_parameter(tensor)) continue;
    const FloatRange& r = ranges[static_cast<size_t>(i)];
    p.range[static_cast<size_t>(i)] = r;
    RangeQuantResult rq;
    try {
      const TensorBitwidth& bw = config.of(tensor);
      rq = bw.multiplier_scale ? real_quant_from_range(r.first, r.second, bw.bits, bw.is_unsigned, bw.symmetric)
                               : quant_from_range(r.first, r.second, bw.bits, bw.is_unsigned, bw.symmetric);
    } catch (const Error& e) {
      throw Error(where + ", tensor " + gru_tensor_name(tensor) + ": " + e.what());
    }
    if (rq.degenerate) {
      log()->warn("{}: tensor {} has the empty range [0, 0]; using {}", where, gru_tensor_name(tensor),
                  describe_quant(rq.quant));
    }
    p.quant[static_cast<size_t>(i)] = rq.quant;
  }

  struct ParamTensor {
    GruTensor tensor;
    const std::vector<float>* values;
    int cols;
    std::vector<int32_t>* codes;
    std::vector<int32_t>* shifts;
    std::vector<double>* mantissas;
  };
  const ParamTensor params[] = {{GruTensor::W, &weights.W, C, &p.q_W, &p.shift_W, &p.mantissa_W},
                                {GruTensor::R, &weights.R, H, &p.q_R, &p.shift_R, &p.mantissa_R},
                                {GruTensor::bw, &weights.bw, 1, &p.q_bw, &p.shift_bw, &p.mantissa_bw},
                                {GruTensor::br, &weights.br, 1, &p.q_br, &p.shift_br, &p.mantissa_br}};
  for (const ParamTensor& t : params) {
    const TensorBitwidth& bw = config.of(t.tensor);
    QuantizedRows rows;
    try {
      rows = quantize_rows_symmetric(*t.values, 3 * H, t.cols, bw.bits, bw.per_channel, bw.multiplier_scale);
    } catch (const Error& e) {
      throw Error(where + ", tensor " + gru_tensor_name(t.tensor) + ": " + e.what());
    }
    if (rows.zero_rows > 0) {
      log()->info("{}: tensor {} has {} all-zero row(s) of {}; they get zero codes and shift {}", where,
                  gru_tensor_name(t.tensor), rows.zero_rows, 3 * H, bw.bits - 1);
    }
    *t.codes = std::move(rows.codes);
    *t.shifts = std::move(rows.shift);
    if (p.multiplier_scales) *t.mantissas = std::move(rows.mantissa);  // empty in a power-of-two model
  }

  compute_derived_shifts(p);

  const struct {
    GateKind gate;
    ActivationFunction function;
    GruTensor input, output;
  } gates[] = {{GateKind::Update, ActivationFunction::Sigmoid, GruTensor::update_gate_input, GruTensor::update_gate_output},
               {GateKind::Reset, ActivationFunction::Sigmoid, GruTensor::reset_gate_input, GruTensor::reset_gate_output},
               {GateKind::New, ActivationFunction::Tanh, GruTensor::new_gate_input, GruTensor::new_gate_output}};
  for (const auto& g : gates) {
    const GateActivationChoice& choice = config.activation(g.gate);
    const int segments = choice.impl == ActivationImpl::Pwl
                             ? (choice.segments > 0 ? choice.segments : default_pwl_segments(p.q(g.output).bits))
                             : 0;
    try {
      p.activation[static_cast<size_t>(g.gate)] = generate_activation(g.function, choice.impl, segments, p.q(g.input), p.q(g.output));
    } catch (const Error& e) {
      throw Error(where + ", activation " + gate_kind_name(g.gate) + ": " + e.what());
    }
  }
  return p;
}

}  // namespace qgru
