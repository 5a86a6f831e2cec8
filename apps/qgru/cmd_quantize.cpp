// qgru quantize: float GRU weights + calibration statistics + bit-width config -> the quantized-model
// artifact (model.qgru.json + model.qgru.safetensors). The float range of every observed tensor comes from
// the statistics (select_range with the config's range method for that tensor), or, for the range method
// `search`, from the range search on calibration data (qgru/search/range_search.h); quantize_gru derives
// every shift and table and proves that no intermediate can overflow before anything is written.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/output_policy.h"
#include "qgru/base/sha256.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/runtime/overflow_check.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/quant/quantize_with_stats.h"
#include "qgru/quant/scale_choice.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/artifact_write.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/io/strict_json.h"
#include "qgru/search/range_search.h"
#include "qgru/verify/calibration_report.h"
#include "model_options.h"
#include "shared_checks.h"
#include "subcommand.h"

namespace {

struct QuantizeCli {
  std::string model;
  std::string stats;
  std::string config = "int8";
  std::string output;
  std::string layout = "auto";
  std::string prefix, node;  // which GRU of the model file
  std::string range_method;  // empty: per tensor from the config, else the statistics
  std::string scales;        // empty: the config's; pow2 or multiplier (qgru/quant/scale_choice.h)
  bool allow_model_mismatch = false;
  // The range search (range method "search"): its data, budget and outputs.
  std::vector<std::string> data;  // empty: the statistics' own data files
  bool batch_first = false;
  qgru::RangeSearchOptions search;
  std::string suggest_config;
  std::string html;
  bool json = false;  // --json: the results as one JSON object on stdout instead of the table
};

// Every file quantize writes: the artifact's two, the suggested config and the report.
std::vector<qgru::CommandFile> quantize_outputs(const QuantizeCli& cli) {
  return {{"-o", cli.output}, {"-o (its tensor file)", qgru::artifact_tensor_path(cli.output)},
          {"--suggest-config", cli.suggest_config}, {"--html", cli.html}};
}

// The search's calibration data: --data, else the files the statistics record (found as recorded, or beside
// the statistics file, and checked against their sha256).
std::vector<qgru::SequenceBatch> search_data(const QuantizeCli& cli, const qgru::CalibrationStats& stats, int input_size) {
  std::vector<qgru::SequenceBatch> batches;
  if (!cli.data.empty()) {
    for (const std::string& path : cli.data) batches.push_back(qgru::read_sequence_input(path, input_size, cli.batch_first));
    return batches;
  }
  if (stats.data_files.empty()) {
    throw qgru::Error("range method 'search' needs calibration data: " + cli.stats + " records no data file; give --data");
  }
  const std::filesystem::path stats_folder = std::filesystem::path(cli.stats).parent_path();
  for (const qgru::CalibrationDataFile& file : stats.data_files) {
    std::string path = file.path;
    if (!std::filesystem::exists(path)) {
      const std::filesystem::path beside = stats_folder / std::filesystem::path(file.path).filename();
      if (!std::filesystem::exists(beside)) {
        throw qgru::Error("range method 'search' needs calibration data: " + file.path + " (recorded in " + cli.stats +
                          ") is not found; give --data");
      }
      path = beside.string();
    }
    qgru::check_command_files({{"--stats (a data file it records)", path}}, quantize_outputs(cli));  // read, so never written
    if (!file.sha256.empty() && qgru::sha256_file_hex(path) != file.sha256) {
      throw qgru::Error("range method 'search': " + path + " is not the file " + cli.stats +
                        " was calibrated on (sha256 differs); give --data");
    }
    // The statistics do not record the layout: --batch-first applies to the recorded files too.
    batches.push_back(qgru::read_sequence_input(path, input_size, cli.batch_first));
    qgru::log()->info("quantize: range search data {} (recorded in {})", path, cli.stats);
  }
  return batches;
}

// The results on stdout, after the files are written: the parameter table (every cell's tensors, rescale shifts
// and activations), the overflow proof's least headroom and one summary line last; or, with --json, one JSON
// object with the same content (the artifact's own keys, qgru/quant/artifact_write.h).
void print_results(const QuantizeCli& cli, const qgru::BitwidthConfig& config, const qgru::QuantizedGru& quantized) {
  const qgru::OverflowProof proof = qgru::prove_no_overflow(quantized);
  const std::vector<const qgru::OverflowCheck*> tightest = proof.tightest_checks(4);
  const std::string tensor_path = qgru::artifact_tensor_path(cli.output);
  if (cli.json) {
    nlohmann::json out = qgru::artifact_parameters_json(quantized);
    out["artifact"] = cli.output;
    out["tensor_file"] = tensor_path;
    out["config"] = config.name;
    nlohmann::json least = nlohmann::json::array();
    for (const qgru::OverflowCheck* c : tightest) {
      least.push_back({{"layer", c->layer}, {"direction", c->direction}, {"intermediate", c->intermediate},
                       {"type", c->type}, {"log2_bound", c->log2_bound}, {"log2_limit", c->log2_limit}});
    }
    out["overflow_proof"]["tightest"] = least;
    std::fputs((qgru::json_text(out, 2) + "\n").c_str(), stdout);
    return;
  }
  std::printf("%s", qgru::describe_quantized_gru(quantized).c_str());
  std::printf("overflow proof: %zu checks passed; the least headroom:\n%s", proof.checks.size(),
              proof.tightest(static_cast<int>(tightest.size())).c_str());
  std::printf("wrote %s and %s: config '%s', %d layer(s) x %d direction(s), C=%d, H=%d, int8 GEMM %s\n",
              cli.output.c_str(), tensor_path.c_str(), config.name.c_str(), quantized.num_layers,
              quantized.num_directions, quantized.input_size, quantized.hidden_size,
              qgru::gemm_operands_fit_int8(quantized) ? "possible" : "not possible (an operand is wider than 8 bits)");
}

int run_quantize(const QuantizeCli& cli) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<qgru::CommandFile> inputs = {{"--stats", cli.stats}, {"--config", qgru::bitwidth_config_file(cli.config)}};
  qgru::add_model_input(inputs, "--model", cli.model);
  for (const std::string& path : cli.data) inputs.push_back({"--data", qgru::array_file_path(path)});
  qgru::check_command_files(inputs, quantize_outputs(cli));
  qgru::BitwidthConfig config = qgru::load_bitwidth_config(cli.config);
  if (!cli.scales.empty()) {
    const bool preset = qgru::bitwidth_config_file(cli.config).empty();
    const std::string note =
        qgru::apply_scale_choice(config, qgru::parse_scale_choice(cli.scales, "--scales"), preset);
    if (!note.empty()) qgru::log()->info("quantize: {}", note);
  }
  const qgru::FloatGruModel model = qgru::load_float_gru(
      qgru::FloatModelSource{cli.model, qgru::parse_weight_layout(cli.layout), cli.prefix, cli.node});
  const qgru::CalibrationStats stats = qgru::read_calibration_stats(cli.stats);
  const qgru::QuantizeSources sources{cli.model,  qgru::sha256_file_hex(cli.model), cli.stats,
                                      qgru::sha256_file_hex(cli.stats), cli.config, cli.model, cli.stats};
  qgru::check_quantize_inputs(model, stats, config, cli.range_method, sources, cli.allow_model_mismatch);

