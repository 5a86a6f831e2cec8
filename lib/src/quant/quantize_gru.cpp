#include "qgru/quant/quantize_gru.h"

#include <algorithm>
#include <cstdio>

#include "qgru/base/error.h"
#include "qgru/quant/gru_quant_params.h"
#include "qgru/runtime/artifact_keys.h"
#include "qgru/runtime/overflow_check.h"
#include "qgru/version.h"

namespace qgru {

QuantizedGru quantize_gru(const FloatGruModel& model, const BitwidthConfig& config, const RangeProvider& range) {
  if (model.num_layers < 1 || (model.num_directions != 1 && model.num_directions != 2) ||
      model.cells.size() != static_cast<size_t>(model.num_layers) * model.num_directions) {
    throw Error("quantize: the float model has " + std::to_string(model.cells.size()) + " cells for " +
                std::to_string(model.num_layers) + " layer(s) x " + std::to_string(model.num_directions) + " direction(s)");
  }
  QuantizedGru q;
  q.config = config;
  q.input_size = model.input_size;
  q.hidden_size = model.hidden_size;
  q.num_layers = model.num_layers;
  q.num_directions = model.num_directions;
  q.provenance.tool_version = QGRU_VERSION_STRING;
  for (int l = 0; l < model.num_layers; ++l) {
    // x is shared by the directions of a layer: one range, the union of what each direction saw.
    FloatRange x_range{0.0, 0.0};
    for (int d = 0; d < model.num_directions; ++d) {
      const FloatRange r = range(l, d, GruTensor::x, config.range_method_of(GruTensor::x), config.spec(GruTensor::x));
      x_range = d == 0 ? r : FloatRange{std::min(x_range.first, r.first), std::max(x_range.second, r.second)};
    }
    for (int d = 0; d < model.num_directions; ++d) {
      CellRanges ranges{};
      for (GruTensor tensor : kObservedGruTensors) {
        ranges[static_cast<size_t>(tensor)] =
            tensor == GruTensor::x ? x_range : range(l, d, tensor, config.range_method_of(tensor), config.spec(tensor));
      }
      q.cells.push_back(make_cell_quant_params(model.cell(l, d), config, ranges, l, d, model.linear_before_reset));
    }
  }
  choose_accumulators_and_prove(q, "quantize with config '" + config.name + "'");
  return q;
}

std::string describe_quantized_gru(const QuantizedGru& model) {
  std::string text;
  char line[256];
  for (const GruCellQuantParams& p : model.cells) {
    std::snprintf(line, sizeof line, "layer %d direction %d (C=%d, H=%d, gemm_x %s, gemm_h %s%s%s)\n", p.layer, p.direction,
                  p.input_size, p.hidden_size, p.gemm_x_int32 ? "int32" : "int64", p.gemm_h_int32 ? "int32" : "int64",
                  p.linear_before_reset ? "" : ", linear_before_reset = 0",
                  p.multiplier_scales ? ", multiplier scales: every rescale a multiplier and a shift" : "");
    text += line;
    std::snprintf(line, sizeof line, "  %-20s %-10s %6s %7s  %s\n", "tensor", "type", "shift", "zp", "range");
    text += line;
    for (int i = 0; i < kGruTensorCount; ++i) {
      const auto tensor = static_cast<GruTensor>(i);
      const TensorQuant& tq = p.q(tensor);
      const std::string type = std::string(tq.is_unsigned ? "u" : "i") + std::to_string(tq.bits) + (tq.symmetric ? " sym" : " asym");
      if (const std::vector<int32_t>* shifts = parameter_shifts(p, tensor)) {
        const auto [lo, hi] = std::minmax_element(shifts->begin(), shifts->end());
        std::snprintf(line, sizeof line, "  %-20s %-10s %3d..%-3d %4d  per-%s\n", gru_tensor_name(tensor), type.c_str(), *lo, *hi, 0,
                      model.config.of(tensor).per_channel ? "channel" : "tensor");
      } else {
        std::snprintf(line, sizeof line, "  %-20s %-10s %6d %7d  [%.6g, %.6g]", gru_tensor_name(tensor), type.c_str(), tq.shift,
                      tq.zp, p.range[static_cast<size_t>(i)].first, p.range[static_cast<size_t>(i)].second);
        text += line;
        // A real scale (docs/FIXED_POINT.md §1a): the shift alone does not say it.
        if (tq.power_of_two()) {
          std::snprintf(line, sizeof line, "\n");
        } else {
          std::snprintf(line, sizeof line, "  scale %.6g (mantissa %.6f)\n", tq.scale(), tq.mantissa);
        }
      }
      text += line;
    }
    // The scalar rescale shifts under their docs/FIXED_POINT.md names (the artifact's `derived` keys).
    for (const ScalarShiftKey& key : scalar_shift_keys(p.linear_before_reset)) {
      std::snprintf(line, sizeof line, "  %-46s %4d\n", key.name, p.*(key.member));
      text += line;
    }
    std::snprintf(line, sizeof line, "  %-46s %4lld\n", "quant_one_in_update_gate_scale",
                  static_cast<long long>(p.quant_one_in_update_gate_scale));
    text += line;
    text += "  activations:";
    for (int g = 0; g < 3; ++g) {
      const ActivationTables& a = p.activation[static_cast<size_t>(g)];
      text += std::string(g == 0 ? " " : ", ") + gate_kind_name(static_cast<GateKind>(g)) + " " +
              activation_function_name(a.function) + " " + activation_impl_name(a.impl) +
              (a.impl == ActivationImpl::Pwl ? " (" + std::to_string(a.segments) + " segments)" : "");
    }
    text += "\n";
  }
  return text;
}

}  // namespace qgru
