// The C API's [N, K/8] / [N, G] weights in the GPTQ checkpoint layout the GPU kernels read (capi_internal.h).
#include <cmath>
#include <cstring>
#include <string>

#include "capi_internal.h"
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

}  // namespace

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
