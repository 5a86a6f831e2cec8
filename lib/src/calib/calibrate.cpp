#include "qgru/calib/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/sha256.h"
#include "qgru/calib/calibration_observer.h"
#include "qgru/calib/range_selection.h"
#include "qgru/io/npy.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/io/sequence_io.h"

namespace qgru {

namespace {

// The array's values as [T, N, C] time-major floats, after checking rank, C and finiteness; `path` names it.
std::vector<float> load_sequences(const Tensor& tensor, const std::string& path, const FloatGruModel& model,
                                  bool batch_first, int& T, int& N) {
  if (tensor.rank() != 3) {
    throw Error(path + ": calibration data has shape " + shape_string(tensor.shape) + ", expected " +
                (batch_first ? "[N, T, C]" : "[T, N, C]") + " with C = " + std::to_string(model.input_size));
  }
  if (tensor.dtype != DType::F32 && tensor.dtype != DType::F64 && tensor.dtype != DType::F16 &&
      tensor.dtype != DType::BF16) {
    throw Error(path + ": calibration data has dtype " + dtype_name(tensor.dtype) + ", expected a float dtype");
  }
  if (tensor.shape[2] != model.input_size) {
    throw Error(path + ": calibration data has C = " + std::to_string(tensor.shape[2]) + " (shape " +
                shape_string(tensor.shape) + "), the model's input_size is " + std::to_string(model.input_size));
  }
  if (tensor.shape[0] == 0 || tensor.shape[1] == 0) {
    throw Error(path + ": calibration data has shape " + shape_string(tensor.shape) +
                ": no sequences to observe (T and N must be at least 1)");
  }
  std::vector<float> values = tensor_to_f32(tensor);
  const int64_t d0 = tensor.shape[0], d1 = tensor.shape[1], C = tensor.shape[2];
  if (d0 > INT32_MAX || d1 > INT32_MAX) throw Error(path + ": calibration data " + shape_string(tensor.shape) + " too large");
  // Position of the first non-finite value, in the file's own axes.
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      const int64_t c = static_cast<int64_t>(i) % C;
      const int64_t b = static_cast<int64_t>(i) / C % d1;
      const int64_t a = static_cast<int64_t>(i) / C / d1;
      const int64_t t = batch_first ? b : a;
      const int64_t n = batch_first ? a : b;
      throw Error(path + ": non-finite value " + std::to_string(values[i]) + " in calibration data x at (t=" +
                  std::to_string(t) + ", n=" + std::to_string(n) + ", c=" + std::to_string(c) + ")");
    }
  }
  if (batch_first) values = swap_first_two_axes(values, d0, d1, C);
  T = static_cast<int>(batch_first ? d1 : d0);
  N = static_cast<int>(batch_first ? d0 : d1);
  return values;
}

// Keep the first `keep` sequences of [T, N, C].
std::vector<float> first_sequences(const std::vector<float>& x, int T, int N, int C, int keep) {
  std::vector<float> kept(static_cast<size_t>(T) * static_cast<size_t>(keep) * static_cast<size_t>(C));
  for (int t = 0; t < T; ++t) {
    std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * N * C), static_cast<size_t>(keep) * C,
                kept.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * keep * C));
  }
  return kept;
}

}  // namespace

std::string calibration_method(const std::string& method, double percentile) {
  RangeMethod parsed = parse_range_method(method);
  if (parsed.name == "percentile" && method.find(':') == std::string::npos) parsed.percentile = percentile;
  return parsed.text();
}

std::vector<std::string> calibration_data_files(const CalibrateOptions& options) {
  std::vector<std::string> files = options.data_paths;
  if (!options.data_dir.empty()) {
    namespace fs = std::filesystem;
    std::error_code error;
    if (!fs::is_directory(options.data_dir, error)) {
      throw Error(options.data_dir + ": --data-dir is not a folder");
    }
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(options.data_dir, error)) {
      if (entry.is_regular_file() && entry.path().extension() == ".npy") found.push_back(entry.path().string());
    }
    if (error) throw Error(options.data_dir + ": cannot list the folder (" + error.message() + ")");
    std::sort(found.begin(), found.end());
    if (found.empty()) throw Error(options.data_dir + ": no *.npy files in the folder");
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) throw Error("no calibration data: give --data FILE or --data-dir DIR");
  return files;
}

