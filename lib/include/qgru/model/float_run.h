#pragma once
// `qgru run` on a float model, as one library call: load the weights, read and check x (and h0), run the
// reference executor, write y (and h_n) atomically, and report what was done.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qgru/import/load_float_gru.h"
#include "qgru/model/float_gru.h"

namespace qgru {

struct FloatRunOptions {
  std::string model_path;   // .safetensors (PyTorch nn.GRU or haste layout) or .onnx
  std::string model_prefix; // --prefix / --node: which GRU of the file (qgru/import/load_float_gru.h)
  std::string model_node;
  std::string input_path;   // x: [T, N, C], or [N, T, C] with batch_first (.npy, or .npz[:key])
  std::string output_path;  // y: float32 .npy, [T, N, D*H] or [N, T, D*H]
  std::string h0_path;      // optional h0 [L*D, N, H]
  std::string hn_path;      // optional: write h_n [L*D, N, H] (float32 .npy)
  std::string lengths_path; // optional: sequence lengths [N] (integer .npy), qgru::run_float_gru's lengths
  WeightLayout layout = WeightLayout::Auto;
  bool batch_first = false;
  // When set, this runs the model instead of run_float_gru (the CLI's --device cuda; the library stays free
  // of CUDA), with run_float_gru's contract; device_executor_name is what the summary reports.
  std::function<FloatGruResult(const FloatGruModel& model, const float* x, int T, int N, const float* h0,
                               const int32_t* lengths)>
      device_executor;
  std::string device_executor_name;
};

struct FloatRunSummary {
  std::vector<int64_t> output_shape;
  double mean = 0.0, min = 0.0, max = 0.0;  // over every output value
  double seconds = 0.0;                      // the executor alone (no file I/O)
  int T = 0, N = 0;
  FloatGruModel model;                       // as loaded (sizes, layout)
  std::string executor = "float reference, cpu";  // what ran
};

// Throws qgru::Error (one line naming the file) on any bad input; writes nothing in that case. When hn_path
// is given, y and h_n appear together or not at all.
FloatRunSummary run_float_files(const FloatRunOptions& options);

}  // namespace qgru
