// QuantLinear on the GPU against a CPU reference (see gpu_checks.h). The reference packs its own codes with
// a plain bit loop, dequantizes each weight exactly (RN_fp16(s·(u - z)), float-exact product) and sums in
// double. Tolerance per output: the final fp16 rounding (2^-11 relative) plus an fp32 accumulation bound
// K·2^-23·sum|a·w| plus one fp16 subnormal.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gpu_checks.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/half.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/quant_linear.h"
#include "qgru_cuda/status.h"

namespace qgru::cuda_test {

namespace {

bool compute_capability_is_9_0() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) return false;
  return major == 9 && minor == 0;
}

struct Shape {
  int64_t M, N, K, group;
  int bits, zero_adjust;
  bool act_order;
  bool symmetric = false;  // every zero point 2^(bits-1) (GPTQ's sym=True)
};

void put_field(std::vector<int32_t>& words, int64_t word_index, int slot, int bits, uint32_t value) {
  auto& w = words[static_cast<size_t>(word_index)];
  w = static_cast<int32_t>(static_cast<uint32_t>(w) | (value << (bits * slot)));
}

// config_index: the tile configuration to force (kernels::LinearTuning), -1 for the plan's own choice;
// setting: the engine setting the layer is loaded with. Besides the reference comparison, two more run()s on
// device buffers must copy nothing between host and device and, on the stripes engine, give the same bits as
// run_host (its reduction is deterministic).
int run_case(const Shape& s, uint32_t seed, int config_index, kernels::LinearKernelSetting setting) {
  std::mt19937 rng(seed);
  const int per_word = 32 / s.bits;
  const uint32_t maxq = (1u << s.bits) - 1u;
  const int64_t G = (s.K + s.group - 1) / s.group;
  std::vector<uint32_t> codes(static_cast<size_t>(s.K * s.N)), zeros(static_cast<size_t>(G * s.N));
  for (auto& c : codes) c = static_cast<uint32_t>(rng()) & maxq;
  for (auto& z : zeros) {  // true zero points
    z = s.symmetric ? (1u << (s.bits - 1)) : (static_cast<uint32_t>(rng()) % maxq) + static_cast<uint32_t>(s.zero_adjust);
  }
  cuda::GptqLinearWeights w;
  w.K = s.K;
  w.N = s.N;
  w.bits = s.bits;
  w.group_size = s.group;
  w.zero_adjust = s.zero_adjust;
  w.qweight.assign(static_cast<size_t>(s.K / per_word * s.N), 0);
  w.qzeros.assign(static_cast<size_t>(G * (s.N / per_word)), 0);
  w.scales.resize(static_cast<size_t>(G * s.N));
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t n = 0; n < s.N; ++n) put_field(w.qweight, (k / per_word) * s.N + n, static_cast<int>(k % per_word), s.bits, codes[static_cast<size_t>(k * s.N + n)]);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < s.N; ++n)
      put_field(w.qzeros, g * (s.N / per_word) + n / per_word, static_cast<int>(n % per_word), s.bits,
                zeros[static_cast<size_t>(g * s.N + n)] - static_cast<uint32_t>(s.zero_adjust));
  std::uniform_real_distribution<float> scale_dist(0.002f, 0.05f), act_dist(-1.0f, 1.0f);
  for (auto& v : w.scales) v = qgru::float_to_half_bits(scale_dist(rng));
  std::vector<int32_t> g_idx(static_cast<size_t>(s.K));
  for (int64_t k = 0; k < s.K; ++k) g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / s.group);
  if (s.act_order) {
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
    w.g_idx = g_idx;
  }
  std::vector<uint16_t> a(static_cast<size_t>(s.M * s.K));
  for (auto& v : a) v = qgru::float_to_half_bits(act_dist(rng));

  cuda::QuantLinear layer(w, setting);
  layer.set_tuning({0, config_index});
  const std::vector<uint16_t> c = layer.run_host(a, s.M);
  const kernels::LinearPlan plan = layer.plan(s.M);
  const kernels::EngineChoice engine = layer.engine(s.M);
  int repeat_bad = 0;
  std::vector<uint16_t> c_poisoned;  // run() into an output that held fp16 NaN (0xFFFF) everywhere
  {
    const cuda::DeviceBuffer a_dev = cuda::DeviceBuffer::from(a);
    // Outputs and workspace poisoned with NaN bits: an output the engine never writes, or a partial sum it reads
    // before any block wrote it, fails the comparison below instead of passing on the right values an earlier
    // case (the same layer and activations under another setting) left in reused device memory.
    const std::vector<uint16_t> nan_outputs(c.size(), 0xFFFFu);
    cuda::DeviceBuffer c1 = cuda::DeviceBuffer::from(nan_outputs), c2 = cuda::DeviceBuffer::from(nan_outputs);
    cuda::DeviceBuffer ws = cuda::DeviceBuffer::from(std::vector<unsigned char>(static_cast<size_t>(layer.workspace_bytes(s.M)), 0xFFu));
    const int64_t transfers = cuda::host_transfer_count();
    layer.run(a_dev.data(), s.M, c1.data(), ws.data(), nullptr);
    layer.run(a_dev.data(), s.M, c2.data(), ws.data(), nullptr);
    if (cuda::host_transfer_count() != transfers) {
      std::printf("  run() made %lld host<->device copies, expected 0\n", static_cast<long long>(cuda::host_transfer_count() - transfers));
      ++repeat_bad;
    }
    // The stripes and wgmma engines' alignment rules are refused before any launch (a misaligned store would end the
    // context): C two bytes in, a workspace eight bytes in.
    const bool stripes_layout = engine.engine == kernels::LinearEngine::Stripes || engine.engine == kernels::LinearEngine::Wgmma;
    if (stripes_layout) {
      auto* c_bytes = static_cast<unsigned char*>(c1.data());
      auto* ws_bytes = static_cast<unsigned char*>(ws.data());
      const struct {
        void* c;
        void* workspace;
        const char* what;
      } misaligned[] = {{c_bytes + 2, ws.data(), "C"}, {c1.data(), ws_bytes + 8, "workspace"}};
      for (const auto& m : misaligned) {
        if (m.workspace != ws.data() && layer.workspace_bytes(s.M) == 0) continue;
        try {
          layer.run(a_dev.data(), s.M, m.c, m.workspace, nullptr);
          std::printf("  run() accepted a misaligned %s\n", m.what);
          ++repeat_bad;
        } catch (const cuda::NotSupported&) {
        }
      }
    }
    c_poisoned = c1.to_vector<uint16_t>(c.size());
    // The stripes and wgmma engines promise the same bits on every run (the fixed-order reduction); the tile kernel's
    // split-K adds with atomics in arrival order, and cuBLAS makes no such promise: they are not held to it.
    if (stripes_layout && (c_poisoned != c || c2.to_vector<uint16_t>(c.size()) != c)) {
      std::printf("  repeated runs differ from the first in some bits (the stripes reduction must be deterministic)\n");
      ++repeat_bad;
    }
  }

  int bad = 0;
  double max_err = 0, ref_norm = 0;
  const std::vector<uint16_t>* outputs[] = {&c, &c_poisoned};  // run_host's, then run()'s into NaN
  for (int64_t m = 0; m < s.M; ++m) {
    for (int64_t n = 0; n < s.N; ++n) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        const int32_t g = g_idx[static_cast<size_t>(k)];
        const uint16_t wbits = kernels::gptq_dequant_reference(codes[static_cast<size_t>(k * s.N + n)],
                                                               zeros[static_cast<size_t>(g * s.N + n)],
                                                               w.scales[static_cast<size_t>(g * s.N + n)]);
        const double prod = static_cast<double>(qgru::half_bits_to_float(a[static_cast<size_t>(m * s.K + k)])) *
                            qgru::half_bits_to_float(wbits);
        ref += prod;
        mag += std::fabs(prod);
      }
      const double tol = std::ldexp(std::fabs(ref), -11) + static_cast<double>(s.K) * std::ldexp(mag, -23) + std::ldexp(1.0, -24);
      ref_norm += ref * ref;
      for (const std::vector<uint16_t>* out : outputs) {
        const double got = qgru::half_bits_to_float((*out)[static_cast<size_t>(m * s.N + n)]);
        const double err = std::fabs(got - ref);
        if (err > max_err || std::isnan(err)) max_err = err;
        if (!(err <= tol) && ++bad <= 3) {
          std::printf("  mismatch at m=%lld n=%lld (%s): gpu %.8g ref %.8g (tol %.3g)\n", static_cast<long long>(m),
                      static_cast<long long>(n), out == &c ? "run_host" : "run into NaN", got, ref, tol);
        }
      }
    }
  }
  const bool nonzero = ref_norm > 0;
  // A layer the stripes layout takes, loaded with "stripes" or "auto", must not fall back to the tile kernel:
  // the rows above are what the stripes and dequantize+cuBLAS engines are checked by.
  const bool fell_back = setting != kernels::LinearKernelSetting::Legacy && engine.engine == kernels::LinearEngine::Tiles &&
                         kernels::stripe_unsupported_reason(s.bits, s.K, s.N, s.group).empty();
  if (fell_back) std::printf("  the %s setting ran the tile kernel: %s\n", kernels::setting_name(setting), engine.reason.c_str());
  // The wgmma setting on a compute capability 9.0 device must run the wgmma kernel (elsewhere: stripes, with why).
  const bool wgmma_missing = setting == kernels::LinearKernelSetting::Wgmma && engine.engine != kernels::LinearEngine::Wgmma &&
                             kernels::stripe_unsupported_reason(s.bits, s.K, s.N, s.group).empty() && compute_capability_is_9_0();
  if (wgmma_missing) std::printf("  the wgmma setting ran %s: %s\n", kernels::engine_name(engine.engine), engine.reason.c_str());
  const bool fail = bad || repeat_bad || !nonzero || fell_back || wgmma_missing;
  std::printf("%s W%dA16 M=%lld N=%lld K=%lld group=%lld zero_adjust=%d act_order=%d sym=%d (%s: %s): max |err| %.3g\n",
              fail ? "FAIL" : "ok  ", s.bits, static_cast<long long>(s.M), static_cast<long long>(s.N),
              static_cast<long long>(s.K), static_cast<long long>(s.group), s.zero_adjust, s.act_order ? 1 : 0,
              s.symmetric ? 1 : 0, kernels::setting_name(setting),
              engine.engine == kernels::LinearEngine::Tiles
                  ? (std::string("tile ") + kernels::kTileConfigs[plan.config_index].name + ", split " + std::to_string(plan.grid_z)).c_str()
                  : kernels::engine_name(engine.engine),
              max_err);
  return fail ? 1 : 0;
}

