// The quantized linear: tiled sgemm path vs the plain loop vs Ŵ (dequantize()) · A in float64, for the
// AutoGPTQ layout with act-order g_idx and the row-packed layout of the GPTQ C API; sentinels around C.
#include <doctest/doctest.h>

#include <cmath>

#include "gptq_test_util.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/linear.h"
#include "qgru/gptq/pack.h"

using namespace qgru::gptq;

namespace {

QuantizedLayer layer_for(int bits, int64_t N, int64_t K, int64_t gs) {
  const auto X = gptq_test::activations_kmajor(K, 40, 3, 6);
  const auto H = gptq_test::hessian_plain(X, K, 40);
  const auto W = gptq_test::normal_values(static_cast<size_t>(N * K), 7, 0.3);
  GptqOptions options;
  options.bits = bits;
  options.group_size = gs;
  options.act_order = true;
  return to_checkpoint_layer(gptq_quantize(W, N, K, H, options), "t");
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double tolerance) {
  REQUIRE(got.size() >= want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > tolerance * (1.0 + std::fabs(want[i]))) {
      FAIL("element " << i << ": got " << got[i] << ", want " << want[i]);
    }
  }
}

}  // namespace

TEST_CASE("linear_tiled_path_matches_dequantized_product_autogptq_layout") {
  for (int bits : {3, 4, 8}) {
    for (int64_t M : {1, 3, 33}) {
      CAPTURE(bits);
      CAPTURE(M);
      const int64_t N = 32, K = 160;  // K spans a full tile and a partial one
      const QuantizedLayer layer = layer_for(bits, N, K, 32);
      const auto qweight = pack_qweight(layer.codes, N, K, bits, "t");
      std::vector<float> zeros(layer.zeros.begin(), layer.zeros.end());
      const PackedCodesView codes = autogptq_codes(qweight.data(), bits, N, K);
      const GroupParamsView params{layer.scales.data(), zeros.data(), N, 1, layer.g_idx.data(), 0};
      const auto A64 = gptq_test::normal_values(static_cast<size_t>(K * M), 12);
      const std::vector<float> A(A64.begin(), A64.end());
      const auto W_hat = dequantize(layer);
      std::vector<double> want(static_cast<size_t>(N * M), 0.0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < K; ++k)
            want[static_cast<size_t>(n * M + m)] += W_hat[static_cast<size_t>(n * K + k)] * A[static_cast<size_t>(k * M + m)];
      std::vector<float> reference(static_cast<size_t>(N * M));
      linear_reference(codes, params, A.data(), M, M, reference.data(), M);
      check_close(reference, want, 1e-6);
      const float sentinel = -12345.0f;
      std::vector<float> fast(static_cast<size_t>(N * M) + 4, sentinel);
      std::vector<float> workspace(linear_workspace_floats(codes));
      linear_f32(codes, params, A.data(), M, M, fast.data(), M, workspace.data());
      check_close(fast, want, 1e-4);
      for (size_t i = static_cast<size_t>(N * M); i < fast.size(); ++i) CHECK(fast[i] == sentinel);
    }
  }
}

TEST_CASE("linear_row_packed_layout_with_strided_operands") {
  const int64_t N = 16, K = 64, M = 5, lda = 7, ldc = 9, row_stride = 10;  // 8 words per row used
  const QuantizedLayer layer = layer_for(4, N, K, 16);
  std::vector<int32_t> packed(static_cast<size_t>(N * row_stride), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      put_code(reinterpret_cast<uint32_t*>(packed.data()) + n * row_stride, 1, k, 4,
               static_cast<uint32_t>(layer.codes[static_cast<size_t>(n * K + k)]));
  // Params as [N, G] (the C API's layout): transpose of the checkpoint's [G, N].
  std::vector<float> scale(static_cast<size_t>(N * layer.G)), zero(static_cast<size_t>(N * layer.G));
  for (int64_t g = 0; g < layer.G; ++g)
    for (int64_t n = 0; n < N; ++n) {
      scale[static_cast<size_t>(n * layer.G + g)] = layer.scales[static_cast<size_t>(g * N + n)];
      zero[static_cast<size_t>(n * layer.G + g)] = static_cast<float>(layer.zeros[static_cast<size_t>(g * N + n)]);
    }
  const PackedCodesView codes = row_packed_codes(packed.data(), 4, N, K, row_stride);
  const GroupParamsView params{scale.data(), zero.data(), 1, layer.G, layer.g_idx.data(), 0};
  const auto A64 = gptq_test::normal_values(static_cast<size_t>(K * lda), 13);
  const std::vector<float> A(A64.begin(), A64.end());
  std::vector<float> reference(static_cast<size_t>(N * ldc), 0.0f), fast(static_cast<size_t>(N * ldc), 7.0f);
  linear_reference(codes, params, A.data(), lda, M, reference.data(), ldc);
  std::vector<float> workspace(linear_workspace_floats(codes));
  linear_f32(codes, params, A.data(), lda, M, fast.data(), ldc, workspace.data());
  const auto W_hat = dequantize(layer);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      double want = 0.0;
      for (int64_t k = 0; k < K; ++k) want += W_hat[static_cast<size_t>(n * K + k)] * A[static_cast<size_t>(k * lda + m)];
      CHECK(reference[static_cast<size_t>(n * ldc + m)] == doctest::Approx(want).epsilon(1e-6));
      CHECK(fast[static_cast<size_t>(n * ldc + m)] == doctest::Approx(want).epsilon(1e-4));
    }
    for (int64_t m = M; m < ldc; ++m) CHECK(fast[static_cast<size_t>(n * ldc + m)] == 7.0f);  // padding untouched
  }
}
