// The C API's [N, K/8] / [N, G] weights in the GPTQ checkpoint layout the GPU kernels read (capi_internal.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "capi_internal.h"
#include "qgru/gptq/pack.h"
#include "qgru/half.h"

namespace qgru::capi {

namespace {

float load(qgruDtype_t dtype, const void* base, size_t index) {
  if (dtype == QGRU_DTYPE_F32) return static_cast<const float*>(base)[index];
  return qgru::half_bits_to_float(static_cast<const uint16_t*>(base)[index]);
}

uint16_t load_half_bits(qgruDtype_t dtype, const void* base, size_t index) {
  if (dtype == QGRU_DTYPE_F16) return static_cast<const uint16_t*>(base)[index];
  return qgru::float_to_half_bits(static_cast<const float*>(base)[index]);
}

void store(qgruDtype_t dtype, void* base, size_t index, float value) {
  if (dtype == QGRU_DTYPE_F32) static_cast<float*>(base)[index] = value;
  else static_cast<uint16_t*>(base)[index] = qgru::float_to_half_bits(value);
}

}  // namespace

gptq::GptqOptions capi_gptq_options(const qgruQuantizeGPTQDescriptor& d) {
  gptq::GptqOptions options;
  options.bits = 4;
  options.group_size = d.G == 1 ? -1 : d.K / d.G;
  options.damp = d.damp;
  options.act_order = d.act_order;
  options.static_groups = d.act_order;  // groups stay [g·size, (g+1)·size): the [N, G] layout has no g_idx
  return options;
}

void capi_write_gptq_result(const qgruQuantizeGPTQDescriptor& d, const gptq::GptqResult& result, void* packed,
                            int64_t stride_packed, void* scale, int64_t stride_scale, void* zero, int64_t stride_zero) {
  for (int64_t k = 0; k < d.K; ++k) {
    if (result.g_idx[static_cast<size_t>(k)] != k / (d.K / d.G)) {
      throw qgru::Error("column " + std::to_string(k) + " landed in group " +
                        std::to_string(result.g_idx[static_cast<size_t>(k)]) + ", not k / group_size");
    }
  }
  auto* words = static_cast<uint32_t*>(packed);
  for (int64_t n = 0; n < d.N; ++n) {
    uint32_t* row = words + n * stride_packed;
    std::fill(row, row + d.K / 8, 0u);
    for (int64_t k = 0; k < d.K; ++k) {
      gptq::put_code(row, 1, k, 4, static_cast<uint32_t>(result.codes[static_cast<size_t>(n * d.K + k)]));
    }
    for (int64_t g = 0; g < d.G; ++g) {
      const size_t src = static_cast<size_t>(g * d.N + n);
      store(d.dtype, scale, static_cast<size_t>(n * stride_scale + g), static_cast<float>(result.scales[src]));
      store(d.dtype, zero, static_cast<size_t>(n * stride_zero + g), static_cast<float>(result.zeros[src]));
    }
  }
}

CheckpointLayer capi_to_checkpoint(qgruDtype_t dtype, int64_t N, int64_t K, int64_t G, const int32_t* packed,
                                   const void* scale, const void* zero) {
  if (N % 8 != 0 || K % 8 != 0 || G < 1 || K % G != 0) {
    throw qgru::Error("capi_to_checkpoint: N=" + std::to_string(N) + " K=" + std::to_string(K) + " G=" +
                      std::to_string(G) + " (N and K multiples of 8, G dividing K)");
  }
  const int64_t words = K / 8;
  CheckpointLayer layer;
  layer.qweight.resize(static_cast<size_t>(words * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t word = 0; word < words; ++word)
      layer.qweight[static_cast<size_t>(word * N + n)] = packed[static_cast<size_t>(n * words + word)];
  layer.qzeros.assign(static_cast<size_t>(G * (N / 8)), 0);
  layer.scales.resize(static_cast<size_t>(G * N));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const size_t at = static_cast<size_t>(n * G + g);
      const float z = load(dtype, zero, at);
      if (!(z >= 0.0f && z <= 15.0f && std::floor(z) == z)) {  // NaN fails the first test
        throw BadZeroPoint("zero[" + std::to_string(n) + ", " + std::to_string(g) + "] = " + std::to_string(z) +
                           ": the CUDA kernels take integral 4-bit zero points in [0, 15]");
      }
      auto& word = layer.qzeros[static_cast<size_t>(g * (N / 8) + n / 8)];
      word = static_cast<int32_t>(static_cast<uint32_t>(word) | (static_cast<uint32_t>(z) << (4 * (n % 8))));
      layer.scales[static_cast<size_t>(g * N + n)] = load_half_bits(dtype, scale, at);
    }
  }
  return layer;
}

}  // namespace qgru::capi