  std::optional<qgru::RangeSearchResult> search;
  if (!qgru::range_search_tensors(config, cli.range_method, stats.method).empty()) {
    const std::vector<qgru::SequenceBatch> data = search_data(cli, stats, model.input_size);
    search = qgru::search_ranges(model, config, stats, data, cli.range_method, cli.search,
                                 [](const std::string& line) { qgru::log()->info("quantize: {}", line); });
    const std::string summary = qgru::range_search_summary(*search);
    for (size_t begin = 0; begin < summary.size();) {
      const size_t end = std::min(summary.find('\n', begin), summary.size());
      qgru::log()->info("quantize: {}", summary.substr(begin, end - begin));
      begin = end + 1;
    }
  } else if (!cli.data.empty() || !cli.suggest_config.empty()) {
    throw qgru::Error("--data and --suggest-config belong to the range method 'search', which no tensor uses here");
  }
  const qgru::QuantizedGru quantized =
      qgru::quantize_with_stats(model, stats, config, cli.range_method, sources, qgru::searched_ranges(search));

  // Everything is computed before the first file is written.
  nlohmann::json provenance_extra = nlohmann::json::object();
  if (search) provenance_extra["range_search"] = qgru::range_search_json(*search, cli.search);
  std::string suggestion_text;
  if (!cli.suggest_config.empty()) {
    const qgru::WideningResult* best = search->best_widening();
    if (best == nullptr) {
      throw qgru::Error("--suggest-config " + cli.suggest_config +
                        ": no single tensor widened to 16 bits improves the output here; nothing to suggest");
    }
    nlohmann::json suggested = qgru::bitwidth_config_to_json(best->config);
    suggested["description"] = "The config '" + config.name + "' with " + qgru::gru_tensor_name(best->tensor) +
                               fmt::format(" at 16 bits: the range search measured {:+.2f} dB output SQNR ({:.2f} dB) "
                                           "on the held-in calibration sequences.", best->gain_db, best->sqnr_db);
    suggestion_text = qgru::json_text(suggested, 2) + "\n";
  }
  std::string html;
  if (!cli.html.empty()) {
    qgru::CalibrationReportOptions report;
    report.stats_sources = {cli.stats};
    report.config_source = cli.config;
    report.config = &config;
    report.range_method = cli.range_method;
    if (search) report.range_search = &*search;
    html = qgru::calibration_report_html(stats, report);
  }

