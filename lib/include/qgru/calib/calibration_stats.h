#pragma once
// The calibration statistics artifact: per (layer, direction, observed tensor) statistics of a float GRU run
// over calibration data, with the model's shape and the provenance of the data. Written by
// `qgru calibrate`, merged by `qgru calibrate --merge`, read by `qgru quantize`. Format: docs/CALIBRATION.md.
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/calib/tensor_stats.h"
#include "qgru/gru_tensors.h"

namespace qgru {

constexpr const char* kCalibrationStatsSchema = "qgru.calibration_stats";
constexpr int kCalibrationStatsSchemaVersion = 1;

// Position of `tensor` in kObservedGruTensors, or -1 for a tensor calibration does not observe.
int observed_tensor_index(GruTensor tensor);

struct CalibrationDataFile {
  std::string path;
  std::string sha256;
  int64_t time_steps = 0;  // T
  int64_t sequences = 0;   // N used (after --max-samples)
};

struct CalibrationStats {
  // Model shape (and provenance).
  int num_layers = 0;
  int num_directions = 1;
  int input_size = 0;
  int hidden_size = 0;
  std::string model_path;
  std::string model_sha256;
  // Method: the default for select_range(method = ""), e.g. "minmax", "kl", "percentile:99.9", "mse+pow2".
  std::string method = "minmax";
  bool include_zeros = true;  // whether exact zeros count in histogram-based methods
  std::vector<CalibrationDataFile> data_files;
  // Tensor statistics, index (layer * num_directions + direction) * kObservedGruTensors.size() + position.
  std::vector<TensorStats> tensors;

  // Empty statistics for a model shape (every tensor present, nothing observed yet).
  static CalibrationStats for_shape(int num_layers, int num_directions, int input_size, int hidden_size);

  int64_t total_sequences() const;
  // Throws qgru::Error for a tensor that is not observed or an index out of range.
  const TensorStats& at(int layer, int direction, GruTensor tensor) const;
  TensorStats& at(int layer, int direction, GruTensor tensor);
};

// Reads and validates (schema, version, shapes, every tensor present once, histogram totals equal counts);
// errors are one line naming the file and the entry.
CalibrationStats read_calibration_stats(const std::string& path);
CalibrationStats parse_calibration_stats(const std::string& json_text, const std::string& source);
std::string serialize_calibration_stats(const CalibrationStats& stats);
void write_calibration_stats(const std::string& path, const CalibrationStats& stats);  // atomic

// Refuse stats made for another model shape (layers, directions, C, H), naming the file and the mismatch.
void check_stats_match_model(const CalibrationStats& stats, int num_layers, int num_directions,
                             int input_size, int hidden_size, const std::string& source);

// Shards in order: counts, min/max and histograms equal one pass over all their data (any order, exactly);
// the EMA equals one pass over the shards' data in the given order (up to rounding). Shards must be for the
// same model (shape and, when recorded, weights' sha256); `sources` name them in errors.
CalibrationStats merge_calibration_stats(const std::vector<CalibrationStats>& shards,
                                         const std::vector<std::string>& sources);

}  // namespace qgru
