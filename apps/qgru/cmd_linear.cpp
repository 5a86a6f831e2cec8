// qgru linear: runs one layer of a GPTQ checkpoint on input activations, y = x · Ŵᵀ + b (x [M, K], y [M, N]),
// b the checkpoint's PREFIX.bias [N] when it has one (as every client adds it; --no-bias leaves it out).
// --device cpu: the GPTQ CPU linear (float32, qgru/gptq/layer_linear.h). --device cuda: the W4A16/W8A16 GPU
// kernel (qgru_cuda/quant_linear.h; x is rounded to fp16 on the way in, y comes back as fp16 values).
// Without a usable GPU: "no CUDA device: <reason>", exit 1. Prints one summary line on stdout.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/base/output_policy.h"
#include "qgru/base/tensor.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/layer_linear.h"
#include "qgru/io/npy.h"
#include "subcommand.h"
#ifdef QGRU_WITH_CUDA
#include "qgru_cuda/device.h"
#include "qgru_cuda/gptq_checkpoint_linear.h"
#include "qgru_cuda/quant_linear.h"
#include "qgru_cuda/status.h"
#endif

namespace {

struct LinearCli {
  std::string checkpoint, layer, input, output, device = "cpu";
  bool no_bias = false;
};

// engine: set to the engine the layer ran (QuantLinear::engine: "tiles", "stripes", "dequant-gemm" or "wgmma").
std::vector<float> linear_cuda(const qgru::gptq::QuantizedLayer& layer, const std::vector<int32_t>& qweight,
                               const std::vector<float>& x, int64_t M, std::string& engine) {
#ifdef QGRU_WITH_CUDA
  qgru::cuda::require_device();
  const qgru::cuda::QuantLinear gpu(qgru::cuda::checkpoint_linear_weights(layer, qweight));
  engine = qgru::kernels::engine_name(gpu.engine(M).engine);
  return qgru::cuda::run_host_floats(gpu, x, M);
#else
  (void)layer, (void)qweight, (void)x, (void)M, (void)engine;
  throw qgru::Error("no CUDA device: this qgru was built without CUDA support");
#endif
}

int run_linear(const LinearCli& cli) {
  qgru::check_command_files({{"--checkpoint", cli.checkpoint},
                             {"--checkpoint (its quantize_config.json)", qgru::gptq::quantize_config_path_beside(cli.checkpoint)},
                             {"--input", qgru::array_file_path(cli.input)}},
                            {{"--output", cli.output}});
  const auto start = std::chrono::steady_clock::now();
  const qgru::gptq::CheckpointLayer checkpoint =
      qgru::gptq::read_checkpoint_layer(cli.checkpoint, cli.layer, !cli.no_bias);
  const qgru::gptq::QuantizedLayer& layer = checkpoint.layer;
  int64_t M = 0;
  const std::vector<float> x =
      qgru::gptq::linear_input(qgru::read_array(cli.input), cli.input, checkpoint, cli.layer, M);
  std::string engine = "cpu-f32";
  std::vector<float> y = cli.device == "cuda" ? linear_cuda(layer, checkpoint.qweight, x, M, engine)
                                              : qgru::gptq::layer_linear_f32(layer, checkpoint.qweight, x, M);
  qgru::gptq::add_linear_bias(y, checkpoint.bias, M);
  qgru::write_npy(cli.output, qgru::Tensor::from_vector({M, layer.N}, y));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("linear %s: M=%lld N=%lld K=%lld bits=%d bias=%s device=%s engine=%s -> %s (%.1f ms)\n", cli.layer.c_str(),
              static_cast<long long>(M), static_cast<long long>(layer.N), static_cast<long long>(layer.K), layer.bits,
              checkpoint.bias.empty() ? "no" : "yes", cli.device.c_str(), engine.c_str(), cli.output.c_str(), ms);
  return qgru::kExitOk;
}

}  // namespace

QGRU_SUBCOMMAND("linear", "Run one GPTQ checkpoint layer on activations: y = x · Ŵᵀ + bias (cpu or cuda)", 75,
                [](CLI::App& command) -> std::function<int()> {
                  auto cli = std::make_shared<LinearCli>();
                  command.add_option("--checkpoint", cli->checkpoint,
                                     "GPTQ checkpoint (.safetensors, quantize_config.json beside it)")
                      ->required()->check(CLI::ExistingFile);
                  command.add_option("--layer", cli->layer, "Layer prefix (PREFIX.qweight, ...)")->required();
                  command.add_option("--input", cli->input, "Activations x [M, K] (.npy, or file.npz:key)")->required();
                  command.add_option("--output", cli->output, "Output y [M, N] (float32 .npy, written atomically)")
                      ->required();
                  command.add_option("--device", cli->device,
                                     "cpu (float32) or cuda (x rounded to fp16, fp32 accumulation, y in fp16)")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"cpu", "cuda"}));
                  command.add_flag("--no-bias", cli->no_bias, "Leave out the checkpoint's PREFIX.bias (added by default)");
                  command.footer(
                      "y = x · Ŵᵀ + bias, Ŵ decoded as GPTQModel and transformers decode it (docs/GPTQ.md).\n"
                      "With --device cuda the engine is chosen when the layer loads, by QGRU_CUDA_LINEAR_KERNEL:\n"
                      "  legacy (unset: the tile kernel), stripes (weights repacked, dequantized in registers), auto\n"
                      "  (stripes up to 64 rows, dequantize + cuBLAS beyond), wgmma (Hopper's warpgroup kernel; stripes\n"
                      "  elsewhere). The summary line names the engine that ran (docs/CUDA.md, \"Quantized linear\").\n"
                      "Example:\n"
                      "  qgru linear --checkpoint q/model.safetensors --layer fc1 --input x.npy --output y.npy");
                  return [cli] { return run_linear(*cli); };
                });
