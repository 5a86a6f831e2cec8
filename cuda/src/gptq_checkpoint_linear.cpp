#include "qgru_cuda/gptq_checkpoint_linear.h"

#include "qgru/gptq/pack.h"
#include "qgru/half.h"

namespace qgru::cuda {

GptqLinearWeights checkpoint_linear_weights(const gptq::QuantizedLayer& layer, const std::vector<int32_t>& qweight) {
  GptqLinearWeights w;
  w.K = layer.K;
  w.N = layer.N;
  w.bits = layer.bits;
  w.group_size = (layer.K + layer.G - 1) / layer.G;
  w.zero_adjust = 0;  // zeros packed as gptq_v2 (the zero points themselves)
  w.qweight = qweight;
  w.qzeros = gptq::pack_qzeros(layer.zeros, layer.G, layer.N, layer.bits, gptq::CheckpointFormat::kGptqV2, "qzeros");
  w.scales.resize(layer.scales.size());
  for (size_t i = 0; i < layer.scales.size(); ++i) w.scales[i] = float_to_half_bits(layer.scales[i]);  // exact: fp16 values
  w.g_idx = layer.g_idx;
  return w;
}

std::vector<float> run_host_floats(const QuantLinear& linear, const std::vector<float>& x, int64_t M) {
  std::vector<uint16_t> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i] = float_to_half_bits(x[i]);
  const std::vector<uint16_t> y16 = linear.run_host(x16, M);
  std::vector<float> y(y16.size());
  for (size_t i = 0; i < y16.size(); ++i) y[i] = half_bits_to_float(y16[i]);
  return y;
}

}  // namespace qgru::cuda