  qgru::AtomicFileGroup outputs;  // the artifact, the suggested config and the report: all of them or none
  qgru::stage_artifact(outputs, cli.output, quantized, provenance_extra);
  if (!cli.suggest_config.empty()) outputs.add(cli.suggest_config).write(suggestion_text);
  if (!cli.html.empty()) outputs.add(cli.html).write(html);
  outputs.commit_all();
  if (!cli.suggest_config.empty()) qgru::log()->info("quantize: suggested config written to {}", cli.suggest_config);
  if (!cli.html.empty()) qgru::log()->info("quantize: calibration report written to {}", cli.html);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  qgru::log()->info("quantize: wrote {} and {} in {:.2f} s", cli.output, qgru::artifact_tensor_path(cli.output), seconds);
  print_results(cli, config, quantized);
  return qgru::kExitOk;
}

std::function<int()> setup_quantize(CLI::App& command) {
  auto cli = std::make_shared<QuantizeCli>();
  command.add_option("--model", cli->model, "Float GRU (.safetensors or .onnx)")->required()->check(CLI::ExistingFile);
  qgru::cli::add_model_selection_options(command, cli->prefix, cli->node);
  command.add_option("--stats", cli->stats, "Calibration statistics from 'qgru calibrate' (.json)")
      ->required()
      ->check(CLI::ExistingFile);
  command.add_option("--config", cli->config,
                     "Bit-width config: a preset (int8, int16-activations, int16) or a JSON file")
      ->capture_default_str();
  command.add_option("--scales", cli->scales,
                     "Scale kind of every tensor: pow2 (powers of two: every rescale a shift, for shift-only integer "
                     "hardware) or multiplier (exact scales: every rescale a 32-bit multiplier and a shift, for CPUs and "
                     "GPUs); default: the config's (the presets: pow2). With multiplier, tensors whose range method "
                     "nobody named (a preset's, the statistics') get ranges that fit exact scales: percentile:99.9 up "
                     "to 8 bits, minmax wider (the EMA ranges the int8 preset names clip, which powers of two hide)")
      ->check(CLI::IsMember({"pow2", "multiplier"}));
  command.add_option("--range-method", cli->range_method,
                     "Range method for every observed tensor, overriding the config's (minmax, ema, kl, "
                     "percentile[:P], mse, bounds, each optionally +pow2, or search); default: the config's method per "
                     "tensor, else the one stored by 'qgru calibrate --method'. Precedence: --range-method > the "
                     "config's methods > the statistics' method (a log line names the methods used when the config's "
                     "override the statistics'). search: ranges chosen by the quantized model's output error on "
                     "calibration data, by coordinate descent over tensors from the best single method "
                     "(docs/CALIBRATION.md)");
  command.add_option("--data", cli->data,
                     "search: calibration data [T, N, C] (.npy/.npz), repeatable; default: the files the statistics "
                     "were made from")
      ->check(CLI::ExistingFile);
  command.add_flag("--batch-first", cli->batch_first,
                   "search: the data files (--data, or those the statistics record) are [N, T, C]");
  command.add_option("--search-sequences", cli->search.max_sequences,
                     "search: score on the first N calibration sequences (the held-in subset)")
      ->check(qgru::cli::positive_number())
      ->capture_default_str();
  command.add_option("--search-evaluations", cli->search.max_evaluations,
                     "search: at most this many model evaluations (the deterministic budget)")
      ->check(qgru::cli::positive_number())
      ->capture_default_str();
  command.add_option("--search-seconds", cli->search.max_seconds,
                     "search: stop after this many seconds (0: no time limit; a time limit makes the result depend "
                     "on the machine's speed)")
      ->check(qgru::cli::non_negative_number())
      ->capture_default_str();
  command.add_flag("!--no-widening", cli->search.suggest_widening,
                   "search: do not score each activation tensor widened to 16 bits");
  command.add_option("--suggest-config", cli->suggest_config,
                     "search: write the config with the one activation tensor whose widening to 16 bits gains the "
                     "most (the measured gain in its description)");
  command.add_option("--html", cli->html,
                     "Also write the calibration report (as 'qgru calibrate --html') for this config; with search, "
                     "its ranges, start scores, history and widenings");
  command.add_option("-o,--output", cli->output,
                     "Output artifact NAME.qgru.json; its tensor file NAME.qgru.safetensors is written beside it")
      ->required();
  command.add_flag("--json", cli->json,
                   "Print the results as one JSON object (the artifact's parameter keys, the overflow proof's least "
                   "headroom, the files written) instead of the table");
  qgru::cli::add_allow_model_mismatch(command, cli->allow_model_mismatch, "--stats");
  command.add_option("--layout", cli->layout, "Weight layout of --model")
      ->check(CLI::IsMember({"auto", "pytorch", "haste"}))
      ->capture_default_str();
  command.footer(
      "Results go to stdout once the files are written: per cell the type, shift, zero point and range of every tensor, "
      "the rescale shifts under their docs/FIXED_POINT.md names and the activations, then the overflow proof's least "
      "headroom and, last, one line naming the files written (--json: the same as one JSON object). Logs go to "
      "stderr; -q hides them, never the results.\n"
      "The statistics record the sha256 of the float weights they were calibrated on: another --model is refused "
      "(exit 1), or only warned about with --allow-model-mismatch.\n"
      "Examples:\n"
      "  qgru quantize --model gru.safetensors --stats stats.json --config int8 --scales multiplier -o model.qgru.json\n"
      "  qgru quantize --model gru.safetensors --stats stats.json --range-method search --data calib.npy \\\n"
      "      --search-evaluations 1000 --html calibration.html -o model.qgru.json");
  return [cli]() { return run_quantize(*cli); };
}

}  // namespace

QGRU_SUBCOMMAND("quantize", "Quantize a float GRU with calibration statistics and a bit-width config", 20, setup_quantize);
