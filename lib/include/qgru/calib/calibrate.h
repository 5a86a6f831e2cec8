#pragma once
// `qgru calibrate` as one library call: run the float model over calibration data files and collect the
// statistics (calibration_stats.h).
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/model/float_gru.h"

namespace qgru {

struct CalibrateOptions {
  std::string model_path;               // .safetensors or .onnx (qgru/import/load_float_gru.h)
  std::string model_prefix;             // --prefix: one GRU of a full state dict
  std::string model_node;               // --node: one GRU stack of an ONNX graph
  std::vector<std::string> data_paths;  // .npy/.npz files, each [T, N, C] ([N, T, C] with batch_first)
  std::string data_dir;                 // every *.npy in it, sorted by name, after data_paths
  std::vector<std::string> lengths_paths;  // empty, or one [N] lengths file per data file, in order
  std::string method = "ema";           // the statistics' default method (range_selection.h); the per-step EMA
  bool include_zeros = true;
  int64_t max_samples = 0;              // sequences in all (the first ones, file by file); 0: no limit
  bool batch_first = false;
  WeightLayout layout = WeightLayout::Auto;
};

// The statistics' method as `qgru calibrate --method M --percentile P` gives it: M in canonical form, with P
// filled in when M is "percentile" without its own ":P" (unknown methods are refused).
std::string calibration_method(const std::string& method, double percentile);

// data_paths followed by the sorted *.npy files of data_dir; refuses an empty result and a missing folder.
std::vector<std::string> calibration_data_files(const CalibrateOptions& options);

// Runs the model over every data file in order (one float GRU run per file: EMA steps are (file, t)).
// Errors name the file: wrong rank or C, NaN/Inf with its (t, n, c). Logs one line per file on stderr
// (files done, sequences, rate).
CalibrationStats run_calibration(const CalibrateOptions& options);

// Calibration fed one array at a time, in order: a file's contents (run_calibration) or arrays a caller holds
// in memory (the Python package). Each array is checked as a data file is (rank, C, float dtype, finite
// values; errors name `source`), observed, and recorded in the statistics' data files with its sha256 and the
// sequences used; max_samples keeps the first sequences, array by array. options.model_path, data_paths and
// data_dir are not used here: the model is given, and model_path / model_sha256 are what the statistics record.
class CalibrationRun {
 public:
  // expected_arrays: how many add() calls to expect, for the progress log (0: unknown).
  CalibrationRun(const FloatGruModel& model, const CalibrateOptions& options, std::string model_path,
                 std::string model_sha256, size_t expected_arrays = 0);
  // False once max_samples sequences were observed: later arrays would add nothing.
  bool wants_more() const;
  // lengths, when given, is asked for the array's [N] sequence lengths once its data passed the checks (a
  // lengths file read against that N and T, e.g.); padded steps are not observed.
  using LengthsOf = std::function<std::vector<int32_t>(int N, int T)>;
  void add(const Tensor& values, const std::string& source, const std::string& sha256,
           const LengthsOf& lengths = nullptr);
  const CalibrationStats& stats() const { return stats_; }

 private:
  const FloatGruModel& model_;
  CalibrateOptions options_;
  size_t expected_arrays_ = 0;
  int64_t sequences_done_ = 0;
  std::chrono::steady_clock::time_point start_;
  CalibrationStats stats_;
};

// Observe one [T, N, C] time-major array (already checked finite) into `stats` with `model`.
// lengths: [N] or nullptr (qgru::run_float_gru); padded steps are not observed.
void observe_sequences(const FloatGruModel& model, const std::vector<float>& x, int T, int N,
                       const std::string& source, CalibrationStats& stats, const int32_t* lengths = nullptr);

}  // namespace qgru
