// The CUDA linear's re-layout of the C API's weights (qgru::capi::capi_to_checkpoint), checked on the CPU
// through the kernels' own accessors (qgru/kernels/gptq_layout.h): every code, zero point and scale the
// GPU reads is the one the C API's tensors hold, so a wrong transpose or nibble order fails here, not only
// on a GPU. A zero point the 4-bit qzeros cannot hold is refused, naming it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "capi_internal.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/half.h"

namespace {

struct CapiLayer {
  int64_t N, K, G;
  std::vector<uint32_t> codes;  // [N, K]
  std::vector<int32_t> packed;  // [N, K/8]
  std::vector<float> scale, zero;  // [N, G]
  CapiLayer(int64_t n, int64_t k, int64_t g, uint32_t seed) : N(n), K(k), G(g) {
    std::mt19937 rng(seed);
    codes.resize(static_cast<size_t>(N * K));
    packed.assign(static_cast<size_t>(N * K / 8), 0);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < K; ++c) {
        const uint32_t code = static_cast<uint32_t>(rng()) & 15u;
        codes[static_cast<size_t>(r * K + c)] = code;
        auto& word = packed[static_cast<size_t>(r * K / 8 + c / 8)];
        word = static_cast<int32_t>(static_cast<uint32_t>(word) | (code << (4 * (c % 8))));
      }
    std::uniform_real_distribution<float> s(0.001f, 0.1f);
    for (int64_t i = 0; i < N * G; ++i) {
      scale.push_back(s(rng));
      zero.push_back(static_cast<float>(static_cast<uint32_t>(rng()) % 16u));
    }
    zero[0] = 0.0f;  // both ends of the range
    zero[1] = 15.0f;
  }
};

std::vector<uint16_t> to_half(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = qgru::float_to_half_bits(values[i]);
  return bits;
}

}  // namespace

TEST_CASE("capi_cuda_relayout_keeps_every_code_zero_and_scale_where_the_kernel_reads_it") {
  for (qgruDtype_t dtype : {QGRU_DTYPE_F32, QGRU_DTYPE_F16}) {
    struct Shape {
      int64_t N, K, G;
    };
    for (const Shape& shape : {Shape{8, 32, 1}, Shape{136, 256, 2}, Shape{24, 512, 4}}) {
      const int64_t N = shape.N, K = shape.K, G = shape.G;
      CAPTURE(N);
      CAPTURE(K);
      CAPTURE(G);
      const CapiLayer given(N, K, G, static_cast<uint32_t>(N + K + G));
      const std::vector<uint16_t> scale16 = to_half(given.scale), zero16 = to_half(given.zero);
      const void* scale = dtype == QGRU_DTYPE_F16 ? static_cast<const void*>(scale16.data()) : given.scale.data();
      const void* zero = dtype == QGRU_DTYPE_F16 ? static_cast<const void*>(zero16.data()) : given.zero.data();
      const auto layer = qgru::capi::capi_to_checkpoint(dtype, N, K, G, given.packed.data(), scale, zero);
      REQUIRE(layer.qweight.size() == static_cast<size_t>(K / 8 * N));
      REQUIRE(layer.qzeros.size() == static_cast<size_t>(G * N / 8));
      REQUIRE(layer.scales.size() == static_cast<size_t>(G * N));
      const auto* qweight = reinterpret_cast<const uint32_t*>(layer.qweight.data());
      const auto* qzeros = reinterpret_cast<const uint32_t*>(layer.qzeros.data());
      int bad_codes = 0, bad_params = 0;
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k) {
          bad_codes += qgru::kernels::gptq_weight_code(qweight, N, 4, k, n) != given.codes[static_cast<size_t>(n * K + k)];
        }
        for (int64_t g = 0; g < G; ++g) {
          const size_t at = static_cast<size_t>(n * G + g);
          bad_params += qgru::kernels::gptq_zero(qzeros, N, 4, g, n, 0) != static_cast<uint32_t>(given.zero[at]);
          bad_params += layer.scales[static_cast<size_t>(g * N + n)] != qgru::float_to_half_bits(given.scale[at]);
        }
      }
      CHECK(bad_codes == 0);
      CHECK(bad_params == 0);
    }
  }
}

TEST_CASE("capi_cuda_relayout_refuses_zero_points_outside_4_bits") {
  CapiLayer given(8, 32, 2, 7);
  for (float z : {2.5f, -1.0f, 16.0f, std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(z);
    std::vector<float> zero = given.zero;
    zero[5] = z;  // n = 2, g = 1
    CHECK_THROWS_WITH_AS(qgru::capi::capi_to_checkpoint(QGRU_DTYPE_F32, 8, 32, 2, given.packed.data(), given.scale.data(), zero.data()),
                         doctest::Contains("zero[2, 1] = "), qgru::capi::BadZeroPoint);
  }
}
