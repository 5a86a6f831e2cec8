// The resident checkpoint layer behind the Python package's qgru.QuantLinear(device="cuda")
// (qgru/gptq/resident_linear.h: the layer uploaded once into the C API's resident QuantLinear, each call on host
// floats) against the same object on the CPU (layer_linear_f32, what qgru.gptq_linear computes): 4 and 8 bits,
// zero points over [0, maxq] (0 included, the value v1 files store by borrowing), one group per row and groups
// of 128, act-order (g_idx permuted), with and without a bias, M = 1, 5 and 40, two calls on one upload. The GPU
// rounds x and each weight to fp16, sums in fp32 and rounds y to fp16 before the fp32 bias; the CPU sums x·ŵ in
// fp32. Tolerance per output (capi_check.cpp's): 2^-10·|ref| + 3·2^-11·mag + 2·K·2^-23·mag + 2^-22,
// mag = Σ|x·ŵ| + |bias| in double. Also: 2-bit layers refused naming the layer, and device_id beyond the devices
// refused. Written where no GPU runs: its first run is the next GPU session's self-test step
// (scripts/gpu_session.sh).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_checks.h"
#include "qgru/base/error.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/pack.h"
#include "qgru/gptq/resident_linear.h"
#include "qgru/half.h"

namespace qgru::cuda_test {

namespace {

// A checkpoint layer of random codes, fp16 scales and zero points (0 included), g_idx k / group_size or a random
// permutation of it (act-order), optionally a bias.
gptq::CheckpointLayer random_checkpoint_layer(int bits, int64_t N, int64_t K, int64_t group_size, bool act_order,
                                              bool bias, std::mt19937& rng) {
  gptq::CheckpointLayer c;
  gptq::QuantizedLayer& q = c.layer;
  q.bits = bits;
  q.N = N;
  q.K = K;
  q.G = (K + group_size - 1) / group_size;
  const int maxq = (1 << bits) - 1;
  std::uniform_int_distribution<int> code(0, maxq);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), unit(-1.0f, 1.0f);
  q.codes.resize(static_cast<size_t>(N * K));
  for (auto& v : q.codes) v = code(rng);
  q.scales.resize(static_cast<size_t>(q.G * N));
  for (auto& v : q.scales) v = half_bits_to_float(float_to_half_bits(scale(rng)));  // fp16 values
  q.zeros.resize(static_cast<size_t>(q.G * N));
  for (auto& v : q.zeros) v = code(rng) % 3 == 0 ? 0 : code(rng);
  q.g_idx.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) q.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / group_size);
  if (act_order) std::shuffle(q.g_idx.begin(), q.g_idx.end(), rng);
  c.qweight = gptq::pack_qweight(q.codes, N, K, bits, "qweight");
  if (bias) {
    c.bias.resize(static_cast<size_t>(N));
    for (auto& v : c.bias) v = half_bits_to_float(float_to_half_bits(unit(rng)));
  }
  return c;
}

int compare(const gptq::CheckpointLayer& c, const std::vector<double>& w_hat, const std::vector<float>& x, int64_t M,
            const std::vector<float>& got, const std::vector<float>& want, const std::string& label) {
  const int64_t N = c.layer.N, K = c.layer.K;
  int mismatches = 0;
  if (got.size() != want.size()) {
    std::printf("FAIL resident linear %s: %zu outputs, expected %zu\n", label.c_str(), got.size(), want.size());
    return 1;
  }
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double mag = c.bias.empty() ? 0.0 : std::fabs(static_cast<double>(c.bias[static_cast<size_t>(n)]));
      for (int64_t k = 0; k < K; ++k) {
        mag += std::fabs(static_cast<double>(x[static_cast<size_t>(m * K + k)]) * w_hat[static_cast<size_t>(n * K + k)]);
      }
      const double ref = want[static_cast<size_t>(m * N + n)], value = got[static_cast<size_t>(m * N + n)];
      const double tol = std::ldexp(std::fabs(ref), -10) + 3.0 * std::ldexp(mag, -11) +
                         2.0 * static_cast<double>(K) * std::ldexp(mag, -23) + std::ldexp(1.0, -22);
      if (!(std::fabs(value - ref) <= tol) && ++mismatches <= 3) {
        std::printf("  %s: mismatch at m=%lld n=%lld: cuda %.8g cpu %.8g (tol %.3g)\n", label.c_str(),
                    static_cast<long long>(m), static_cast<long long>(n), value, ref, tol);
      }
    }
  }
  std::printf("%s resident linear %s\n", mismatches == 0 ? "ok  " : "FAIL", label.c_str());
  return mismatches == 0 ? 0 : 1;
}

// Runs `make`, which must throw a qgru::Error whose message starts with `prefix`.
template <typename Make>
int expect_refusal(const std::string& label, const std::string& prefix, Make&& make) {
  try {
    make();
  } catch (const Error& e) {
    const std::string message = e.what();
    const bool ok = message.rfind(prefix, 0) == 0;
    std::printf("%s resident linear refuses %s: %s\n", ok ? "ok  " : "FAIL", label.c_str(), message.c_str());
    return ok ? 0 : 1;
  }
  std::printf("FAIL resident linear refuses %s: accepted\n", label.c_str());
  return 1;
}

}  // namespace

int check_resident_linear() {
  std::mt19937 rng(20261128);
  int failures = 0;
  const int64_t N = 256, K = 512;
  for (const int bits : {4, 8}) {
    for (const int64_t group_size : {int64_t{128}, K}) {
      for (const bool act_order : {false, true}) {
        if (act_order && group_size == K) continue;  // one group: nothing to permute
        const bool bias = act_order || bits == 8;
        const gptq::CheckpointLayer c = random_checkpoint_layer(bits, N, K, group_size, act_order, bias, rng);
        const std::vector<double> w_hat = gptq::dequantize(c.layer);
        const std::string name = std::to_string(bits) + "-bit g" + std::to_string(group_size) +
                                 (act_order ? " act-order" : "") + (bias ? " bias" : "");
        const gptq::ResidentLinear cpu(c, gptq::LinearDevice::kCpu, 0, name);
        const gptq::ResidentLinear gpu(c, gptq::LinearDevice::kCuda, 0, name);
        std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
        for (const int64_t M : {int64_t{1}, int64_t{5}, int64_t{40}, int64_t{5}}) {  // 5 twice: the upload is kept
          std::vector<float> x(static_cast<size_t>(M * K));
          for (auto& v : x) v = unit(rng);
          failures += compare(c, w_hat, x, M, gpu.run(x, M), cpu.run(x, M), name + " M=" + std::to_string(M));
        }
      }
    }
  }
  const gptq::CheckpointLayer two_bit = random_checkpoint_layer(2, 64, 128, 64, false, false, rng);
  failures += expect_refusal("2-bit weights", "fc: device cuda: ", [&] {
    gptq::ResidentLinear(two_bit, gptq::LinearDevice::kCuda, 0, "fc");
  });
  const gptq::CheckpointLayer four_bit = random_checkpoint_layer(4, 64, 128, 64, false, false, rng);
  failures += expect_refusal("device_id 4096", "fc: device cuda: no CUDA device 4096", [&] {
    gptq::ResidentLinear(four_bit, gptq::LinearDevice::kCuda, 4096, "fc");
  });
  return failures;
}

}  // namespace qgru::cuda_test
