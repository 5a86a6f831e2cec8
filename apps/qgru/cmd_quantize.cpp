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
#include "qgru/base/sha256.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/runtime/overflow_check.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/quant/quantize_with_stats.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/artifact_write.h"
#include "subcommand.h"

namespace {

struct QuantizeCli {
  std::string model;
  std::string stats;
  std::string config = "int8";
  std::string output;
  std::string layout = "auto";
  std::string range_method;  // empty: per tensor from the config, else the statistics
};

int run_quantize(const QuantizeCli& cli) {
  const auto started = std::chrono::steady_clock::now();
  const qgru::BitwidthConfig config = qgru::load_bitwidth_config(cli.config);
  const qgru::FloatGruModel model = qgru::load_float_gru(cli.model, qgru::parse_weight_layout(cli.layout));
  const qgru::CalibrationStats stats = qgru::read_calibration_stats(cli.stats);
  const qgru::QuantizeSources sources{cli.model, qgru::sha256_file_hex(cli.model), cli.stats,
                                      qgru::sha256_file_hex(cli.stats), cli.config};
  const qgru::QuantizedGru quantized = qgru::quantize_with_stats(model, stats, config, cli.range_method, sources);

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
  command.add_option("-o,--output", cli->output, "Output artifact JSON (the tensor file is written beside it)")->required();
  command.add_option("--layout", cli->layout, "Weight layout of --model")
      ->check(CLI::IsMember({"auto", "pytorch", "haste"}))
      ->capture_default_str();
  return [cli]() { return run_quantize(*cli); };
}

}  // namespace

QGRU_SUBCOMMAND("quantize", "Quantize a float GRU with calibration statistics and a bit-width config", 20, setup_quantize);