void observe_sequences(const FloatGruModel& model, const std::vector<float>& x, int T, int N,
                       const std::string& source, CalibrationStats& stats, const int32_t* lengths) {
  CalibrationObserver observer(stats);
  observer.set_source(source);
  run_float_gru(model, x.data(), T, N, nullptr, &observer, lengths);
}

CalibrationRun::CalibrationRun(const FloatGruModel& model, const CalibrateOptions& options, std::string model_path,
                               std::string model_sha256, size_t expected_arrays)
    : model_(model), options_(options), expected_arrays_(expected_arrays), start_(std::chrono::steady_clock::now()) {
  parse_range_method(options.method);  // refuse an unknown method before any work
  stats_ = CalibrationStats::for_shape(model.num_layers, model.num_directions, model.input_size, model.hidden_size);
  stats_.model_path = std::move(model_path);
  stats_.model_sha256 = std::move(model_sha256);
  stats_.method = options.method;
  stats_.include_zeros = options.include_zeros;
}

bool CalibrationRun::wants_more() const {
  return options_.max_samples <= 0 || sequences_done_ < options_.max_samples;
}

void CalibrationRun::add(const Tensor& values, const std::string& source, const std::string& sha256,
                         const LengthsOf& lengths) {
  int T = 0, N = 0;
  std::vector<float> x = load_sequences(values, source, model_, options_.batch_first, T, N);
  const std::vector<int32_t> sequence_lengths = lengths ? lengths(N, T) : std::vector<int32_t>();
  int used = N;
  if (options_.max_samples > 0 && sequences_done_ + N > options_.max_samples) {
    used = static_cast<int>(std::max<int64_t>(options_.max_samples - sequences_done_, 0));
    x = first_sequences(x, T, N, model_.input_size, used);  // the first `used` lengths stay theirs
  }
  if (T > 0 && used > 0) {
    observe_sequences(model_, x, T, used, source, stats_, sequence_lengths.empty() ? nullptr : sequence_lengths.data());
  }
  stats_.data_files.push_back({source, sha256, T, used});
  sequences_done_ += used;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string arrays = std::to_string(stats_.data_files.size()) +
                             (expected_arrays_ > 0 ? "/" + std::to_string(expected_arrays_) : std::string());
  log()->info("calibrate: {} files, {} sequences ({} of {}: T={}), {:.1f} sequences/s", arrays, sequences_done_, used,
              source, T, seconds > 0 ? static_cast<double>(sequences_done_) / seconds : 0.0);
}

CalibrationStats run_calibration(const CalibrateOptions& options) {
  parse_range_method(options.method);  // refuse an unknown method before any work
  const std::vector<std::string> files = calibration_data_files(options);
  if (!options.lengths_paths.empty() && options.lengths_paths.size() != files.size()) {
    throw Error("--lengths: " + std::to_string(options.lengths_paths.size()) + " lengths file(s) for " +
                std::to_string(files.size()) + " data file(s); give one per data file, in the same order");
  }
  const FloatGruModel model =
      load_float_gru(FloatModelSource{options.model_path, options.layout, options.model_prefix, options.model_node});
  CalibrationRun run(model, options, options.model_path, sha256_file_hex(options.model_path), files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& path = files[f];
    if (!run.wants_more()) {
      log()->info("calibrate: --max-samples {} reached; skipping {} and later files", options.max_samples, path);
      break;
    }
    CalibrationRun::LengthsOf lengths;
    if (!options.lengths_paths.empty()) {
      lengths = [&](int N, int T) { return read_sequence_lengths(options.lengths_paths[f], N, T); };
    }
    run.add(read_array(path), path, sha256_file_hex(array_file_path(path)), lengths);
  }
  return run.stats();
}

}  // namespace qgru
