// qgru export --onnx: a GRU as an ONNX model (qgru/export/onnx_export.h). A quantized artifact becomes its
// float-equivalent (the dequantized weights, qgru/export/dequantized_gru.h); a float model is written as it is.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model_options.h"
#include "qgru/base/error.h"
#include "qgru/base/output_policy.h"
#include "qgru/base/log.h"
#include "qgru/export/onnx_export.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/import/model_file_kind.h"
#include "qgru/runtime/artifact.h"
#include "shared_checks.h"
#include "subcommand.h"

namespace {

struct ExportCli {
  bool onnx = false;  // the format (required: the one written today)
  std::string model, output;
  std::string layout = "auto";
  std::string prefix, node;
  int opset = qgru::kOnnxExportDefaultOpset;
  bool batch_first = false, h0_input = false, lengths_input = false, quantize_input = false;
};

int run_export(const ExportCli& cli) {
  const auto started = std::chrono::steady_clock::now();
  // The model, its tensor file when it is an artifact, and the ONNX file written: the output policy
  // (qgru/base/output_policy.h) before anything is read or written.
  std::error_code error;
  std::vector<qgru::CommandFile> inputs;
  if (std::filesystem::is_regular_file(cli.model, error) &&
      qgru::sniff_model_file(cli.model) == qgru::ModelFileKind::QgruArtifact) {
    qgru::add_artifact_input(inputs, "--model", cli.model);
  } else {
    qgru::add_model_input(inputs, "--model", cli.model);
  }
  qgru::check_command_files(inputs, {{"-o", cli.output}});
  qgru::OnnxExportRequest request;
  request.model = qgru::FloatModelSource{cli.model, qgru::parse_weight_layout(cli.layout), cli.prefix, cli.node};
  request.output_path = cli.output;
  request.options.opset = cli.opset;
  request.options.batch_first = cli.batch_first;
  request.options.h0_input = cli.h0_input;
  request.options.lengths_input = cli.lengths_input;
  request.quantize_input = cli.quantize_input;
  const qgru::OnnxExportSummary summary = qgru::export_onnx_file(request);
  const qgru::FloatGruModel& m = summary.model;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  qgru::log()->info(
      "export: wrote {} ({} bytes, opset {}) in {:.2f} s: {}, {} layer(s), C = {}, H = {}, {}, linear_before_reset = {}{}",
      cli.output, summary.bytes, cli.opset, seconds,
      summary.from_artifact ? "the float-equivalent of the " + summary.config_name + " artifact (dequantized weights)"
                            : "the float model (" + m.source_layout + ")",
      m.num_layers, m.input_size, m.hidden_size, m.num_directions == 2 ? "bidirectional" : "forward",
      m.linear_before_reset ? 1 : 0, summary.input_quant.empty() ? "" : "; x quantized as " + summary.input_quant);
  return qgru::kExitOk;
}

}  // namespace

QGRU_SUBCOMMAND(
    "export", "Write a GRU as ONNX: a quantized artifact's float-equivalent (dequantized weights), or a float model", 50,
    [](CLI::App& command) -> std::function<int()> {
      auto cli = std::make_shared<ExportCli>();
      command.add_flag("--onnx", cli->onnx, "Write an ONNX model (the one format export writes; required)")->required();
      command.add_option("--model", cli->model,
                         "A quantized artifact (.qgru.json): its float-equivalent is written; or a float GRU "
                         "(.safetensors, .onnx), written as it is")
          ->required()
          ->check(CLI::ExistingFile);
      command.add_option("-o,--output", cli->output, "The ONNX file to write (atomically)")->required();
      command.add_option("--opset", cli->opset, "ONNX opset of the graph (16-bit --quantize-input needs 21 or higher)")
          ->check(CLI::Range(qgru::kOnnxExportMinOpset, qgru::kOnnxExportMaxOpset))
          ->capture_default_str();
      command.add_flag("--batch-first", cli->batch_first,
                       "The graph's x is [N, T, C] and y [N, T, D*H] (Transpose nodes around the time-major GRUs)");
      command.add_flag("--h0-input", cli->h0_input,
                       "Add the graph input h0 [L*D, N, H] (the initial state; without it the state starts at zero)");
      command.add_flag("--lengths-input", cli->lengths_input,
                       "Add the graph input sequence_lens, int32 [N] (a batch of unequal lengths, as 'qgru run "
                       "--lengths')");
      command.add_flag("--quantize-input", cli->quantize_input,
                       "Artifacts: quantize and dequantize x with the artifact's x scale and zero point "
                       "(QuantizeLinear, DequantizeLinear, and a Clip for widths below 8 or 16 bits)");
      command.add_option("--layout", cli->layout, "Weight layout of a safetensors --model")
          ->check(CLI::IsMember({"auto", "pytorch", "haste"}))
          ->capture_default_str();
      qgru::cli::add_model_selection_options(command, cli->prefix, cli->node);
      command.footer(
          "The float-equivalent of an artifact is the float GRU whose weights W, R, bw, br are the artifact's\n"
          "integer codes times their channel's power-of-two scale (exactly representable in float32), in\n"
          "ONNX's GRU layout (gates z, r, h; W [D, 3H, C], R [D, 3H, H], B [D, 6H]), linear_before_reset as the\n"
          "model's cell (1, or 0 for a Keras-style reset_after=False model and its artifacts),\n"
          "layers chained as PyTorch exports nn.GRU (qgru's ONNX import reads it back). Run it in an ONNX\n"
          "pipeline to hear or see what quantizing the weights does. It does not model the integer executor's\n"
          "activations: x (unless --quantize-input), h and every gate stay float, sigmoid and tanh are exact\n"
          "(not the integer tables), and nothing is requantized between steps or layers; 'qgru run --model\n"
          "model.qgru.json' gives the integer output itself (docs/ONNX.md compares the two).\n"
          "\n"
          "Examples:\n"
          "  qgru export --onnx --model model.qgru.json --quantize-input --batch-first --h0-input -o model.fq.onnx\n"
          "  qgru export --onnx --model gru.safetensors -o gru.onnx     # the float model, for A/B listening");
      return [cli] { return run_export(*cli); };
    });
