// GPTQ on the GPU (qgru_cuda/gptq_device.h) against the CPU path (qgru/gptq/gptq.h) on the same data:
//   Hessian   DeviceHessian (float32 rows widened; cublasDsyrk or cublasDgemm; from host rows, host columns
//             and device rows) against HessianAccumulator (OpenBLAS dsyrk): both are float64 sums of exact
//             products, so they differ by summation order only: max |ΔH| <= 1e-11 · max |H|; exactly symmetric.
//   GPTQ      gptq_quantize_device against gptq_quantize on the CPU's H (so only the GPTQ steps differ): the
//             two run the same arithmetic per row (row_block.h) but their U (cuSOLVER / LAPACK) and lazy updates
//             (cublasDgemm / OpenBLAS) round differently, so a value that is quantized sits a few ulps apart.
//             A code may then differ only where the value is a near-tie: its rounding margin (row_block.h,
//             distance to the rounding boundary in grid steps) below kNearTie = 1e-6 on the device — far above
//             the paths' drift (float64 roundings of values a few grid steps wide: expected well under 1e-9
//             steps; this check is where it is first seen on a GPU) and far below a typical margin (uniform
//             in [0, ½]). Once a row's codes part at a near-tie its later values legitimately differ (error
//             feedback), so per row only the first differing code in processing order is judged. Group
//             parameters (scale, zero) likewise: equal to 1e-9 relative, or in a row that parted earlier.
//             Error ‖(W − Ŵ)X‖² / ‖WX‖² within 1% of the CPU path's. The words packed on the device equal the
//             host's packing (pack_qweight) of the device's codes.
// Layers: the benchmark layers' data (docs/benchmarks/gptq.md: W ~ N(0, 0.02²), X iso or K/16 latent factors,
// 5% noise, channel scales exp(N(0, 1))) at 256 × 512 for every column order, static groups, 3-bit symmetric
// and one group per row, and at 4096 × 4096, 2048 rows, with `qgru gptq`'s defaults.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_checks.h"
#include "qgru/gptq/gptq.h"
#include "qgru/gptq/hessian.h"
#include "qgru/gptq/pack.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gptq_device.h"

