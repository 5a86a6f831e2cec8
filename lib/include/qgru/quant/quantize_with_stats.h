#pragma once
// `qgru quantize` as library calls, for the CLI and the Python package alike: the float model, its
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
// something held in memory an empty path and the sha256 of its serialized form. Messages name each input by
// its path, or by its name when it has no path (the Python package's "state dict", "statistics (in memory)").
struct QuantizeSources {
  std::string model_path, model_sha256;
  std::string stats_path, stats_sha256;
  std::string config_source;  // a preset name or a config file's path (as given to load_bitwidth_config)
  std::string model_name, stats_name;
  const std::string& model_in_messages() const { return model_path.empty() ? model_name : model_path; }
  const std::string& stats_in_messages() const { return stats_path.empty() ? stats_name : stats_path; }
};

// What quantize checks before any work (the range search included): statistics of the model's shape
// (check_stats_match_model, naming the statistics) and made from the same weights (require_same_weights:
// stats.model_sha256 against sources.model_sha256; `allow_model_mismatch` warns instead). Then logs the
// precedence note when the config's methods (or range_method) override the statistics'
// (range_method_precedence_note).
void check_quantize_inputs(const FloatGruModel& model, const CalibrationStats& stats, const BitwidthConfig& config,
                           const std::string& range_method, const QuantizeSources& sources,
                           bool allow_model_mismatch);

// The range of a tensor decided elsewhere, asked with its resolved method; nullopt: select_range decides.
using DecidedRange = std::function<std::optional<std::pair<double, double>>(
    int layer, int direction, GruTensor tensor, const std::string& method, const TensorQuant& spec)>;

// Quantizes after check_quantize_inputs. A range the statistics give that cannot be used, or an unknown range
// method, is refused naming the statistics and the tensor (select_range_quant); any other refusal (a weight
// no shift can represent, a table, the overflow proof) as "quantize MODEL (config CONFIG): ...".
QuantizedGru quantize_with_stats(const FloatGruModel& model, const CalibrationStats& stats, const BitwidthConfig& config,
                                 const std::string& range_method, const QuantizeSources& sources,
                                 const DecidedRange& decided = nullptr);

// sha256 of a config's JSON text: the embedded preset's for a preset name, else the file's.
std::string bitwidth_config_sha256(const std::string& name_or_path);

}  // namespace qgru
