// qgru calibrate: run the float model over calibration data and write the statistics (qgru/calib/calibrate.h),
// or merge statistics of shards (--merge). Prints a table of the chosen range and shift per tensor on stdout (x's
// range is the layer's, shared by its directions, as quantize makes it),
// under the bit widths of --config (default the int8 preset: sigmoid outputs u8,
// new_gate_output i8 symmetric, others i8). --html writes the calibration report
// (qgru/verify/calibration_report.h); `--merge stats.json --html r.html` makes it from existing statistics.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/output_policy.h"
#include "qgru/calib/calibrate.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/calib/range_selection.h"
#include "qgru/io/npy.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/base/tensor_quant.h"
#include "qgru/verify/calibration_report.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/range_method_precedence.h"
#include "model_options.h"
#include "shared_checks.h"
#include "subcommand.h"

namespace {

struct CalibrateCli {
  qgru::CalibrateOptions options;
  std::string layout = "auto";
  double percentile = 99.99;
  bool exclude_zeros = false;
  std::vector<std::string> merge;
  std::string output;
  std::string html;
  std::string config = "int8";
};

// "a.npy", or "a.npy (and 3 more)": where the statistics came from, for messages.
std::string sources_text(const std::vector<std::string>& sources) {
  if (sources.empty()) return "the statistics";
  return sources.front() + (sources.size() > 1 ? " (and " + std::to_string(sources.size() - 1) + " more)" : "");
}

// The table of the chosen range and shift per tensor, made in full before anything is written or printed:
// a range that the config's bit widths cannot represent is an error (naming `source` and the tensor), and then
// no statistics file is written and no row reaches stdout.
std::string range_table(const qgru::CalibrationStats& stats, const qgru::BitwidthConfig& config,
                        const std::string& source) {
  std::string text;
  auto row = [&text](const char* format, auto... values) {
    char line[512];
    std::snprintf(line, sizeof line, format, values...);
    text += line;
  };
  row("%-5s %-3s %-18s %12s %12s %12s %-22s %12s %12s %-6s %6s %5s\n", "layer", "dir", "tensor", "count", "min", "max",
      "method", "range_min", "range_max", "type", "shift", "zp");
  for (int layer = 0; layer < stats.num_layers; ++layer) {
    for (int direction = 0; direction < stats.num_directions; ++direction) {
      for (qgru::GruTensor tensor : qgru::kObservedGruTensors) {
        const qgru::TensorStats& t = stats.at(layer, direction, tensor);
        const char* name = qgru::gru_tensor_name(tensor);
        if (t.count == 0) {
          row("%-5d %-3d %-18s %12s (not observed)\n", layer, direction, name, "0");
          continue;
        }
        const qgru::TensorQuant spec = config.spec(tensor);
        // x: the layer's one space, both directions' ranges together (docs/FIXED_POINT.md §5), as quantize makes it.
        const qgru::RangeQuantChoice chosen =
            tensor == qgru::GruTensor::x ? qgru::select_layer_x_range_quant(stats, layer, "", spec, source)
                                         : qgru::select_range_quant(stats, layer, direction, tensor, "", spec, source);
        const qgru::RangeChoice& choice = chosen.range;
        const qgru::RangeQuantResult& quant = chosen.quant;
        const std::string type =
            std::string(spec.is_unsigned ? "u" : "i") + std::to_string(spec.bits) + (spec.symmetric ? "s" : "");
        row("%-5d %-3d %-18s %12llu %12.6g %12.6g %-22s %12.6g %12.6g %-6s %6d %5d\n", layer, direction, name,
            static_cast<unsigned long long>(t.count), t.min, t.max, choice.method.c_str(), choice.min, choice.max,
            type.c_str(), quant.quant.shift, quant.quant.zp);
        qgru::log()->debug("layer {} direction {} {}: {}", layer, direction, name, choice.detail);
      }
    }
  }
  return text;
}

// The statistics (-o) and the report (--html) appear together or not at all.
// `made_from` names the data (or the merged statistics) in messages.
void write_outputs(const CalibrateCli& cli, const qgru::CalibrationStats& stats, const qgru::BitwidthConfig& config,
                   const std::vector<std::string>& sources, const std::vector<std::string>& made_from) {
  const std::string table = range_table(stats, config, sources_text(made_from));
  std::string html;
  if (!cli.html.empty()) {
    qgru::CalibrationReportOptions options;
    options.stats_sources = sources;
    options.config_source = cli.config;
    options.config = &config;
    html = qgru::calibration_report_html(stats, options);
  }
  qgru::AtomicFileGroup group;
  if (!cli.output.empty()) group.add(cli.output).write(qgru::serialize_calibration_stats(stats));
  if (!cli.html.empty()) group.add(cli.html).write(html);
  group.commit_all();
  if (!cli.html.empty()) qgru::log()->info("calibrate: report written to {} ({} bytes)", cli.html, html.size());
  std::fputs(table.c_str(), stdout);
}

std::function<int()> setup_calibrate(CLI::App& command) {
  auto cli = std::make_shared<CalibrateCli>();
  auto& options = cli->options;
  auto* model = command.add_option("--model", options.model_path, "Float GRU (.safetensors or .onnx)")
                    ->check(CLI::ExistingFile);
  qgru::cli::add_model_selection_options(command, options.model_prefix, options.model_node);
  auto* lengths = command.add_option("--lengths", options.lengths_paths,
                                     "Sequence lengths [N] (integer .npy) of each --data file, in the same order; "
                                     "padded steps are not observed")
                      ->check(CLI::ExistingFile);
  auto* data = command.add_option("--data", options.data_paths,
                                  "Calibration data (.npy/.npz), each [T, N, C]; repeatable")
                   ->check(CLI::ExistingFile);
  auto* data_dir = command.add_option("--data-dir", options.data_dir, "Every *.npy in this folder, sorted by name")
                       ->check(CLI::ExistingDirectory);
  auto* method = command.add_option("--method", options.method,
                                    "Default range method stored in the statistics: minmax, ema, kl, percentile, "
                                    "mse, bounds (optionally +pow2). At quantize time the config's range methods "
                                    "win over it (the int8 preset names ema, the 16-bit presets minmax+pow2) and "
                                    "quantize --range-method over both; quantize logs the methods it uses")
                     ->capture_default_str();
  auto* percentile = command.add_option("--percentile", cli->percentile, "Percentile for --method percentile")
                         ->check(qgru::cli::finite_number())
                         ->check(CLI::Validator(
                             [](const std::string& text) {
                               // The percentile method takes (50, 100] (range_selection.h): anything else would
                               // be refused later, as bad input.
                               double value = 0.0;
                               if (!CLI::detail::lexical_cast(text, value) || !(value > 50.0 && value <= 100.0)) {
                                 return "expected a number in (50, 100], got '" + text + "'";
                               }
                               return std::string();
                             },
                             "(50, 100]"))
                         ->capture_default_str();
  auto* max_samples = command.add_option("--max-samples", options.max_samples,
                                         "Use at most this many sequences in all (0: all)")
                          ->check(qgru::cli::int64_number())
                          ->check(qgru::cli::non_negative_number());
  auto* batch_first = command.add_flag("--batch-first", options.batch_first, "Data files are [N, T, C]");
  auto* layout = command.add_option("--layout", cli->layout, "Weight layout of --model")
                     ->check(CLI::IsMember({"auto", "pytorch", "haste"}))->capture_default_str();
  auto* exclude_zeros = command.add_flag("--exclude-zeros", cli->exclude_zeros,
                                         "Histogram-based methods ignore exact zeros");
  auto* merge = command.add_option("--merge", cli->merge,
                                   "Merge statistics files (shards of one model) instead of running the model; "
                                   "with one file and --html, make its report")
                    ->check(CLI::ExistingFile)->expected(1, -1);
  command.add_option("-o,--output", cli->output,
                     "Output statistics (.json); required except with --merge STATS --html REPORT");
  command.add_option("--html", cli->html,
                     "Also write the calibration report: per-tensor histograms and the range, grid and error of "
                     "every range method (.html)");
  command.add_option("--config", cli->config,
                     "Bit-width config for the range table and the report: a preset (int8, int16-activations, "
                     "int16) or a JSON file")
      ->capture_default_str();
  command.footer(
      "Results go to stdout: one row per observed tensor of every layer and direction (count, min, max, the range "
      "the statistics' method chooses and its shift and zero point under --config's widths). x is one space per "
      "layer, shared by its directions: its rows show the range of both directions together, as quantize makes it. "
      "Logs and progress go to stderr.\n"
      "Examples:\n"
      "  qgru calibrate --model gru.safetensors --data calib.npy -o stats.json\n"
      "  qgru calibrate --merge shard0.json shard1.json -o stats.json --html calibration.html");
  // -o may be left out only when the statistics exist already and the report is all that is asked for.
  command.parse_complete_callback([cli] {
    if (cli->output.empty() && (cli->merge.empty() || cli->html.empty())) {
      throw CLI::RequiredError("--output is required (only --merge STATS --html REPORT may leave it out)",
                               CLI::ExitCodes::RequiredError);
    }
  });
  for (CLI::Option* option : {model, data, data_dir, method, percentile, max_samples, batch_first, layout, exclude_zeros, lengths}) {
    merge->excludes(option);
  }
  return [cli]() {
    std::vector<qgru::CommandFile> inputs = {{"--config", qgru::bitwidth_config_file(cli->config)}};
    if (!cli->options.model_path.empty()) qgru::add_model_input(inputs, "--model", cli->options.model_path);
    for (const auto& path : cli->merge) inputs.push_back({"--merge", path});
    for (const auto& path : cli->options.data_paths) inputs.push_back({"--data", qgru::array_file_path(path)});
    for (const auto& path : cli->options.lengths_paths) inputs.push_back({"--lengths", qgru::array_file_path(path)});
    if (!cli->options.data_dir.empty()) {
      for (const auto& path : qgru::calibration_data_files(cli->options)) inputs.push_back({"--data-dir", path});
    }
    qgru::check_command_files(inputs, {{"-o", cli->output}, {"--html", cli->html}});
    const qgru::BitwidthConfig config = qgru::load_bitwidth_config(cli->config);
    if (!cli->merge.empty()) {
      std::vector<qgru::CalibrationStats> shards;
      for (const auto& path : cli->merge) shards.push_back(qgru::read_calibration_stats(path));
      const qgru::CalibrationStats merged = qgru::merge_calibration_stats(shards, cli->merge);
      write_outputs(*cli, merged, config, cli->merge, cli->merge);
      if (!cli->output.empty()) {
        qgru::log()->info("calibrate: merged {} statistics files ({} sequences) into {}", shards.size(),
                          merged.total_sequences(), cli->output);
      }
      return qgru::kExitOk;
    }
    auto& opts = cli->options;
    if (opts.model_path.empty()) throw qgru::Error("calibrate: give --model (or --merge FILES)");
    opts.layout = qgru::parse_weight_layout(cli->layout);
    opts.include_zeros = !cli->exclude_zeros;
    opts.method = qgru::calibration_method(opts.method, cli->percentile);
    const qgru::CalibrationStats stats = qgru::run_calibration(opts);
    std::vector<std::string> data_files;
    for (const auto& file : stats.data_files) data_files.push_back(file.path);
    write_outputs(*cli, stats, config, {cli->output}, data_files);
    qgru::log()->info("calibrate: wrote {} ({} files, {} sequences, method {})", cli->output, stats.data_files.size(),
                      stats.total_sequences(), stats.method);
    const std::string note = qgru::range_method_precedence_note(config, "", stats.method);
    if (!note.empty()) qgru::log()->info("calibrate: quantize --config {} will use {}", cli->config, note.substr(note.find(':') + 2));
    return qgru::kExitOk;
  };
}

}  // namespace

QGRU_SUBCOMMAND("calibrate", "Observe a float GRU on calibration data: per-tensor ranges and histograms (mergeable)",
                10, setup_calibrate);
