#include "qgru/quant/quantize_with_stats.h"

#include <utility>

#include "qgru/base/log.h"
#include "qgru/base/sha256.h"
#include "qgru/calib/range_selection.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/quant/range_method_precedence.h"
#include "qgru/version.h"

namespace qgru {

std::string bitwidth_config_sha256(const std::string& name_or_path) {
  for (const std::string& name : bitwidth_preset_names()) {
    if (name == name_or_path) {
      const std::string& text = bitwidth_preset_text(name);
      return sha256_hex(text.data(), text.size());
    }
  }
  return sha256_file_hex(name_or_path);
}

QuantizedGru quantize_with_stats(const FloatGruModel& model, const CalibrationStats& stats, const BitwidthConfig& config,
                                 const std::string& range_method, const QuantizeSources& sources,
                                 const DecidedRange& decided) {
  check_stats_match_model(stats, model.num_layers, model.num_directions, model.input_size, model.hidden_size,
                          sources.stats_path);
  const std::string note = range_method_precedence_note(config, range_method, stats.method);
  if (!note.empty()) log()->info("quantize: {}", note);
  const RangeProvider ranges = [&](int layer, int direction, GruTensor tensor, const std::string& /*config's*/,
                                   const TensorQuant& spec) {
    const std::string chosen = resolved_range_method(config, range_method, stats.method, tensor);
    if (decided) {
      if (const auto range = decided(layer, direction, tensor, chosen, spec)) return *range;
    }
    const RangeChoice choice = select_range(stats, layer, direction, tensor, chosen, spec);
    log()->debug("quantize: layer {} direction {} {}: range [{}, {}] by {} ({})", layer, direction,
                 gru_tensor_name(tensor), choice.min, choice.max, choice.method, choice.detail);
    return std::pair<double, double>{choice.min, choice.max};
  };
  QuantizedGru quantized = quantize_gru(model, config, ranges);
  quantized.provenance.model_path = sources.model_path;
  quantized.provenance.model_sha256 = sources.model_sha256;
  quantized.provenance.stats_path = sources.stats_path;
  quantized.provenance.stats_sha256 = sources.stats_sha256;
  quantized.provenance.config_source = sources.config_source;
  quantized.provenance.config_sha256 = bitwidth_config_sha256(sources.config_source);
  quantized.provenance.tool_version = QGRU_VERSION_STRING;
  return quantized;
}

}  // namespace qgru