namespace qgru::cuda_test {

namespace {

constexpr double kNearTie = 1e-6;

struct Layer {
  int64_t N, K, M;
  std::vector<double> W;     // [N, K]
  std::vector<float> rows;   // [M, K]
};

Layer make_layer(int64_t N, int64_t K, int64_t M, bool correlated, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Layer layer{N, K, M, std::vector<double>(static_cast<size_t>(N * K)), std::vector<float>(static_cast<size_t>(M * K))};
  for (double& w : layer.W) w = 0.02 * normal(rng);
  if (!correlated) {
    for (float& x : layer.rows) x = static_cast<float>(normal(rng));
    return layer;
  }
  const int64_t rank = std::max<int64_t>(1, K / 16);
  std::vector<double> mix(static_cast<size_t>(K * rank)), scale(static_cast<size_t>(K)), latent(static_cast<size_t>(rank));
  for (double& v : mix) v = normal(rng);
  for (double& v : scale) v = std::exp(normal(rng));
  for (int64_t t = 0; t < M; ++t) {
    for (double& v : latent) v = normal(rng);
    for (int64_t k = 0; k < K; ++k) {
      double value = 0.05 * normal(rng);
      for (int64_t r = 0; r < rank; ++r) value += mix[static_cast<size_t>(k * rank + r)] * latent[static_cast<size_t>(r)];
      layer.rows[static_cast<size_t>(t * K + k)] = static_cast<float>(scale[static_cast<size_t>(k)] * value);
    }
  }
  return layer;
}

double relative_error(const Layer& layer, const gptq::GptqResult& result, const std::vector<double>& H) {
  const std::vector<double> W_hat = gptq::dequantize(result);
  std::vector<double> D(layer.W.size());
  for (size_t i = 0; i < D.size(); ++i) D[i] = layer.W[i] - W_hat[i];
  return gptq::output_energy(D, layer.N, layer.K, H) / gptq::output_energy(layer.W, layer.N, layer.K, H);
}

int check_one(const Layer& layer, const std::vector<double>& H, const gptq::GptqOptions& options, const char* name) {
  const auto t0 = std::chrono::steady_clock::now();
  const gptq::GptqResult cpu = gptq::gptq_quantize(layer.W, layer.N, layer.K, H, options);
  const auto t1 = std::chrono::steady_clock::now();
  // What `qgru gptq --device cuda` runs, and the entry point with the rounding margins (H uploaded by both).
  const gptq::GptqResult via_cli = cuda::gptq_quantize_cuda(layer.W, layer.N, layer.K, H, options);
  const auto t2 = std::chrono::steady_clock::now();
  cuda::DeviceGptqRequest request;
  request.want_tie_margin = true;
  const cuda::DeviceGptqOutput gpu = cuda::gptq_quantize_device(layer.W, layer.N, layer.K, H, options, request);
  int failures = 0;
  const gptq::GptqResult& dev = gpu.result;
  if (dev.perm != cpu.perm || dev.g_idx != cpu.g_idx || dev.G != cpu.G) {
    std::printf("FAIL gptq %s: permutation, g_idx or group count differ from the CPU path\n", name);
    return 1;
  }
  if (via_cli.codes != dev.codes || via_cli.scales != dev.scales) {
    std::printf("FAIL gptq %s: two runs on one device differ (gptq_quantize_cuda, gptq_quantize_device)\n", name);
    ++failures;
  }
  // The words packed on the device (pack_qweight_kernel) against the host's packing of the same codes.
  if (layer.K * options.bits % 32 == 0 &&
      gpu.qweight != gptq::pack_qweight(dev.codes, layer.N, layer.K, options.bits, "device codes")) {
    std::printf("FAIL gptq %s: qweight packed on the device differs from pack_qweight of its codes\n", name);
    ++failures;
  }
  const int64_t N = layer.N, K = layer.K;
  int64_t parted_rows = 0, bad_rows = 0, param_rows = 0;
  for (int64_t n = 0; n < N; ++n) {
    // First differing code of row n in processing order.
    int64_t first = K;
    for (int64_t p = 0; p < K && first == K; ++p) {
      const size_t at = static_cast<size_t>(n * K + cpu.perm[static_cast<size_t>(p)]);
      if (dev.codes[at] != cpu.codes[at]) first = p;
    }
    bool parameters_equal = true;
    for (int64_t g = 0; g < cpu.G; ++g) {
      const size_t at = static_cast<size_t>(g * N + n);
      parameters_equal = parameters_equal && dev.zeros[at] == cpu.zeros[at] &&
                         std::fabs(dev.scales[at] - cpu.scales[at]) <= 1e-9 * std::fabs(cpu.scales[at]);
    }
    if (first == K) {
      if (!parameters_equal) ++param_rows;  // parameters apart with every code equal: a near-tie of a zero point
      continue;
    }
    ++parted_rows;
    const size_t at = static_cast<size_t>(n * K + cpu.perm[static_cast<size_t>(first)]);
    if (!(gpu.tie_margin[at] < kNearTie)) {
      if (bad_rows++ < 3) {
        std::printf("FAIL gptq %s: row %lld parts from the CPU at processed column %lld (column %lld): codes %d vs "
                    "%d with rounding margin %.3g (>= %.0e: not a near-tie)\n",
                    name, static_cast<long long>(n), static_cast<long long>(first),
                    static_cast<long long>(cpu.perm[static_cast<size_t>(first)]), dev.codes[at], cpu.codes[at],
                    gpu.tie_margin[at], kNearTie);
      }
    }
  }
  failures += bad_rows > 0;
  if (param_rows * 1000 > N) {
    std::printf("FAIL gptq %s: %lld rows have every code equal but group parameters apart (> 0.1%%)\n", name,
                static_cast<long long>(param_rows));
    ++failures;
  }
  const double cpu_err = relative_error(layer, cpu, H), gpu_err = relative_error(layer, dev, H);
  if (!(std::fabs(gpu_err - cpu_err) <= 0.01 * cpu_err)) {
    std::printf("FAIL gptq %s: device rel_err %.6g vs CPU %.6g (more than 1%% apart)\n", name, gpu_err, cpu_err);
    ++failures;
  }
  std::printf("gptq %s: [%lld, %lld]: rows parted at a near-tie %lld of %lld, parameter-only %lld; rel_err device "
              "%.6g CPU %.6g; CPU %.2f s, device (with upload) %.2f s, device GPTQ %.3f s\n",
              name, static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(parted_rows - bad_rows),
              static_cast<long long>(N), static_cast<long long>(param_rows), gpu_err, cpu_err,
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
              gpu.seconds);
  return failures;
}

}  // namespace

int check_gptq() {
  int failures = 0;
  for (bool correlated : {false, true}) {
    const Layer layer = make_layer(256, 512, 1024, correlated, correlated ? 2u : 1u);
    // Hessian: device against the CPU accumulator.
    gptq::HessianAccumulator cpu_h(layer.K);
    cpu_h.add_token_major(layer.rows.data(), layer.M);
    const std::vector<double> H = cpu_h.hessian();
    // Every way in: host rows (the CLI), host columns (the C API), device rows (the benchmark), each product.
    std::vector<float> columns(layer.rows.size());  // [K, M]
    for (int64_t t = 0; t < layer.M; ++t)
      for (int64_t k = 0; k < layer.K; ++k) columns[static_cast<size_t>(k * layer.M + t)] = layer.rows[static_cast<size_t>(t * layer.K + k)];
    const cuda::DeviceBuffer device_rows = cuda::DeviceBuffer::from(layer.rows);
    for (gptq::HessianProduct product : {gptq::HessianProduct::kSyrk, gptq::HessianProduct::kGemm}) {
      for (int way = 0; way < 3; ++way) {
        cuda::DeviceHessian dev_h(layer.K, nullptr, product);
        if (way == 0) {
          dev_h.add_token_major(layer.rows.data(), layer.M / 2);
          dev_h.add_token_major(layer.rows.data() + layer.M / 2 * layer.K, layer.M - layer.M / 2);
        } else if (way == 1) {
          dev_h.add_feature_major(columns.data(), layer.M);
        } else {
          dev_h.add_device_rows(static_cast<const float*>(device_rows.data()), layer.M, layer.K);
        }
        const std::vector<double> Hd = dev_h.hessian();
        double max_h = 0.0, max_diff = 0.0;
        bool symmetric = true;
        for (size_t i = 0; i < H.size(); ++i) {
          max_h = std::max(max_h, std::fabs(H[i]));
          max_diff = std::max(max_diff, std::fabs(H[i] - Hd[i]));
          const size_t r = i / static_cast<size_t>(layer.K), c = i % static_cast<size_t>(layer.K);
          symmetric = symmetric && Hd[i] == Hd[c * static_cast<size_t>(layer.K) + r];
        }
        const char* ways[] = {"host rows", "host columns", "device rows"};
        if (!(max_diff <= 1e-11 * max_h) || !symmetric || dev_h.tokens() != layer.M) {
          std::printf("FAIL gptq hessian (%s, %s, %s): max |dH| %.3g vs max |H| %.3g, symmetric %d, tokens %lld\n",
                      correlated ? "corr" : "iso", gptq::hessian_product_name(product), ways[way], max_diff, max_h,
                      static_cast<int>(symmetric), static_cast<long long>(dev_h.tokens()));
          ++failures;
        } else {
          std::printf("gptq hessian (%s, %s, %s): max |dH| / max |H| = %.3g\n", correlated ? "corr" : "iso",
                      gptq::hessian_product_name(product), ways[way], max_diff / max_h);
        }
      }
    }
    struct Case {
      const char* name;
      const char* order;
      bool static_groups, sym;
      int bits;
      int64_t group_size, block_size;
    };
    const Case cases[] = {{"natural", "natural", false, false, 4, 128, 128},
                          {"act-order", "act-order", false, false, 4, 128, 128},
                          {"group-aware", "group-aware", false, false, 4, 128, 128},
                          {"act-order static", "act-order", true, false, 4, 128, 96},
                          {"3-bit sym g64", "group-aware", false, true, 3, 64, 40},
                          {"per-row", "act-order", false, false, 4, -1, 128}};
    for (const Case& c : cases) {
      gptq::GptqOptions options = gptq::recommended_options();
      gptq::set_column_order(options, c.order);
      options.static_groups = c.static_groups;
      options.sym = c.sym;
      options.bits = c.bits;
      options.group_size = c.group_size;
      options.block_size = c.block_size;
      const std::string name = std::string(correlated ? "corr " : "iso ") + c.name;
      failures += check_one(layer, H, options, name.c_str());
    }
  }
  {  // The benchmark layer with `qgru gptq`'s defaults.
    const Layer layer = make_layer(4096, 4096, 2048, true, 3);
    gptq::HessianAccumulator cpu_h(layer.K);
    cpu_h.add_token_major(layer.rows.data(), layer.M);
    failures += check_one(layer, cpu_h.hessian(), gptq::recommended_options(), "corr 4096x4096 defaults");
  }
  return failures;
}

}  // namespace qgru::cuda_test