// The shapes every engine setting runs.
const std::vector<Shape>& linear_shapes() {
  // Edges: M = 1 (split-K), M not a multiple of the tile, M across the small/large tile boundary;
  // N not a multiple of 128 (partial column tile); one group; act-order; both zero formats.
  static const std::vector<Shape> shapes = {
      {1, 128, 256, 64, 4, 0, false},    {5, 136, 512, 128, 4, 1, false},  {16, 256, 1024, 1024, 4, 0, false},
      {33, 264, 256, 32, 4, 1, false},   {64, 128, 512, 128, 4, 0, true},  {130, 512, 256, 64, 4, 1, false},
      {1, 128, 256, 64, 8, 0, false},    {7, 136, 512, 128, 8, 1, false},  {40, 256, 256, 64, 8, 0, true},
      {1, 4096, 4096, 128, 4, 1, false},
      // the stripes layout's own edges: group 32, one group (per channel), symmetric, K not a multiple of 64,
      // many segments per column (N x K large, M = 1), act-order 8-bit, M past one m16 tile
      {3, 256, 512, 32, 4, 0, false},    {16, 264, 1024, 1024, 8, 1, false, true}, {2, 136, 160, 32, 4, 1, true, true},
      {1, 11008, 4096, 128, 4, 0, false}, {1, 4096, 11008, 128, 8, 1, true},     {17, 512, 2048, 128, 4, 0, false, true},
      // more rows than one stripes launch takes (kStripeMaxRows): two launches in stream order sharing the
      // workspace and the column counters (two segments per column), the second on the gathered rows 1024..
      {1030, 136, 128, 32, 4, 1, true},
      // a group of 96 (a multiple of 32, not of the 64-deep tile: group rows start in either k32 half), 8-bit,
      // K = 288 (4.5 tiles) and N = 200 both padded
      {9, 200, 288, 96, 8, 0, false},
      // the stripes kernel's row blocks: two m16 fragments (8-bit, segments), four fragments on a layer of many
      // columns and segments (48 rows: the fourth fragment all padding), 4-bit
      {24, 264, 1024, 64, 8, 1, false},  {48, 1024, 2048, 128, 4, 0, false},
      // the wgmma kernel's row blocks of 128: two of them, the second full (4-bit), and a partial second one on
      // a padded, act-order 8-bit layer
      {256, 512, 1024, 128, 4, 0, false}, {200, 264, 512, 64, 8, 1, true},
  };
  return shapes;
}

}  // namespace

