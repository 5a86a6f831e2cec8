// qgru quantize: float GRU weights + calibration statistics + bit-width config -> the quantized-model
// artifact (model.qgru.json + model.qgru.safetensors). The float range of every observed tensor comes from
// the statistics (select_range with the config's range method for that tensor); quantize_gru derives every
// shift and table and proves that no intermediate can overflow before anything is written.
#include <chrono>
#include <memory>
#include <string>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/output_policy.h"
#include "qgru/base/sha256.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/calib/range_selection.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/runtime/overflow_check.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/version.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/artifact_write.h"
#include "shared_checks.h"
#include "subcommand.h"

namespace {

struct QuantizeCli {
  std::string model;
  std::string stats;
  std::string config = "int8";
  std::string output;
  std::string layout = "auto";
  std::string range_method;  // empty: per tensor from the config, else the statistics
  bool allow_model_mismatch = false;
};

std::string config_text_sha256(const std::string& name_or_path) {
  const std::string file = qgru::cli::config_file(name_or_path);
  if (!file.empty()) return qgru::sha256_file_hex(file);
  const std::string& text = qgru::bitwidth_preset_text(name_or_path);
  return qgru::sha256_hex(text.data(), text.size());
}

// A range the statistics give that cannot be used; its message names the statistics file already.
struct StatisticsError : qgru::Error {
  using qgru::Error::Error;
};

int run_quantize(const QuantizeCli& cli) {
  const auto started = std::chrono::steady_clock::now();
  qgru::check_command_files({{"--model", cli.model}, {"--stats", cli.stats}, {"--config", qgru::cli::config_file(cli.config)}},
                            {{"-o", cli.output}, {"-o (its tensor file)", qgru::artifact_tensor_path(cli.output)}});
  const qgru::BitwidthConfig config = qgru::load_bitwidth_config(cli.config);
  const qgru::FloatGruModel model = qgru::load_float_gru(cli.model, qgru::parse_weight_layout(cli.layout));
  const qgru::CalibrationStats stats = qgru::read_calibration_stats(cli.stats);
  qgru::check_stats_match_model(stats, model.num_layers, model.num_directions, model.input_size, model.hidden_size,
                                cli.stats);
  const std::string model_sha256 =
      qgru::cli::require_same_weights(cli.stats, stats.model_sha256, cli.model, cli.allow_model_mismatch);

  const qgru::RangeProvider ranges = [&](int layer, int direction, qgru::GruTensor tensor, const std::string& method,
                                         const qgru::TensorQuant& spec) {
    // --range-method overrides the config's methods, which override the statistics' default method.
    const std::string& chosen = cli.range_method.empty() ? method : cli.range_method;
    // Checked here as quantize_gru will quantize it, so that an error names the statistics file.
    qgru::RangeChoice choice;
    try {
      choice = qgru::select_range_quant(stats, layer, direction, tensor, chosen, spec, cli.stats).range;
    } catch (const qgru::Error& e) {
      throw StatisticsError(e.what());
    }
    qgru::log()->debug("quantize: layer {} direction {} {}: range [{}, {}] by {} ({})", layer, direction,
                       qgru::gru_tensor_name(tensor), choice.min, choice.max, choice.method, choice.detail);
    return std::pair<double, double>{choice.min, choice.max};
  };
  qgru::QuantizedGru quantized;
  try {
    quantized = qgru::quantize_gru(model, config, ranges);
  } catch (const StatisticsError&) {
    throw;  // names the statistics file and the tensor already
  } catch (const qgru::Error& e) {  // a weight no shift can represent, a table, the overflow proof: name the inputs
    throw qgru::Error("quantize " + cli.model + " (config " + cli.config + "): " + e.what());
  }
  quantized.provenance.model_path = cli.model;
  quantized.provenance.model_sha256 = model_sha256;
  quantized.provenance.stats_path = cli.stats;
  quantized.provenance.stats_sha256 = qgru::sha256_file_hex(cli.stats);
  quantized.provenance.config_source = cli.config;
  quantized.provenance.config_sha256 = config_text_sha256(cli.config);
  quantized.provenance.tool_version = QGRU_VERSION_STRING;

  qgru::write_artifact(cli.output, quantized);
  qgru::log()->info("quantize: config '{}', {} layer(s) x {} direction(s), C={}, H={}; shifts per tensor:\n{}",
                    config.name, model.num_layers, model.num_directions, model.input_size, model.hidden_size,
                    qgru::describe_quantized_gru(quantized));
  qgru::log()->info("quantize: overflow proof, the least headroom:\n{}", qgru::prove_no_overflow(quantized).tightest(4));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  qgru::log()->info("quantize: wrote {} and {} in {:.2f} s (overflow proof passed; int8 GEMM {})", cli.output,
                    qgru::artifact_tensor_path(cli.output), seconds,
                    qgru::gemm_operands_fit_int8(quantized) ? "possible" : "not possible: an operand is wider than 8 bits");
  return qgru::kExitOk;
}

std::function<int()> setup_quantize(CLI::App& command) {
  auto cli = std::make_shared<QuantizeCli>();
  command.add_option("--model", cli->model, "Float GRU weights (.safetensors)")->required()->check(CLI::ExistingFile);
  command.add_option("--stats", cli->stats, "Calibration statistics from 'qgru calibrate' (.json)")
      ->required()
      ->check(CLI::ExistingFile);
  command.add_option("--config", cli->config,
                     "Bit-width config: a preset (int8, int16-activations, int16) or a JSON file")
      ->capture_default_str();
  command.add_option("--range-method", cli->range_method,
                     "Range method for every observed tensor, overriding the config's (minmax, ema, kl, "
                     "percentile[:P], mse, bounds, each optionally +pow2); default: the config's method per tensor, "
                     "else the one stored by 'qgru calibrate --method'");
  command.add_option("-o,--output", cli->output,
                     "Output artifact NAME.qgru.json; its tensor file NAME.qgru.safetensors is written beside it")
      ->required();
  qgru::cli::add_allow_model_mismatch(command, cli->allow_model_mismatch, "--stats");
  command.add_option("--layout", cli->layout, "Weight layout of --model")
      ->check(CLI::IsMember({"auto", "pytorch", "haste"}))
      ->capture_default_str();
  command.footer(
      "The statistics record the sha256 of the float weights they were calibrated on: another --model is refused "
      "(exit 1), or only warned about with --allow-model-mismatch.\n"
      "Example:\n"
      "  qgru quantize --model gru.safetensors --stats stats.json --config int8 -o gru.qgru.json");
  return [cli]() { return run_quantize(*cli); };
}

}  // namespace

QGRU_SUBCOMMAND("quantize", "Quantize a float GRU with calibration statistics and a bit-width config", 20, setup_quantize);
