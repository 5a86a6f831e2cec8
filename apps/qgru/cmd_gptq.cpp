// qgru gptq: GPTQ int-N quantization of linear layers into an AutoGPTQ/GPTQModel checkpoint.
// Fills qgru::gptq::JobOptions and calls run_job once; prints one line per layer on stdout.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/message_text.h"
#include "qgru/base/output_policy.h"
#include "device_option.h"
#include "qgru/gptq/job.h"
#include "qgru/gptq/job_device.h"
#include "shared_checks.h"
#include "subcommand.h"


namespace {

struct GptqCli {
  qgru::gptq::JobOptions job;
  std::string tensor, manifest, hessian, format = "gptq", device = "cpu";
  std::string order = qgru::gptq::column_order_name(qgru::gptq::recommended_options());
  bool act_order = false;
  std::vector<std::string> activations;
};

// Every file the job reads and writes, manifest entries included, through the output policy
// (qgru/base/output_policy.h).
void check_gptq_files(const GptqCli& cli) {
  const qgru::gptq::JobOptions& job = cli.job;
  const std::string listed = cli.manifest.empty() ? "" : " (in --manifest)";
  std::vector<qgru::CommandFile> inputs = {{"--weights", job.weights_path}, {"--manifest", cli.manifest}};
  for (const qgru::gptq::LayerJob& layer : job.layers) {
    for (const std::string& path : layer.activations) inputs.push_back({"--activations" + listed, path});
    inputs.push_back({"--hessian" + listed, layer.hessian});
  }
  qgru::check_command_files(inputs, {{"-o", job.output_path},
                                     {"-o (its quantize_config.json)", qgru::gptq::quantize_config_path_beside(job.output_path)},
                                     {"--save-hessian", job.save_hessian_path}});
}

// --device cuda: the Hessian and GPTQ on the GPU (qgru/gptq/job_device.h). resolve_device refuses, in one line,
// a build without CUDA or a machine without a usable device, before anything is read or written.
void use_device(const std::string& device, qgru::gptq::JobDevice& job_device) {
  if (qgru::cli::resolve_device(device) != qgru::cli::Device::Cuda) return;
  job_device = qgru::gptq::make_job_device("cuda");
}

// Called by run_job after each layer, before anything is written: a layer whose activations have no rows, or
// whose Hessian is all zero (every column dead), would be written as an all-zero layer; refuse it. Fewer rows
// than K leave the Hessian singular: the damping carries the result, which is said.
void check_layer_data(const GptqCli& cli, const qgru::gptq::LayerReport& report) {
  const auto layer = std::find_if(cli.job.layers.begin(), cli.job.layers.end(),
                                  [&](const qgru::gptq::LayerJob& job) { return job.tensor == report.tensor; });
  if (layer == cli.job.layers.end()) return;
  std::string files = layer->hessian;
  for (const std::string& path : layer->activations) files += (files.empty() ? "" : ", ") + path;
  const std::string what = files + " (data of '" + report.tensor + "' in " + cli.job.weights_path + ")";
  const bool from_activations = layer->hessian.empty();
  if (from_activations && report.tokens < 1) {
    throw qgru::Error(what + ": 0 activation rows; GPTQ needs at least 1 (and K = " + std::to_string(report.K) +
                      " for a Hessian of full rank)");
  }
  if (report.dead_columns >= report.K) {
    throw qgru::Error(what + ": the Hessian is all zero (every input column is 0), so GPTQ would write an "
                      "all-zero layer");
  }
  if (from_activations && report.tokens < report.K) {
    qgru::log()->warn("{}: {} activation rows for K = {}: the Hessian is singular and the damping (--damp {}) "
                      "carries the result; give at least K rows",
                      qgru::printable(what), report.tokens, report.K, cli.job.gptq.damp);
  }
}

std::function<int()> setup_gptq(CLI::App& command) {
  auto cli = std::make_shared<GptqCli>();
  auto& gptq = cli->job.gptq;
  command.add_option("--weights", cli->job.weights_path, "Float weights (.safetensors; F32, F16 or BF16)")
      ->required()->check(CLI::ExistingFile);
  auto* tensor = command.add_option("--tensor", cli->tensor, "Name of the [N, K] weight to quantize");
  auto* manifest = command.add_option("--manifest", cli->manifest,
                                      "JSON list of {tensor, activations: [...]} or {tensor, hessian}")
                       ->check(CLI::ExistingFile);
  tensor->excludes(manifest);
  command.add_option("--activations", cli->activations, "Activation .npy files [M, K] (rows are tokens); repeatable")
      ->check(CLI::ExistingFile);
  command.add_flag("--activations-kmajor", cli->job.activations_feature_major, "Activations are [K, M]");
  command.add_option("--hessian", cli->hessian, "Load H = 2·X·Xᵀ (.npy float64 [K, K]) instead of activations")
      ->check(CLI::ExistingFile);
  command.add_option("--save-hessian", cli->job.save_hessian_path, "Also write H (.npy float64 [K, K])");
  command.add_option("--bits", gptq.bits, "Bits per weight")->check(CLI::IsMember({2, 3, 4, 8}))->capture_default_str();
  command.add_option("--group-size", gptq.group_size, "Columns per group (-1: one group per row; K or more: one group)")
      ->check(qgru::cli::int64_number())
      ->check(CLI::Validator(
          [](const std::string& text) {
            int64_t value = 0;  // checks see the text: parsed as the option parses it
            if (!CLI::detail::lexical_cast(text, value) || (value != -1 && value <= 0)) {
              return "expected -1 or a positive whole number, got '" + text + "'";
            }
            return std::string();
          },
          "-1 or POSITIVE"))
      ->capture_default_str();
  auto* order = command.add_option("--order", cli->order,
                                    "Column order: group-aware (act-order inside each group, groups by their largest "
                                    "diag(H); g_idx stays k / group size), act-order (descending diag(H) over all "
                                    "columns; desc_act, g_idx permuted) or natural")
                    ->check(CLI::IsMember(qgru::gptq::column_order_names()))->capture_default_str();
  command.add_flag("--act-order", cli->act_order, "Same as --order act-order (desc_act)")->excludes(order);
  command.add_flag("--static-groups", gptq.static_groups, "Group parameters from the original W");
  command.add_flag("--sym", gptq.sym, "Symmetric quantization (zero = 2^(bits-1))");
  command.add_option("--damp", gptq.damp, "Damping, relative to mean(diag H); in (0, 1)")->capture_default_str();
  command.add_option("--block-size", gptq.block_size, "Columns per lazy-update block (K or more: one block)")
      ->check(qgru::cli::int64_number())
      ->check(qgru::cli::positive_number())
      ->capture_default_str();
  command.add_option("--format", cli->format, "Checkpoint format: gptq (v1, zeros stored minus one) or gptq_v2")
      ->check(CLI::IsMember({"gptq", "gptq_v2"}))->capture_default_str();
  command.add_option("--device", cli->device,
                     "Where the Hessian and GPTQ run: cpu, or cuda (the same algorithm on the GPU; docs/GPTQ.md, "
                     "\"On the GPU\")")
      ->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  command.add_flag("--keep-other-tensors", cli->job.keep_other_tensors,
                   "Copy every tensor that is not quantized into the output unchanged (a whole-model checkpoint)");
  command.add_option("-o,--output", cli->job.output_path,
                     "Output .safetensors (quantize_config.json beside it; refused when the folder's config disagrees)")
      ->required();
  command.footer(
      "docs/GPTQ.md describes the checkpoint layout and which clients read it.\n"
      "Examples:\n"
      "  qgru gptq --weights model.safetensors --tensor fc1.weight --activations x.npy -o q/model.safetensors\n"
      "  qgru gptq --weights model.safetensors --manifest layers.json --bits 3 --sym --order act-order \\\n"
      "            -o q3/model.safetensors");
  command.get_option("--damp")->check(qgru::cli::finite_number());
  return [cli]() {
    auto& job = cli->job;
    use_device(cli->device, job.device);
    if (cli->tensor.empty() == cli->manifest.empty()) throw qgru::Error("gptq: give exactly one of --tensor or --manifest");
    if (!cli->manifest.empty()) {
      if (!cli->activations.empty() || !cli->hessian.empty()) {
        throw qgru::Error("gptq: with --manifest, activations and Hessians are named in the manifest");
      }
      job.layers = qgru::gptq::read_manifest(cli->manifest);
    } else {
      // Both, or neither, is a usage error: the Hessian is made from the activations, so one of them says it.
      if (!cli->activations.empty() && !cli->hessian.empty()) {
        throw qgru::UsageError("gptq: give --activations (one or more) or --hessian for '" + cli->tensor +
                               "', not both");
      }
      if (cli->activations.empty() && cli->hessian.empty()) {
        throw qgru::UsageError("gptq: give --activations (one or more) or --hessian for '" + cli->tensor + "'");
      }
      job.layers.push_back({cli->tensor, cli->activations, cli->hessian});
    }
    job.format = qgru::gptq::parse_format(cli->format);
    qgru::gptq::set_column_order(job.gptq, cli->act_order ? "act-order" : cli->order);
    check_gptq_files(*cli);
    // Printed once everything is written, so stdout never reports a checkpoint that does not exist.
    const auto reports = qgru::gptq::run_job(job, [&](const auto& report) { check_layer_data(*cli, report); });
    std::printf("layer\tN\tK\ttokens\tgptq_rel_err\trtn_rel_err\tgptq_over_rtn\tseconds\n");
    for (const auto& r : reports) {
      std::printf("%s\t%lld\t%lld\t%lld\t%.6g\t%.6g\t%.4f\t%.3f\n", r.tensor.c_str(), static_cast<long long>(r.N),
                  static_cast<long long>(r.K), static_cast<long long>(r.tokens), r.gptq_error, r.rtn_error,
                  r.rtn_error > 0 ? r.gptq_error / r.rtn_error : 0.0, r.seconds);
    }
    return qgru::kExitOk;
  };
}

}  // namespace

QGRU_SUBCOMMAND("gptq", "GPTQ-quantize linear layers into an AutoGPTQ/GPTQModel checkpoint", 60, setup_gptq);
