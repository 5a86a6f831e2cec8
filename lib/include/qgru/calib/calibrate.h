#pragma once
// `qgru calibrate` as one library call: run the float model over calibration data files and collect the
// statistics (calibration_stats.h).
#include <cstdint>
#include <string>
#include <vector>

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

// data_paths followed by the sorted *.npy files of data_dir; refuses an empty result and a missing folder.
std::vector<std::string> calibration_data_files(const CalibrateOptions& options);

// Runs the model over every data file in order (one float GRU run per file: EMA steps are (file, t)).
// Errors name the file: wrong rank or C, NaN/Inf with its (t, n, c). Logs one line per file on stderr
// (files done, sequences, rate).
CalibrationStats run_calibration(const CalibrateOptions& options);

// Observe one [T, N, C] time-major array (already checked finite) into `stats` with `model`.
// lengths: [N] or nullptr (qgru::run_float_gru); padded steps are not observed.
void observe_sequences(const FloatGruModel& model, const std::vector<float>& x, int T, int N,
                       const std::string& source, CalibrationStats& stats, const int32_t* lengths = nullptr);

}  // namespace qgru
