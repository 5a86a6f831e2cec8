#include "qgru/quant/quantize_with_stats.h"

#include <utility>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/sha256.h"
#include "qgru/base/weights_provenance.h"
#include "qgru/calib/range_selection.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/quant/range_method_precedence.h"
#include "qgru/version.h"

namespace qgru {

namespace {

// A range the statistics give that cannot be used; its message names the statistics already.
struct StatisticsError : Error {
  using Error::Error;
};

}  // namespace

std::string bitwidth_config_sha256(const std::string& name_or_path) {
  const std::string file = bitwidth_config_file(name_or_path);
  if (!file.empty()) return sha256_file_hex(file);
  const std::string& text = bitwidth_preset_text(name_or_path);
  return sha256_hex(text.data(), text.size());
}

void check_quantize_inputs(const FloatGruModel& model, const CalibrationStats& stats, const BitwidthConfig& config,
                           const std::string& range_method, const QuantizeSources& sources,
                           bool allow_model_mismatch) {
  check_stats_match_model(stats, model.num_layers, model.num_directions, model.input_size, model.hidden_size,
                          sources.stats_in_messages());
  require_same_weights(sources.stats_in_messages(), stats.model_sha256, sources.model_in_messages(),
                       sources.model_sha256, allow_model_mismatch);
  const std::string note = range_method_precedence_note(config, range_method, stats.method);
  if (!note.empty()) log()->info("quantize: {}", note);
}

QuantizedGru quantize_with_stats(const FloatGruModel& model, const CalibrationStats& stats, const BitwidthConfig& config,
                                 const std::string& range_method, const QuantizeSources& sources,
                                 const DecidedRange& decided) {
  const RangeProvider ranges = [&](int layer, int direction, GruTensor tensor, const std::string& /*config's*/,
                                   const TensorQuant& spec) {
    const std::string chosen = resolved_range_method(config, range_method, stats.method, tensor);
    if (decided) {
      if (const auto range = decided(layer, direction, tensor, chosen, spec)) return *range;
    }
    // Checked here as quantize_gru will quantize it, so that an error names the statistics.
    RangeChoice choice;
    try {
      choice = select_range_quant(stats, layer, direction, tensor, chosen, spec, sources.stats_in_messages()).range;
    } catch (const Error& e) {
      throw StatisticsError(e.what());
    }
    log()->debug("quantize: layer {} direction {} {}: range [{}, {}] by {} ({})", layer, direction,
                 gru_tensor_name(tensor), choice.min, choice.max, choice.method, choice.detail);
    return std::pair<double, double>{choice.min, choice.max};
  };
  QuantizedGru quantized;
  try {
    quantized = quantize_gru(model, config, ranges);
  } catch (const StatisticsError&) {
    throw;  // names the statistics and the tensor already
  } catch (const Error& e) {
    throw Error("quantize " + sources.model_in_messages() + " (config " + sources.config_source + "): " + e.what());
  }
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
