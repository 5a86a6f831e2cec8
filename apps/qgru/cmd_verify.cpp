// qgru verify: the float model and its quantized artifact side by side on the same inputs; a table on
// stdout, a JSON report on request, and a gate on the output SQNR for CI pipelines.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "device_option.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/output_policy.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/model/float_gru.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/io/strict_json.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/verify/device_compare.h"
#include "qgru/verify/gru_verify.h"
#include "qgru/verify/html_report.h"
#include "qgru/verify/verify_report.h"
#include "qgru/import/load_float_gru.h"
#include "model_options.h"
#include "shared_checks.h"
#include "subcommand.h"

#ifdef QGRU_WITH_CUDA
#include "qgru_cuda/float_gru_cuda.h"
#endif

namespace {

struct VerifyCliOptions {
  std::string model, artifact, input, h0, report, lengths;
  std::string html, stats;  // --html report.html, --stats (histograms in the HTML report)
  std::string layout = "auto";
  std::string prefix, node;  // which GRU of the model file
  std::string device = "cpu";
  bool batch_first = false;
  bool allow_model_mismatch = false;
  double fail_below_sqnr = NAN;
};

int run_verify(const VerifyCliOptions& cli) {
  std::vector<qgru::CommandFile> inputs = {{"--input", qgru::array_file_path(cli.input)},
                                           {"--h0", qgru::array_file_path(cli.h0)}, {"--stats", cli.stats},
                                           {"--lengths", qgru::array_file_path(cli.lengths)}};
  qgru::add_model_input(inputs, "--model", cli.model);
  qgru::add_artifact_input(inputs, "--artifact", cli.artifact);
  qgru::check_command_files(inputs, {{"--report", cli.report}, {"--html", cli.html}});
  const qgru::cli::Device device = qgru::cli::resolve_device(cli.device);
  const qgru::FloatGruModel float_model = qgru::load_float_gru(
      qgru::FloatModelSource{cli.model, qgru::parse_weight_layout(cli.layout), cli.prefix, cli.node});
  const qgru::QuantizedGru quant_model = qgru::read_artifact(cli.artifact);
  qgru::cli::require_same_weights("artifact " + cli.artifact, quant_model.provenance.model_sha256, cli.model,
                                  cli.allow_model_mismatch);
  const qgru::SequenceBatch x = qgru::read_sequence_input(cli.input, float_model.input_size, cli.batch_first);
  std::vector<float> h0;
  if (!cli.h0.empty()) {
    h0 = qgru::read_initial_state(cli.h0, float_model.num_layers * float_model.num_directions, x.N,
                                  float_model.hidden_size);
  }
  // Histograms for the HTML report: read (and matched to the model) before the long run.
  qgru::CalibrationStats stats;
  if (!cli.stats.empty()) {
    if (cli.html.empty()) throw qgru::Error("--stats " + cli.stats + " is only used by --html; add --html report.html");
    stats = qgru::read_calibration_stats(cli.stats);
    qgru::check_stats_match_model(stats, quant_model.num_layers, quant_model.num_directions, quant_model.input_size,
                                  quant_model.hidden_size, cli.stats);
  }
  std::vector<int32_t> lengths;
  if (!cli.lengths.empty()) lengths = qgru::read_sequence_lengths(cli.lengths, x.N, x.T);
  const int32_t* lengths_data = lengths.empty() ? nullptr : lengths.data();
  qgru::log()->info("verifying {} against {} on {} (T = {}, N = {})", cli.artifact, cli.model, cli.input, x.T, x.N);
  const qgru::GruVerifyReport report =
      qgru::verify_gru(float_model, quant_model, x.values.data(), x.T, x.N, h0.empty() ? nullptr : h0.data(), {},
                       lengths_data);

  std::fputs(qgru::verify_report_table(report).c_str(), stdout);
  // --device cuda: the CUDA executors against the CPU ones on the same input (with its sequence lengths, when
  // given), integer codes one for one and the float GRU within kFloatDeviceTolerance (qgru/verify/device_compare.h).
  nlohmann::json device_json;
  bool device_passed = true;
  std::string device_failure;
#ifdef QGRU_WITH_CUDA
  if (device == qgru::cli::Device::Cuda) {
    const float* h0_data = h0.empty() ? nullptr : h0.data();
    const qgru::QuantGruResult cpu_codes =
        qgru::run_quantized_gru(quant_model, x.values.data(), x.T, x.N, h0_data, nullptr, lengths_data);
    qgru::ExecutorRequest on_cuda;  // the chooser's CUDA executor (qgru/runtime/executor.h)
    on_cuda.device = qgru::ExecutorDevice::Cuda;
    const std::unique_ptr<qgru::Executor> quant_cuda = qgru::make_executor(quant_model, on_cuda);
    qgru::log()->info("CUDA cells: {}", quant_cuda->detail());
    const qgru::QuantGruResult cuda_codes = quant_cuda->run(x.values.data(), x.T, x.N, h0_data, lengths_data);
    const qgru::FloatGruResult cpu_float =
        qgru::run_float_gru(float_model, x.values.data(), x.T, x.N, h0_data, nullptr, lengths_data);
    const qgru::FloatGruResult cuda_float =
        qgru::cuda::FloatGruCuda(float_model).run(x.values.data(), x.T, x.N, h0_data, lengths_data);
    const int H = quant_model.hidden_size, D = quant_model.num_directions;
    const qgru::CodeComparison codes = qgru::compare_quant_codes(cpu_codes, cuda_codes, H, D);
    const qgru::FloatComparison floats = qgru::compare_float_outputs(cpu_float, cuda_float, H, D);
    std::fputs(qgru::device_comparison_text("cuda", codes, floats).c_str(), stdout);
    device_json = qgru::device_comparison_json("cuda", codes, floats);
    device_passed = codes.equal() && floats.within();
    if (!codes.equal()) {
      device_failure = "integer codes differ (" + std::to_string(codes.mismatches) + " of " + std::to_string(codes.compared) +
                       "; first at " + codes.first + ")";
    } else if (!floats.within()) {
      device_failure = "float GRU outside the tolerance (worst at " + floats.worst + ")";
    }
  }
#else
  (void)device;  // resolve_device already refused cuda in a build without it
#endif
  std::fflush(stdout);
  qgru::AtomicFileGroup outputs;  // the JSON and the HTML report appear together or not at all
  if (!cli.report.empty()) {
    nlohmann::json json = qgru::verify_report_json(report);
    if (!device_json.is_null()) json["device_check"] = device_json;
    json["model"] = cli.model;
    json["artifact"] = cli.artifact;
    json["input"] = cli.input;
    outputs.add(cli.report).write(qgru::json_text(json, 2) + "\n");
  }
  if (!cli.html.empty()) {
    qgru::HtmlReportOptions html;
    html.model_path = cli.model;
    html.artifact_path = cli.artifact;
    html.input_path = cli.input;
    if (!cli.stats.empty()) html.stats = &stats;
    outputs.add(cli.html).write(qgru::verify_report_html(report, quant_model, html));
  }
  outputs.commit_all();
  if (!cli.report.empty()) qgru::log()->info("report written to {}", cli.report);
  if (!cli.html.empty()) qgru::log()->info("HTML report written to {}", cli.html);
  if (!device_passed) throw qgru::Error("--device cuda: the CUDA executor differs from the CPU: " + device_failure);
  const double sqnr = report.output.sqnr_db();
  if (!std::isnan(cli.fail_below_sqnr) && !(sqnr >= cli.fail_below_sqnr)) {
    // %g: a threshold of 1e300 is written as such, not as its 301 digits.
    throw qgru::Error(fmt::format("output SQNR {:.6f} dB is below --fail-below-sqnr {:g} dB", sqnr, cli.fail_below_sqnr));
  }
  return qgru::kExitOk;
}

}  // namespace

