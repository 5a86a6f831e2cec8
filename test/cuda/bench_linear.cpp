// Benchmark: QuantLinear (W4A16 or W8A16, group 128) against cuBLAS fp16 GEMM (fp32 compute) of the
// dequantized weight, for K = 4096 and N in {4096, 11008}, M in {1, 16, 64, 256}. CUDA events, warm-up,
// median of the timed runs; a markdown table with the ratio cuBLAS / ours (> 1: ours is faster).
// Without a GPU it prints "no usable GPU: <reason>" and exits 1.
// Usage: bench_cuda_linear [--bits 4|8] [--iters N] [--blocks-per-sm B[,B...]] [--configs NAME[,NAME...]]
//   --blocks-per-sm: the split-K targets to time (kernels::LinearTuning), one row each; 0 is the library's
//   default (the tile's own), the only one timed unless told otherwise.
//   --configs: tile configurations to time (kTileConfigs names of the same bit width; "default": the plan's
//   choice, the only one unless told otherwise), one row each per target.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/half.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/quant_linear.h"

namespace {

using qgru::cuda::DeviceBuffer;

// Median time in microseconds of `iters` runs of fn after `warmup` runs, each timed with its own events.
double median_us(const std::function<void()>& fn, int warmup, int iters) {
  return 1000.0 * qgru::cuda::bench::time_calls(fn, warmup, iters).median_ms;
}

qgru::cuda::GptqLinearWeights random_layer(int64_t K, int64_t N, int bits, std::mt19937& rng) {
  qgru::cuda::GptqLinearWeights w;
  w.K = K;
  w.N = N;
  w.bits = bits;
  w.group_size = 128;
  const int64_t G = K / 128;
  w.qweight.resize(static_cast<size_t>(K * bits / 32 * N));
  w.qzeros.resize(static_cast<size_t>(G * N * bits / 32));
  w.scales.resize(static_cast<size_t>(G * N));
  for (auto& v : w.qweight) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
  for (auto& v : w.qzeros) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
  for (auto& v : w.scales) v = qgru::float_to_half_bits(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.0f);
  return w;
}

std::vector<uint16_t> dequantize(const qgru::cuda::GptqLinearWeights& w) {  // [K, N] fp16 bits
  std::vector<uint16_t> out(static_cast<size_t>(w.K * w.N));
  const auto* qw = reinterpret_cast<const uint32_t*>(w.qweight.data());
  const auto* qz = reinterpret_cast<const uint32_t*>(w.qzeros.data());
  for (int64_t k = 0; k < w.K; ++k) {
    const int64_t g = k / w.group_size;
    for (int64_t n = 0; n < w.N; ++n) {
      out[static_cast<size_t>(k * w.N + n)] = qgru::kernels::gptq_dequant_reference(
          qgru::kernels::gptq_weight_code(qw, w.N, w.bits, k, n), qgru::kernels::gptq_zero(qz, w.N, w.bits, g, n, 0),
          w.scales[static_cast<size_t>(g * w.N + n)]);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int bits = 4, iters = 50;
  std::vector<int> targets = {0};
  std::vector<std::string> configs = {"default"};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bits") == 0 && i + 1 < argc) {
      bits = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--blocks-per-sm") == 0 && i + 1 < argc) {
      targets.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) targets.push_back(std::max(0, std::atoi(item.c_str())));
    } else if (std::strcmp(argv[i], "--configs") == 0 && i + 1 < argc) {
      configs.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) configs.push_back(item);
    } else {
      std::fprintf(stderr, "usage: %s [--bits 4|8] [--iters N] [--blocks-per-sm B[,B...]] [--configs NAME[,NAME...]]\n",
                   argv[0]);
      return 2;
    }
  }
  const qgru::cuda::DeviceProbe probe = qgru::cuda::probe_devices();
  if (probe.device_count == 0) {
    std::printf("no usable GPU: %s\nbenchmark NOT RUN\n", probe.reason.c_str());
    return 1;
  }
  try {
    std::printf("GPU: %s, W%dA16 group 128, median of %d runs after 10 warm-up runs\n\n",
                qgru::cuda::device_name().c_str(), bits, iters);
    std::vector<int> config_indices;  // -1: the plan's choice
    for (const std::string& name : configs) {
      int index = -1;
      for (int c = 0; c < qgru::kernels::kTileConfigCount; ++c) {
        if (name == qgru::kernels::kTileConfigs[c].name) index = c;
      }
      if (name != "default" && (index < 0 || qgru::kernels::kTileConfigs[index].bits != bits)) {
        std::printf("FAILED: --configs: '%s' is not a %d-bit tile configuration\n", name.c_str(), bits);
        return 2;
      }
      config_indices.push_back(index);
    }
    std::printf("| K x N | M | tile | split-K (blocks/SM target, 0: default) | qgru us | cuBLAS fp16 us | cuBLAS/qgru | qgru weight GB/s |\n"
                "|---|---|---|---|---|---|---|---|\n");
    cublasHandle_t handle;
    QGRU_CUBLAS_CHECK(cublasCreate(&handle));
    std::mt19937 rng(42);
    const int64_t K = 4096;
    for (int64_t N : {int64_t{4096}, int64_t{11008}}) {
      const auto w = random_layer(K, N, bits, rng);
      qgru::cuda::QuantLinear layer(w);
      const DeviceBuffer w16 = DeviceBuffer::from(dequantize(w));
      for (int64_t M : {int64_t{1}, int64_t{16}, int64_t{64}, int64_t{256}}) {
        std::vector<uint16_t> a(static_cast<size_t>(M * K));
        for (auto& v : a) v = qgru::float_to_half_bits(static_cast<float>(rng() % 2001) / 1000.0f - 1.0f);
        const DeviceBuffer a_dev = DeviceBuffer::from(a);
        DeviceBuffer c_dev(static_cast<size_t>(M * N) * 2), c_ref(static_cast<size_t>(M * N) * 2);
        // Row-major C[M,N] = A[M,K]·W[K,N] is column-major C^T[N,M] = W^T[N,K]·A^T[K,M]: no transposes.
        const float alpha = 1.0f, beta = 0.0f;
        const double cublas = median_us(
            [&] {
              QGRU_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                             static_cast<int>(K), &alpha, w16.data(), CUDA_R_16F, static_cast<int>(N),
                                             a_dev.data(), CUDA_R_16F, static_cast<int>(K), &beta, c_ref.data(),
                                             CUDA_R_16F, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            },
            10, iters);
        for (const int config_index : config_indices) {
          for (const int target : targets) {
            layer.set_tuning({target, config_index});
            const qgru::kernels::LinearPlan plan = layer.plan(M);
            DeviceBuffer workspace(static_cast<size_t>(layer.workspace_bytes(M)));
            const double ours =
                median_us([&] { layer.run(a_dev.data(), M, c_dev.data(), workspace.data(), nullptr); }, 10, iters);
            const double weight_bytes = static_cast<double>(K) * static_cast<double>(N) * bits / 8.0;
            std::printf("| %lldx%lld | %lld | %s | %lld (%d) | %.1f | %.1f | %.2f | %.0f |\n", static_cast<long long>(K),
                        static_cast<long long>(N), static_cast<long long>(M),
                        qgru::kernels::kTileConfigs[plan.config_index].name, static_cast<long long>(plan.grid_z), target,
                        ours, cublas, cublas / ours, weight_bytes / (ours * 1e3));
          }
        }
      }
    }
    QGRU_CUBLAS_CHECK(cublasDestroy(handle));
    return 0;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
