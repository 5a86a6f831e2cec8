// qgru inspect: what a model file holds, without running it. An ONNX model: every GRU node with C, H, its
// direction, linear_before_reset, activations, clip, sequence_lens / initial_h wiring and the layer stack it
// belongs to, and whether qgru can read it. A safetensors file: the GRU qgru reads from it. Anything else:
// what it is (qgru/import/model_file_kind.h).
#include <cstdio>
#include <memory>
#include <string>

#include "model_options.h"
#include "qgru/base/error.h"
#include "qgru/base/output_policy.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/import/model_file_kind.h"
#include "qgru/import/onnx_gru.h"
#include "subcommand.h"

namespace {

struct InspectCli {
  std::string model;
  std::string layout = "auto";
  std::string prefix, node;
};

int run_inspect(const InspectCli& cli) {
  qgru::check_command_files({{"MODEL", cli.model}}, {});  // reads only: a FIFO or a device is refused
  const qgru::ModelFileKind kind = qgru::sniff_model_file(cli.model);
  std::printf("%s: %s\n", cli.model.c_str(), qgru::model_file_kind_name(kind));
  if (kind == qgru::ModelFileKind::Onnx) {
    const qgru::OnnxGraphGrus grus = qgru::inspect_onnx_grus(cli.model);
    std::fputs(qgru::describe_onnx_grus(grus).c_str(), stdout);
    std::printf("%zu GRU stack(s)%s\n", grus.stacks.size(),
                grus.stacks.size() > 1 ? ": pick one with --node NAME (the stack's first node)" : "");
    return qgru::kExitOk;
  }
  if (kind != qgru::ModelFileKind::Safetensors && kind != qgru::ModelFileKind::Unknown) {
    throw qgru::Error(qgru::model_file_refusal(cli.model, kind));
  }
  const qgru::FloatGruModel model =
      qgru::load_float_gru(qgru::FloatModelSource{cli.model, qgru::parse_weight_layout(cli.layout), cli.prefix, cli.node});
  std::printf("GRU (%s layout): C = %d, H = %d, %d layer(s), %d direction(s)\n", model.source_layout.c_str(),
              model.input_size, model.hidden_size, model.num_layers, model.num_directions);
  return qgru::kExitOk;
}

}  // namespace

QGRU_SUBCOMMAND("inspect", "List the GRUs a model file holds (ONNX GRU nodes and stacks, safetensors GRUs)", 5,
                [](CLI::App& command) -> std::function<int()> {
                  auto cli = std::make_shared<InspectCli>();
                  command.add_option("model", cli->model, "Model file (.onnx, .safetensors, or anything: it says what it is)")
                      ->required()
                      ->check(CLI::ExistingFile);
                  command.add_option("--layout", cli->layout, "Weight layout of a safetensors file")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"auto", "pytorch", "haste"}));
                  qgru::cli::add_model_selection_options(command, cli->prefix, cli->node);
                  command.footer(
                      "Examples:\n"
                      "  qgru inspect speech_model.onnx\n"
                      "  qgru calibrate --model speech_model.onnx --node /encoder/GRU --data calib.npy -o stats.json");
                  return [cli] { return run_inspect(*cli); };
                });
