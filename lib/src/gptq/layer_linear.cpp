#include "qgru/gptq/layer_linear.h"

#include "qgru/gptq/linear.h"

namespace qgru::gptq {

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

}  // namespace qgru::gptq
