// Activation rows generated on the device for bench_cuda_gptq, so that 262,144 × 11008 float32 values (11.5 GB)
// never cross PCIe: x[t, k] = c_k · z(t, k), z standard normal (Box–Muller on two splitmix64 draws of
// (seed, t, k)), channel scales c_k = exp(z'(k)) from another draw (uneven channels, as the benchmark data's).
#include <cuda_runtime.h>

#include <cstdint>

#include "gptq_rows.h"
#include "qgru_cuda/check.h"

namespace qgru::cuda_test {

namespace {

__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ float normal_draw(uint64_t key) {
  const uint64_t bits = splitmix64(key);
  const float u1 = (static_cast<float>(bits >> 40) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = static_cast<float>((bits >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

__global__ void generate_rows_kernel(float* rows, int64_t t0, int64_t count, int64_t K, uint64_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count * K;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = t0 + i / K, k = i % K;
    const float channel = expf(normal_draw(seed * 0x100000001B3ull + static_cast<uint64_t>(k)));
    rows[i] = channel * normal_draw((seed << 40) ^ (static_cast<uint64_t>(t) * static_cast<uint64_t>(K) + k + 1));
  }
}

}  // namespace

void generate_rows(float* rows, int64_t t0, int64_t count, int64_t K, uint64_t seed, void* stream) {
  generate_rows_kernel<<<4096, 256, 0, static_cast<cudaStream_t>(stream)>>>(rows, t0, count, K, seed);
  QGRU_CUDA_CHECK_LAUNCH("generate_rows_kernel");
}

}  // namespace qgru::cuda_test
