#pragma once
// `qgru quantize` as one library call, for the CLI and the Python package alike: the float model, its
// calibration statistics and a bit-width config in, the quantized model (proven free of overflow) out, with
// the provenance the artifact records. The range of every observed tensor is select_range's on the
// statistics with the method that applies to it (resolved_range_method: `range_method` when given, else the
// config's for that tensor, else the statistics' default), unless `decided` gives it: the range search
// (qgru/search/range_search.h, which builds on this area) decides the tensors whose method is "search".
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "qgru/calib/calibration_stats.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

// Where the inputs came from, as the artifact's provenance records them: a file's path and sha256, or for
// something held in memory a name and the sha256 of its serialized form.
struct QuantizeSources {
  std::string model_path, model_sha256;
  std::string stats_path, stats_sha256;
  std::string config_source;  // a preset name or a config file's path (as given to load_bitwidth_config)
};

// The range of a tensor decided elsewhere, asked with its resolved method; nullopt: select_range decides.
using DecidedRange = std::function<std::optional<std::pair<double, double>>(
    int layer, int direction, GruTensor tensor, const std::string& method, const TensorQuant& spec)>;

// Refuses statistics of another model shape (naming sources.stats_path), an unknown range method, and a config
// that could overflow (quantize_gru's proof). Logs the precedence note when the config's methods (or
// range_method) override the statistics' (range_method_precedence_note).
QuantizedGru quantize_with_stats(const FloatGruModel& model, const CalibrationStats& stats, const BitwidthConfig& config,
                                 const std::string& range_method, const QuantizeSources& sources,
                                 const DecidedRange& decided = nullptr);

// sha256 of a config's JSON text: the embedded preset's for a preset name, else the file's.
std::string bitwidth_config_sha256(const std::string& name_or_path);

}  // namespace qgru