QGRU_SUBCOMMAND("verify", "Compare a quantized artifact with its float model, tensor by tensor", 40,
                [](CLI::App& command) -> std::function<int()> {
                  auto cli = std::make_shared<VerifyCliOptions>();
                  command.add_option("--model", cli->model, "Float GRU (.safetensors or .onnx)")->required();
                  qgru::cli::add_model_selection_options(command, cli->prefix, cli->node);
                  command.add_option("--artifact", cli->artifact, "Quantized artifact (.qgru.json)")->required();
                  command.add_option("--input", cli->input, "Input sequences x [T, N, C] (.npy, or file.npz:key)")
                      ->required();
                  command.add_option("--h0", cli->h0, "Initial state h0 [L*D, N, H] (default: zeros)");
                  command.add_option("--lengths", cli->lengths,
                                     "Sequence lengths [N] (integer .npy); padded steps are left out of every figure");
                  command.add_flag("--batch-first", cli->batch_first, "Input is [N, T, C] instead of [T, N, C]");
                  command.add_option("--report", cli->report, "Write the full report (JSON: every figure overall and per time step)");
                  command.add_option("--html", cli->html,
                                     "Write a self-contained HTML report (tables, SQNR over time, activation and "
                                     "histogram plots as inline SVG)");
                  command.add_option("--stats", cli->stats,
                                     "Calibration statistics (.json) whose histograms the HTML report plots");
                  command.add_option("--fail-below-sqnr", cli->fail_below_sqnr,
                                     "Exit 1 when the output SQNR (dB) is below this value (a finite number)")
                      ->check(qgru::cli::finite_number());
                  qgru::cli::add_allow_model_mismatch(command, cli->allow_model_mismatch, "--artifact");
                  command.add_option("--layout", cli->layout, "Float weight layout")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"auto", "pytorch", "haste"}));
                  command.add_option("--device", cli->device,
                                     "cpu: the CPU executors; cuda: also run the CUDA executors and compare them "
                                     "with the CPU (integer codes one for one, float within 1e-4; exit 1 on a "
                                     "difference); auto: cuda when a GPU is usable, else cpu")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
                  command.footer(
                      "Prints one row per tensor of every layer and direction (x, h, weight_ih_linear, "
                      "weight_hh_linear, the gate inputs and outputs) and for the output and h_n: max abs error, "
                      "mean abs error, NMSE, SQNR (dB), cosine similarity. The integer run follows its own "
                      "state, so the figures include the drift over time.\n"
                      "The artifact records the sha256 of the float weights it was quantized from: a --model with "
                      "other bytes is refused (exit 1), or only warned about with --allow-model-mismatch.\n"
                      "Example:\n"
                      "  qgru verify --model gru.safetensors --artifact gru.qgru.json --input test.npy "
                      "--report r.json --fail-below-sqnr 25");
                  return [cli] { return run_verify(*cli); };
                });
