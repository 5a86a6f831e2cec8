// qgru run: run a GRU on a batch of sequences. The model path decides the executor: a .safetensors file
// is a float model (run_float_files); a quantized artifact (.qgru.json) is the fixed-point path.
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/output_policy.h"
#include "qgru/io/npy.h"
#include "qgru/model/float_run.h"
#include "qgru/runtime/executor.h"
#include "qgru/runtime/quant_run.h"
#include "qgru/runtime/artifact.h"
#include "qgru/verify/golden_vectors.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/import/model_file_kind.h"
#include "device_option.h"
#include "model_options.h"
#include "shared_checks.h"
#include "subcommand.h"

#ifdef QGRU_WITH_CUDA
#include "qgru_cuda/float_gru_cuda.h"
#endif

namespace {

struct RunCliOptions {
  std::string model, input, output, h0, hn, codes, lengths;
  std::string h0_codes, hn_codes;  // the state as integer codes, each cell in its own h space (quantized models only)
  std::string dump;  // --dump-intermediates: golden vectors (quantized models only)
  std::string layout = "auto";
  std::string prefix, node;  // which GRU of a float model file
  std::string device = "cpu";
  std::string executor = "fast";
  bool batch_first = false;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int run_float(const RunCliOptions& cli) {
  if (!cli.codes.empty()) {
    throw qgru::Error("--codes " + cli.codes + ": a float model has no integer codes; --codes needs a quantized "
                      "artifact (.qgru.json) as --model");
  }
  for (const auto& [option, path] : {std::pair<const char*, const std::string&>{"--dump-intermediates", cli.dump},
                                      {"--h0-codes", cli.h0_codes}, {"--hn-codes", cli.hn_codes}}) {
    if (path.empty()) continue;
    throw qgru::Error(std::string(option) + " " + path + ": a float model has no integer codes; it needs a "
                      "quantized artifact (.qgru.json) as --model");
  }
  const qgru::cli::Device device = qgru::cli::resolve_device(cli.device);
  qgru::FloatRunOptions options;
#ifdef QGRU_WITH_CUDA
  if (device == qgru::cli::Device::Cuda) {
    // cublasSgemm for the linears, the shared float cell per element (qgru_cuda/float_gru_cuda.h).
    options.device_executor = [](const qgru::FloatGruModel& model, const float* x, int T, int N, const float* h0,
                                 const int32_t* lengths) {
      return qgru::cuda::FloatGruCuda(model).run(x, T, N, h0, lengths);
    };
    options.device_executor_name = "float, cuda";
  }
#else
  (void)device;  // resolve_device already refused cuda in a build without it
#endif
  options.model_path = cli.model;
  options.input_path = cli.input;
  options.output_path = cli.output;
  options.h0_path = cli.h0;
  options.hn_path = cli.hn;
  options.lengths_path = cli.lengths;
  options.layout = qgru::parse_weight_layout(cli.layout);
  options.model_prefix = cli.prefix;
  options.model_node = cli.node;
  options.batch_first = cli.batch_first;
  const qgru::FloatRunSummary summary = qgru::run_float_files(options);
  const qgru::FloatGruModel& model = summary.model;
  qgru::log()->info("{}: float GRU ({} layout), C = {}, H = {}, {} layer(s), {} direction(s); T = {}, N = {}",
                    cli.model, model.source_layout, model.input_size, model.hidden_size, model.num_layers,
                    model.num_directions, summary.T, summary.N);
  std::printf("output %s: %s float32, mean %.6g, min %.6g, max %.6g\n", cli.output.c_str(),
              qgru::shape_string(summary.output_shape).c_str(), summary.mean, summary.min, summary.max);
  if (!cli.hn.empty()) std::printf("h_n %s: [%d, %d, %d] float32\n", cli.hn.c_str(),
                                   model.num_layers * model.num_directions, summary.N, model.hidden_size);
  std::printf("time: %.3f ms (%s)\n", summary.seconds * 1e3, summary.executor.c_str());
  return qgru::kExitOk;
}

// run_quantized_files, with the chooser's device decisions said as --device's: "--device cuda: no usable CUDA device:
// <why>" when CUDA was asked for and cannot run, "--device auto: using CUDA" or "using the CPU (<why>)".
qgru::QuantRunSummary run_quantized_files_on_device(const qgru::QuantRunOptions& options, const std::string& device) {
  qgru::QuantRunSummary summary;
  try {
    summary = qgru::run_quantized_files(options);
  } catch (const qgru::ExecutorError& e) {
    if (e.kind() == qgru::ExecutorError::Kind::NotBuilt || e.kind() == qgru::ExecutorError::Kind::NoDevice) {
      throw qgru::Error("--device " + device + ": no usable CUDA device: " + e.reason());
    }
    throw;
  }
  if (options.device == qgru::ExecutorDevice::Auto && summary.executor == "cuda") {
    qgru::log()->info("--device auto: using CUDA");
  }
  for (const qgru::ExecutorFallback& fallback : summary.fallbacks) {
    if (fallback.from == "cuda") qgru::log()->info("--device auto: using the CPU ({})", fallback.reason);
  }
  if (!summary.executor_detail.empty()) qgru::log()->info("CUDA cells: {}", summary.executor_detail);
  return summary;
}

int run_quantized(const RunCliOptions& cli) {
  qgru::QuantRunOptions options;
  // The device, then the CPU's fast or reference executor (qgru/runtime/executor.h); on CUDA every cell on the GPU
  // and the shared layer loop on the host (qgru_cuda/quant_gru_cuda.h): the same codes as the CPU executors.
  options.device = qgru::parse_executor_device(cli.device);
  options.artifact_path = cli.model;
  options.input_path = cli.input;
  options.output_path = cli.output;
  options.codes_path = cli.codes;
  options.h0_path = cli.h0;
  options.h0_codes_path = cli.h0_codes;
  options.hn_path = cli.hn;
  options.hn_codes_path = cli.hn_codes;
  options.lengths_path = cli.lengths;
  options.batch_first = cli.batch_first;
  options.executor = cli.executor;
  if (!cli.dump.empty() && !cli.lengths.empty()) {
    throw qgru::Error("--dump-intermediates " + cli.dump + ": golden vectors are made for sequences of full length; "
                      "leave out --lengths");
  }
  if (!cli.dump.empty()) {
    // The golden vectors from the run's own input codes, in the run's output group (nothing written when
    // either fails).
    options.extra_output_path = cli.dump;
    const std::string artifact_path = cli.model;
    options.extra_output = [artifact_path](const qgru::QuantizedGru& model, const int32_t* q_x, int T, int N,
                                           const int32_t* q_h0) {
      return qgru::serialize_golden_vectors(model, q_x, T, N, q_h0, qgru::golden_options_for_artifact(artifact_path));
    };
  }
  const qgru::QuantRunSummary summary = run_quantized_files_on_device(options, cli.device);
  qgru::log()->info("{}: integer GRU, T = {}, N = {}, input given as {}", cli.model, summary.T, summary.N,
                    summary.input_was_codes ? "codes" : "floats (quantized with x's parameters)");
  std::printf("output %s: %s float32 (dequantized), mean %.6g, min %.6g, max %.6g\n", cli.output.c_str(),
              qgru::shape_string(summary.output_shape).c_str(), summary.mean, summary.min, summary.max);
  if (!cli.codes.empty()) std::printf("codes %s: %s integer codes\n", cli.codes.c_str(), qgru::shape_string(summary.output_shape).c_str());
  if (!cli.hn.empty()) std::printf("h_n %s: float32\n", cli.hn.c_str());
  if (!cli.hn_codes.empty()) std::printf("h_n codes %s: integer codes, each cell in its own h space\n", cli.hn_codes.c_str());
  std::printf("time: %.3f ms (integer executor, %s)\n", summary.seconds * 1e3,
              summary.executor == "cuda" ? "cuda" : ("cpu, " + summary.executor).c_str());
  if (!cli.dump.empty()) {
    std::printf("intermediates %s: every code of every step (golden vectors, docs/FIXED_POINT.md)\n", cli.dump.c_str());
  }
  return qgru::kExitOk;
}

int run_command(const RunCliOptions& cli) {
  // An artifact by its name or, named otherwise, by its content (qgru/import/model_file_kind.h); only a regular
  // file is sniffed (the policy refuses anything else as --model).
  std::error_code error;
  const bool quantized = ends_with(cli.model, ".qgru.json") ||
                         (std::filesystem::is_regular_file(cli.model, error) &&
                          qgru::sniff_model_file(cli.model) == qgru::ModelFileKind::QgruArtifact);
  std::vector<qgru::CommandFile> inputs = {{"--input", qgru::array_file_path(cli.input)},
                                           {"--h0", qgru::array_file_path(cli.h0)},
                                           {"--h0-codes", qgru::array_file_path(cli.h0_codes)},
                                           {"--lengths", qgru::array_file_path(cli.lengths)}};
  if (quantized) qgru::add_artifact_input(inputs, "--model", cli.model);
  else qgru::add_model_input(inputs, "--model", cli.model);
  qgru::check_command_files(inputs, {{"--output", cli.output}, {"--hn", cli.hn}, {"--hn-codes", cli.hn_codes},
                                     {"--codes", cli.codes}, {"--dump-intermediates", cli.dump}});
  return quantized ? run_quantized(cli) : run_float(cli);
}

}  // namespace

QGRU_SUBCOMMAND("run", "Run a GRU (float .safetensors or quantized .qgru.json) on input sequences", 30,
                [](CLI::App& command) -> std::function<int()> {
                  auto cli = std::make_shared<RunCliOptions>();
                  command.add_option("--model", cli->model, "Model: a float GRU (.safetensors or .onnx) or a quantized "
                                     "artifact (.qgru.json)")->required();
                  qgru::cli::add_model_selection_options(command, cli->prefix, cli->node);
                  command.add_option("--input", cli->input, "Input sequences x [T, N, C] (.npy, or file.npz:key)")
                      ->required();
                  command.add_option("--output", cli->output, "Output y [T, N, D*H] (float32 .npy, written atomically)")
                      ->required();
                  auto* h0 = command.add_option("--h0", cli->h0, "Initial state h0 [L*D, N, H] as floats (default: zeros)");
                  command.add_option("--h0-codes", cli->h0_codes,
                                     "Initial state h0 [L*D, N, H] as integer codes, cell l*D+d in its own h space "
                                     "(quantized models only; e.g. another run's --hn-codes)")
                      ->excludes(h0);
                  command.add_option("--hn", cli->hn, "Also write the final state h_n [L*D, N, H] (float32 .npy)");
                  command.add_option("--hn-codes", cli->hn_codes,
                                     "Also write the final state h_n [L*D, N, H] as integer codes, cell l*D+d in its own "
                                     "h space (quantized models only; --h0-codes of a run that continues this one)");
                  command.add_option("--lengths", cli->lengths,
                                     "Sequence lengths [N] (integer .npy): steps past a row's length leave its state "
                                     "unchanged and output 0; h_n is the state at its last valid step");
                  command.add_flag("--batch-first", cli->batch_first,
                                   "Input and output are [N, T, .] instead of [T, N, .]");
                  command.add_option("--layout", cli->layout, "Float weight layout")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"auto", "pytorch", "haste"}));
                  command.add_option("--device", cli->device, "Where to run")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
                  command.add_option("--executor", cli->executor,
                                     "Integer CPU executor for artifacts: fast (AVX-512 VNNI or AVX2 where supported, else the "
                                     "reference) or reference; both compute the same codes")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"fast", "reference"}));
                  command.add_option("--codes", cli->codes, "Also write the integer output codes (.npy; quantized "
                                     "models only)");
                  command.add_option("--dump-intermediates", cli->dump,
                                     "Also write every intermediate code of every step (golden vectors, "
                                     ".safetensors; quantized models only; keep the input small)");
                  command.footer(
                      "Results go to stdout (the output's shape and range, the files written, the time); logs to "
                      "stderr. Integer x codes (an integer .npy) are taken as codes in x's space; codes outside its "
                      "range, and non-finite floats, are refused. docs/FIXED_POINT.md §5 says how input and state "
                      "are quantized; splitting a sequence in two runs, the first's --hn-codes as the second's "
                      "--h0-codes, gives the codes of one run.\n"
                      "Examples:\n"
                      "  qgru run --model model.qgru.json --input test.npy --output y.npy --codes y_codes.npy\n"
                      "  qgru run --model model.qgru.json --input x_next.npy --h0-codes hn_codes.npy --output y.npy "
                      "--hn-codes hn_next.npy");
                  return [cli] { return run_command(*cli); };
                });
