#include "qgru/quant/gru_quant_params.h"

#include <algorithm>
#include <cmath>

#include "qgru/base/error.h"
#include "qgru/base/log.h"

namespace qgru {

namespace {

CodeSpace code_space(const TensorQuant& quant) { return CodeSpace{quant.zp, quant.qmin(), quant.qmax()}; }

std::string cell_name(int layer, int direction) {
  return "layer " + std::to_string(layer) + " direction " + std::to_string(direction);
}

}  // namespace

TensorQuant GruCellQuantParams::channel_quant(GruTensor tensor, int c) const {
  TensorQuant result = q(tensor);
  const std::vector<int32_t>* shifts = tensor == GruTensor::W    ? &shift_W
                                       : tensor == GruTensor::R  ? &shift_R
                                       : tensor == GruTensor::bw ? &shift_bw
                                       : tensor == GruTensor::br ? &shift_br
                                                                 : nullptr;
  if (!shifts) throw Error(std::string("internal: channel_quant of activation tensor ") + gru_tensor_name(tensor));
  result.shift = shifts->at(static_cast<size_t>(c));
  result.zp = 0;
  return result;
}

GruCellParamsView GruCellQuantParams::view() const {
  GruCellParamsView v{};
  v.hidden_size = hidden_size;
  v.W_sum = W_sum.data();
  v.q_bw = q_bw.data();
  v.shift_bw_to_gemm_x = shift_bw_to_gemm_x.data();
  v.shift_gemm_x_to_weight_ih_linear = shift_gemm_x_to_weight_ih_linear.data();
  v.zp_x = q(GruTensor::x).zp;
  v.R_sum = R_sum.data();
  v.q_br = q_br.data();
  v.shift_br_to_gemm_h = shift_br_to_gemm_h.data();
  v.shift_gemm_h_to_weight_hh_linear = shift_gemm_h_to_weight_hh_linear.data();
  v.h = code_space(q(GruTensor::h));
  v.weight_ih_linear = code_space(q(GruTensor::weight_ih_linear));
  v.weight_hh_linear = code_space(q(GruTensor::weight_hh_linear));
  v.update_gate_input = code_space(q(GruTensor::update_gate_input));
  v.reset_gate_input = code_space(q(GruTensor::reset_gate_input));
  v.new_gate_input = code_space(q(GruTensor::new_gate_input));
  v.zp_update_gate_output = q(GruTensor::update_gate_output).zp;
  v.zp_reset_gate_output = q(GruTensor::reset_gate_output).zp;
  v.zp_new_gate_output = q(GruTensor::new_gate_output).zp;
  v.shift_weight_ih_linear_to_update_gate_input = shift_weight_ih_linear_to_update_gate_input;
  v.shift_weight_hh_linear_to_update_gate_input = shift_weight_hh_linear_to_update_gate_input;
  v.shift_weight_ih_linear_to_reset_gate_input = shift_weight_ih_linear_to_reset_gate_input;
  v.shift_weight_hh_linear_to_reset_gate_input = shift_weight_hh_linear_to_reset_gate_input;
  v.shift_weight_ih_linear_to_new_gate_input = shift_weight_ih_linear_to_new_gate_input;
  v.shift_reset_mul_hh_to_new_gate_input = shift_reset_mul_hh_to_new_gate_input;
  v.quant_one_in_update_gate_scale = quant_one_in_update_gate_scale;
  v.shift_new_gate_output_to_h = shift_new_gate_output_to_h;
  v.shift_update_gate_output = shift_update_gate_output;
  v.update_gate = activation[static_cast<int>(GateKind::Update)].view();
  v.reset_gate = activation[static_cast<int>(GateKind::Reset)].view();
  v.new_gate = activation[static_cast<int>(GateKind::New)].view();
  return v;
}

QuantizedRows quantize_rows_symmetric(const std::vector<float>& values, int rows, int cols, int bits, bool per_channel) {
  if (static_cast<int64_t>(values.size()) != static_cast<int64_t>(rows) * cols) {
    throw Error("internal: quantize_rows_symmetric given " + std::to_string(values.size()) + " values for [" +
                std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  QuantizedRows result;
  result.codes.resize(values.size());
  result.shift.resize(static_cast<size_t>(rows));
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
    const RangeQuantResult rq = quant_from_range(-m, m, bits, /*is_unsigned=*/false, /*symmetric=*/true);
    if (rq.degenerate) ++result.zero_rows;
    result.shift[static_cast<size_t>(r)] = rq.quant.shift;
    for (int k = 0; k < cols; ++k) {
      const size_t i = static_cast<size_t>(r) * cols + k;
      result.codes[i] = rq.quant.quantize(values[i]);
    }
  }
  return result;
}

void compute_derived_shifts(GruCellQuantParams& p) {
  const int C = p.input_size;
  const int H = p.hidden_size;
  const size_t channels = static_cast<size_t>(3 * H);
  const int shift_x = p.q(GruTensor::x).shift;
  const int shift_h = p.q(GruTensor::h).shift;
  const int shift_weight_ih_linear = p.q(GruTensor::weight_ih_linear).shift;
  const int shift_weight_hh_linear = p.q(GruTensor::weight_hh_linear).shift;

  // Step A: row sums (exact: |W_sum| <= C * 2^15 fits int64 for any C the model can have).
  p.W_sum.assign(channels, 0);
  p.R_sum.assign(channels, 0);
  for (size_t c = 0; c < channels; ++c) {
    for (int k = 0; k < C; ++k) p.W_sum[c] += p.q_W[c * C + k];
    for (int k = 0; k < H; ++k) p.R_sum[c] += p.q_R[c * H + k];
  }
  // Linear layer (bias first moved to the GEMM space).
  p.shift_gemm_x_to_weight_ih_linear.resize(channels);
  p.shift_bw_to_gemm_x.resize(channels);
  p.shift_gemm_h_to_weight_hh_linear.resize(channels);
  p.shift_br_to_gemm_h.resize(channels);
  for (size_t c = 0; c < channels; ++c) {
    p.shift_gemm_x_to_weight_ih_linear[c] = p.shift_W[c] + shift_x - shift_weight_ih_linear;
    p.shift_bw_to_gemm_x[c] = p.shift_bw[c] - (p.shift_W[c] + shift_x);
    p.shift_gemm_h_to_weight_hh_linear[c] = p.shift_R[c] + shift_h - shift_weight_hh_linear;
    p.shift_br_to_gemm_h[c] = p.shift_br[c] - (p.shift_R[c] + shift_h);
  }
  // Gates.
  const int shift_update_gate_input = p.q(GruTensor::update_gate_input).shift;
  const int shift_reset_gate_input = p.q(GruTensor::reset_gate_input).shift;
  const int shift_new_gate_input = p.q(GruTensor::new_gate_input).shift;
  p.shift_weight_ih_linear_to_update_gate_input = shift_weight_ih_linear - shift_update_gate_input;
  p.shift_weight_hh_linear_to_update_gate_input = shift_weight_hh_linear - shift_update_gate_input;
  p.shift_weight_ih_linear_to_reset_gate_input = shift_weight_ih_linear - shift_reset_gate_input;
  p.shift_weight_hh_linear_to_reset_gate_input = shift_weight_hh_linear - shift_reset_gate_input;
  p.shift_weight_ih_linear_to_new_gate_input = shift_weight_ih_linear - shift_new_gate_input;
  p.shift_reset_mul_hh_to_new_gate_input =
      (p.q(GruTensor::reset_gate_output).shift + shift_weight_hh_linear) - shift_new_gate_input;
  // Hidden state update.
  const TensorQuant& u = p.q(GruTensor::update_gate_output);
  // round(1.0 * 2^shift_u): exact for every shift in [kMinShift, kMaxShift] (a power of two, or 0/1 below 2^-1).
  p.quant_one_in_update_gate_scale = static_cast<int64_t>(std::round(std::ldexp(1.0, u.shift))) + u.zp;
  p.shift_new_gate_output_to_h = p.q(GruTensor::new_gate_output).shift - shift_h;
  p.shift_update_gate_output = u.shift;
}

GruCellQuantParams make_cell_quant_params(const GruCellWeights& weights, const BitwidthConfig& config,
                                          const CellRanges& ranges, int layer, int direction) {
  GruCellQuantParams p;
  p.layer = layer;
  p.direction = direction;
  p.input_size = weights.input_size;
  p.hidden_size = weights.hidden_size;
  const int C = weights.input_size;
  const int H = weights.hidden_size;
  const std::string where = cell_name(layer, direction);

  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    p.quant[static_cast<size_t>(i)] = config.spec(tensor);
    if (gru_tensor_is_parameter(tensor)) continue;
    const FloatRange& r = ranges[static_cast<size_t>(i)];
    p.range[static_cast<size_t>(i)] = r;
    RangeQuantResult rq;
    try {
      rq = quant_from_range(r.first, r.second, config.of(tensor).bits, config.of(tensor).is_unsigned,
                            config.of(tensor).symmetric);
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
  };
  const ParamTensor params[] = {{GruTensor::W, &weights.W, C, &p.q_W, &p.shift_W},
                                {GruTensor::R, &weights.R, H, &p.q_R, &p.shift_R},
                                {GruTensor::bw, &weights.bw, 1, &p.q_bw, &p.shift_bw},
                                {GruTensor::br, &weights.br, 1, &p.q_br, &p.shift_br}};
  for (const ParamTensor& t : params) {
    const TensorBitwidth& bw = config.of(t.tensor);
    QuantizedRows rows;
    try {
      rows = quantize_rows_symmetric(*t.values, 3 * H, t.cols, bw.bits, bw.per_channel);
    } catch (const Error& e) {
      throw Error(where + ", tensor " + gru_tensor_name(t.tensor) + ": " + e.what());
    }
    if (rows.zero_rows > 0) {
      log()->info("{}: tensor {} has {} all-zero row(s) of {}; they get zero codes and shift {}", where,
                  gru_tensor_name(t.tensor), rows.zero_rows, 3 * H, bw.bits - 1);
    }
    *t.codes = std::move(rows.codes);
    *t.shifts = std::move(rows.shift);
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
