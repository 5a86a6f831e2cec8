// qgru linear: runs one layer of a GPTQ checkpoint on input activations, y = x · Ŵᵀ + b (x [M, K], y [M, N]),
// b the checkpoint's PREFIX.bias [N] when it has one (as every client adds it; --no-bias leaves it out).
// --device cpu: the GPTQ CPU linear (float32, qgru/gptq/linear.h). --device cuda: the W4A16/W8A16 GPU
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
#include "qgru/gptq/linear.h"
#include "qgru/gptq/pack.h"
#include "qgru/half.h"
#include "qgru/io/npy.h"
#include "qgru/io/safetensors.h"
#include "subcommand.h"
#ifdef QGRU_WITH_CUDA
#include "qgru_cuda/device.h"
#include "qgru_cuda/quant_linear.h"
#include "qgru_cuda/status.h"
#endif

namespace {

struct LinearCli {
  std::string checkpoint, layer, input, output, device = "cpu";
  bool no_bias = false;
};

// PREFIX.bias as floats, or empty when the checkpoint has none. Must be a float vector [N].
std::vector<float> read_bias(const qgru::SafetensorsFile& file, const std::string& prefix, int64_t N,
                             const std::string& source) {
  const auto it = file.tensors.find(prefix + ".bias");
  if (it == file.tensors.end()) return {};
  const qgru::Tensor& bias = it->second;
  if ((bias.dtype != qgru::DType::F16 && bias.dtype != qgru::DType::F32 && bias.dtype != qgru::DType::BF16) ||
      bias.shape != std::vector<int64_t>{N}) {
    throw qgru::Error(source + ": tensor '" + prefix + ".bias' is " + qgru::dtype_name(bias.dtype) + " " +
                      qgru::shape_string(bias.shape) + ", expected F16 [" + std::to_string(N) + "]");
  }
  return qgru::tensor_to_f32(bias);
}

// y [M, N] on the CPU from x [M, K].
std::vector<float> linear_cpu(const qgru::gptq::QuantizedLayer& layer, const std::vector<int32_t>& qweight,
                              const std::vector<float>& x, int64_t M) {
  const int64_t N = layer.N, K = layer.K;
  std::vector<float> xt(static_cast<size_t>(K * M)), yt(static_cast<size_t>(N * M)), y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) xt[static_cast<size_t>(k * M + m)] = x[static_cast<size_t>(m * K + k)];
  std::vector<float> zeros(layer.zeros.begin(), layer.zeros.end());
  const auto codes = qgru::gptq::autogptq_codes(qweight.data(), layer.bits, N, K);
  qgru::gptq::GroupParamsView params;
  params.scale = layer.scales.data();
  params.zero = zeros.data();
  params.stride_g = N;
  params.stride_n = 1;
  params.g_idx = layer.g_idx.data();
  params.group_size = (K + layer.G - 1) / layer.G;
  std::vector<float> workspace(qgru::gptq::linear_workspace_floats(codes));
  qgru::gptq::linear_f32(codes, params, xt.data(), M, M, yt.data(), M, workspace.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) y[static_cast<size_t>(m * N + n)] = yt[static_cast<size_t>(n * M + m)];
  return y;
}

std::vector<float> linear_cuda(const qgru::gptq::QuantizedLayer& layer, const std::vector<int32_t>& qweight,
                               const std::vector<float>& x, int64_t M) {
#ifdef QGRU_WITH_CUDA
  qgru::cuda::require_device();
  qgru::cuda::GptqLinearWeights w;
  w.K = layer.K;
  w.N = layer.N;
  w.bits = layer.bits;
  w.group_size = (layer.K + layer.G - 1) / layer.G;
  w.zero_adjust = 0;  // zeros packed as gptq_v2 (the zero points themselves)
  w.qweight = qweight;
  w.qzeros = qgru::gptq::pack_qzeros(layer.zeros, layer.G, layer.N, layer.bits, qgru::gptq::CheckpointFormat::kGptqV2,
                                     "qzeros");
  w.scales.resize(layer.scales.size());
  for (size_t i = 0; i < layer.scales.size(); ++i) w.scales[i] = qgru::float_to_half_bits(layer.scales[i]);  // exact: fp16 values
  w.g_idx = layer.g_idx;
  const qgru::cuda::QuantLinear gpu(w);
  std::vector<uint16_t> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i] = qgru::float_to_half_bits(x[i]);
  const std::vector<uint16_t> y16 = gpu.run_host(x16, M);
  std::vector<float> y(y16.size());
  for (size_t i = 0; i < y16.size(); ++i) y[i] = qgru::half_bits_to_float(y16[i]);
  return y;
#else
  (void)layer, (void)qweight, (void)x, (void)M;
  throw qgru::Error("no CUDA device: this qgru was built without CUDA support");
#endif
}

int run_linear(const LinearCli& cli) {
  qgru::check_command_files({{"--checkpoint", cli.checkpoint},
                             {"--checkpoint (its quantize_config.json)", qgru::gptq::quantize_config_path_beside(cli.checkpoint)},
                             {"--input", qgru::array_file_path(cli.input)}},
                            {{"--output", cli.output}});
  const auto start = std::chrono::steady_clock::now();
  const qgru::gptq::QuantizeConfig config =
      qgru::gptq::read_quantize_config(qgru::gptq::quantize_config_path_beside(cli.checkpoint));
  const qgru::SafetensorsFile file = qgru::read_safetensors(cli.checkpoint);
  const qgru::gptq::QuantizedLayer layer =
      qgru::gptq::read_layer(file, cli.layer, config.bits, config.format, cli.checkpoint, config.v1_zero_rule);
  const std::vector<float> bias = cli.no_bias ? std::vector<float>() : read_bias(file, cli.layer, layer.N, cli.checkpoint);
  const qgru::Tensor input = qgru::read_array(cli.input);
  if (input.rank() != 2 || input.shape[1] != layer.K) {
    throw qgru::Error(cli.input + ": input has shape " + qgru::shape_string(input.shape) + ", expected [M, " +
                      std::to_string(layer.K) + "] for layer '" + cli.layer + "'");
  }
  const int64_t M = input.shape[0];
  const std::vector<float> x = qgru::tensor_to_f32(input);
  const std::vector<int32_t> qweight = qgru::gptq::pack_qweight(layer.codes, layer.N, layer.K, layer.bits, cli.layer + ".qweight");
  std::vector<float> y = cli.device == "cuda" ? linear_cuda(layer, qweight, x, M) : linear_cpu(layer, qweight, x, M);
  if (!bias.empty()) {  // float32 sum; on cuda y holds fp16 values, and the clients add their fp16 bias likewise
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < layer.N; ++n) y[static_cast<size_t>(m * layer.N + n)] += bias[static_cast<size_t>(n)];
  }
  qgru::write_npy(cli.output, qgru::Tensor::from_vector({M, layer.N}, y));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("linear %s: M=%lld N=%lld K=%lld bits=%d bias=%s device=%s -> %s (%.1f ms)\n", cli.layer.c_str(),
              static_cast<long long>(M), static_cast<long long>(layer.N), static_cast<long long>(layer.K), layer.bits,
              bias.empty() ? "no" : "yes", cli.device.c_str(), cli.output.c_str(), ms);
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
                      "Example:\n"
                      "  qgru linear --checkpoint q/model.safetensors --layer fc1 --input x.npy --output y.npy");
                  return [cli] { return run_linear(*cli); };
                });
