#include "qgru/gptq/layer_linear.h"

#include "qgru/base/error.h"
#include "qgru/gptq/linear.h"
#include "qgru/gptq/pack.h"
#include "qgru/io/safetensors.h"

namespace qgru::gptq {

namespace {

// PREFIX.bias as floats, or empty when the file has none. Must be a float vector [N].
std::vector<float> read_bias(const SafetensorsFile& file, const std::string& prefix, int64_t N,
                             const std::string& source) {
  const auto it = file.tensors.find(prefix + ".bias");
  if (it == file.tensors.end()) return {};
  const Tensor& bias = it->second;
  if ((bias.dtype != DType::F16 && bias.dtype != DType::F32 && bias.dtype != DType::BF16) ||
      bias.shape != std::vector<int64_t>{N}) {
    throw Error(source + ": tensor '" + prefix + ".bias' is " + dtype_name(bias.dtype) + " " +
                shape_string(bias.shape) + ", expected F16 [" + std::to_string(N) + "]");
  }
  return tensor_to_f32(bias);
}

}  // namespace

CheckpointLayer checkpoint_layer(const SafetensorsFile& file, const QuantizeConfig& config, const std::string& prefix,
                                 bool with_bias, const std::string& source) {
  CheckpointLayer checkpoint;
  checkpoint.layer = read_layer(file, prefix, config.bits, config.format, source, config.v1_zero_rule);
  const QuantizedLayer& layer = checkpoint.layer;
  if (with_bias) checkpoint.bias = read_bias(file, prefix, layer.N, source);
  checkpoint.qweight = pack_qweight(layer.codes, layer.N, layer.K, layer.bits, prefix + ".qweight");
  return checkpoint;
}

CheckpointLayer read_checkpoint_layer(const std::string& checkpoint_path, const std::string& prefix, bool with_bias) {
  const QuantizeConfig config = read_quantize_config(quantize_config_path_beside(checkpoint_path));
  return checkpoint_layer(read_safetensors(checkpoint_path), config, prefix, with_bias, checkpoint_path);
}

std::vector<float> linear_input(const Tensor& input, const std::string& source, const CheckpointLayer& checkpoint,
                                const std::string& prefix, int64_t& M) {
  const int64_t K = checkpoint.layer.K;
  if (input.rank() != 2 || input.shape[1] != K) {
    throw Error(source + ": input has shape " + shape_string(input.shape) + ", expected [M, " + std::to_string(K) +
                "] for layer '" + prefix + "'");
  }
  M = input.shape[0];
  return tensor_to_f32(input);
}

std::vector<float> layer_linear_f32(const QuantizedLayer& layer, const std::vector<int32_t>& qweight,
                                    const std::vector<float>& x, int64_t M) {
  const int64_t N = layer.N, K = layer.K;
  // linear_f32 computes C [N, M] = Ŵ · A for A [K, M]: x is transposed in, y out.
  std::vector<float> xt(static_cast<size_t>(K * M)), yt(static_cast<size_t>(N * M)), y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) xt[static_cast<size_t>(k * M + m)] = x[static_cast<size_t>(m * K + k)];
  std::vector<float> zeros(layer.zeros.begin(), layer.zeros.end());
  const auto codes = autogptq_codes(qweight.data(), layer.bits, N, K);
  GroupParamsView params;
  params.scale = layer.scales.data();
  params.zero = zeros.data();
  params.stride_g = N;
  params.stride_n = 1;
  params.g_idx = layer.g_idx.data();
  params.group_size = (K + layer.G - 1) / layer.G;
  std::vector<float> workspace(linear_workspace_floats(codes));
  linear_f32(codes, params, xt.data(), M, M, yt.data(), M, workspace.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) y[static_cast<size_t>(m * N + n)] = yt[static_cast<size_t>(n * M + m)];
  return y;
}

void add_linear_bias(std::vector<float>& y, const std::vector<float>& bias, int64_t M) {
  const int64_t N = static_cast<int64_t>(bias.size());
  for (int64_t m = 0; m < M && N > 0; ++m)
    for (int64_t n = 0; n < N; ++n) y[static_cast<size_t>(m * N + n)] += bias[static_cast<size_t>(n)];
}

}  // namespace qgru::gptq