int check_quant_linear() {
  const std::vector<Shape>& shapes = linear_shapes();
  int failures = 0;
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    for (const auto setting : {kernels::LinearKernelSetting::Legacy, kernels::LinearKernelSetting::Stripes,
                               kernels::LinearKernelSetting::Auto}) {
      // the tile kernel takes only group sizes that are multiples of 8 / its k tile: the legacy rows as before
      if (setting == kernels::LinearKernelSetting::Legacy && !kernels::plan_linear({s.M, s.N, s.K, s.bits, s.group}, 132).supported) continue;
      failures += run_case(s, seed, -1, setting);
    }
    ++seed;
  }
  // Every configuration that is not the plan's choice for these shapes, forced, on the shapes its k tile divides.
  for (const Shape& s : shapes) {
    const kernels::LinearPlan legacy = kernels::plan_linear({s.M, s.N, s.K, s.bits, s.group}, 132);
    if (!legacy.supported) continue;
    const int chosen = legacy.config_index;
    for (int i = 0; i < kernels::kTileConfigCount; ++i) {
      if (i == chosen || kernels::kTileConfigs[i].bits != s.bits || s.K % kernels::kTileConfigs[i].block_k != 0) continue;
      failures += run_case(s, seed++, i, kernels::LinearKernelSetting::Legacy);
    }
  }
  return failures;
}

// The wgmma setting over the same shapes (the stripes kernel, saying why, off compute capability 9.0): a check of
// its own, the self-test's last, so that a fault of a kernel no GPU has run yet cannot take the others' results
// with it.
int check_quant_linear_wgmma() {
  int failures = 0;
  uint32_t seed = 1;
  for (const Shape& s : linear_shapes()) failures += run_case(s, seed++, -1, kernels::LinearKernelSetting::Wgmma);
  return failures;
}

}  // namespace qgru::cuda_test
