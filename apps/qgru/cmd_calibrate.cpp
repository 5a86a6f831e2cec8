// qgru calibrate: run the float model over calibration data and write the statistics (qgru/calib/calibrate.h),
// or merge statistics of shards (--merge). Prints a table of the chosen range and shift per tensor on stdout,
// for the int8 preset of seed 001 Appendix A (sigmoid outputs u8, new_gate_output i8 symmetric, others i8).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/calib/calibrate.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/calib/range_selection.h"
#include "qgru/quant/tensor_quant.h"
#include "subcommand.h"

namespace {

struct CalibrateCli {
  qgru::CalibrateOptions options;
  std::string layout = "auto";
  double percentile = 99.99;
  bool exclude_zeros = false;
  std::vector<std::string> merge;
  std::string output;
};

qgru::TensorQuant int8_preset(qgru::GruTensor tensor) {
  qgru::TensorQuant spec;
  spec.bits = 8;
  spec.is_unsigned = tensor == qgru::GruTensor::update_gate_output || tensor == qgru::GruTensor::reset_gate_output;
  spec.symmetric = tensor == qgru::GruTensor::new_gate_output;
  return spec;
}

void print_range_table(const qgru::CalibrationStats& stats) {
  std::printf("%-5s %-3s %-18s %12s %12s %12s %-22s %12s %12s %-6s %6s %5s\n", "layer", "dir", "tensor", "count",
              "min", "max", "method", "range_min", "range_max", "type", "shift", "zp");
  for (int layer = 0; layer < stats.num_layers; ++layer) {
    for (int direction = 0; direction < stats.num_directions; ++direction) {
      for (qgru::GruTensor tensor : qgru::kObservedGruTensors) {
        const qgru::TensorStats& t = stats.at(layer, direction, tensor);
        const char* name = qgru::gru_tensor_name(tensor);
        if (t.count == 0) {
          std::printf("%-5d %-3d %-18s %12s (not observed)\n", layer, direction, name, "0");
          continue;
        }
        const qgru::TensorQuant spec = int8_preset(tensor);
        const qgru::RangeChoice choice = qgru::select_range(stats, layer, direction, tensor, "", spec);
        const qgru::RangeQuantResult quant =
            qgru::quant_from_range(choice.min, choice.max, spec.bits, spec.is_unsigned, spec.symmetric);
        const std::string type = std::string(spec.is_unsigned ? "u" : "i") + "8" + (spec.symmetric ? "s" : "");
        std::printf("%-5d %-3d %-18s %12llu %12.6g %12.6g %-22s %12.6g %12.6g %-6s %6d %5d\n", layer, direction, name,
                    static_cast<unsigned long long>(t.count), t.min, t.max, choice.method.c_str(), choice.min,
                    choice.max, type.c_str(), quant.quant.shift, quant.quant.zp);
        qgru::log()->debug("layer {} direction {} {}: {}", layer, direction, name, choice.detail);
      }
    }
  }
}

std::function<int()> setup_calibrate(CLI::App& command) {
  auto cli = std::make_shared<CalibrateCli>();
  auto& options = cli->options;
  auto* model = command.add_option("--model", options.model_path, "Float GRU weights (.safetensors)")
                    ->check(CLI::ExistingFile);
  auto* data = command.add_option("--data", options.data_paths,
                                  "Calibration data (.npy/.npz), each [T, N, C]; repeatable")
                   ->check(CLI::ExistingFile);
  auto* data_dir = command.add_option("--data-dir", options.data_dir, "Every *.npy in this folder, sorted by name")
                       ->check(CLI::ExistingDirectory);
  auto* method = command.add_option("--method", options.method,
                                    "Default range method stored in the statistics: minmax, ema, kl, percentile, "
                                    "mse, bounds (optionally +pow2)")
                     ->capture_default_str();
  auto* percentile = command.add_option("--percentile", cli->percentile, "Percentile for --method percentile")
                         ->check(CLI::Range(0.0, 100.0))->capture_default_str();
  auto* max_samples = command.add_option("--max-samples", options.max_samples,
                                         "Use at most this many sequences in all (0: all)")
                          ->check(CLI::NonNegativeNumber);
  auto* batch_first = command.add_flag("--batch-first", options.batch_first, "Data files are [N, T, C]");
  auto* layout = command.add_option("--layout", cli->layout, "Weight layout of --model")
                     ->check(CLI::IsMember({"auto", "pytorch", "haste"}))->capture_default_str();
  auto* exclude_zeros = command.add_flag("--exclude-zeros", cli->exclude_zeros,
                                         "Histogram-based methods ignore exact zeros");
  auto* merge = command.add_option("--merge", cli->merge,
                                   "Merge statistics files (shards of one model) instead of running the model")
                    ->check(CLI::ExistingFile)->expected(1, -1);
  command.add_option("-o,--output", cli->output, "Output statistics (.json)")->required();
  for (CLI::Option* option : {model, data, data_dir, method, percentile, max_samples, batch_first, layout, exclude_zeros}) {
    merge->excludes(option);
  }
  return [cli]() {
    if (!cli->merge.empty()) {
      std::vector<qgru::CalibrationStats> shards;
      for (const auto& path : cli->merge) shards.push_back(qgru::read_calibration_stats(path));
      const qgru::CalibrationStats merged = qgru::merge_calibration_stats(shards, cli->merge);
      qgru::write_calibration_stats(cli->output, merged);
      qgru::log()->info("calibrate: merged {} statistics files ({} sequences) into {}", shards.size(),
                        merged.total_sequences(), cli->output);
      print_range_table(merged);
      return qgru::kExitOk;
    }
    auto& opts = cli->options;
    if (opts.model_path.empty()) throw qgru::Error("calibrate: give --model (or --merge FILES)");
    opts.layout = qgru::parse_weight_layout(cli->layout);
    opts.include_zeros = !cli->exclude_zeros;
    qgru::RangeMethod parsed = qgru::parse_range_method(opts.method);
    if (parsed.name == "percentile" && opts.method.find(':') == std::string::npos) parsed.percentile = cli->percentile;
    opts.method = parsed.text();
    const qgru::CalibrationStats stats = qgru::run_calibration(opts);
    qgru::write_calibration_stats(cli->output, stats);
    qgru::log()->info("calibrate: wrote {} ({} files, {} sequences, method {})", cli->output, stats.data_files.size(),
                      stats.total_sequences(), stats.method);
    print_range_table(stats);
    return qgru::kExitOk;
  };
}

}  // namespace

QGRU_SUBCOMMAND("calibrate", "Observe a float GRU on calibration data: per-tensor ranges and histograms (mergeable)",
                10, setup_calibrate);
