#include "qgru/gptq/linear.h"

#include <cblas.h>

#include <algorithm>

#include "qgru/gptq/pack.h"

namespace qgru::gptq {
namespace {

int64_t group_of(const GroupParamsView& params, int64_t k) {
  return params.g_idx ? params.g_idx[k] : k / params.group_size;
}

float dequantized(const PackedCodesView& codes, const GroupParamsView& params, int64_t n, int64_t k) {
  const int64_t g = group_of(params, k);
  const float scale = params.scale[g * params.stride_g + n * params.stride_n];
  const float zero = params.zero[g * params.stride_g + n * params.stride_n];
  const auto code = static_cast<float>(get_code(codes.words + n * codes.word_stride_n, codes.word_stride_k, k, codes.bits));
  return scale * (code - zero);
}

}  // namespace

size_t linear_workspace_floats(const PackedCodesView& codes) {
  return static_cast<size_t>(codes.N * std::min(codes.K, kLinearTileK));
}

void linear_f32(const PackedCodesView& codes, const GroupParamsView& params, const float* A, int64_t lda, int64_t M,
                float* C, int64_t ldc, float* workspace) {
  const int64_t N = codes.N, K = codes.K;
  for (int64_t k0 = 0; k0 < K; k0 += kLinearTileK) {
    const int64_t tile = std::min(kLinearTileK, K - k0);
    // Ŵ[:, k0:k0+tile] into workspace [N, tile].
    for (int64_t n = 0; n < N; ++n) {
      float* row = workspace + n * tile;
      for (int64_t k = 0; k < tile; ++k) row[k] = dequantized(codes, params, n, k0 + k);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(N), static_cast<int>(M),
                static_cast<int>(tile), 1.0f, workspace, static_cast<int>(tile), A + k0 * lda, static_cast<int>(lda),
                k0 == 0 ? 0.0f : 1.0f, C, static_cast<int>(ldc));
  }
}

void linear_reference(const PackedCodesView& codes, const GroupParamsView& params, const float* A, int64_t lda,
                      int64_t M, float* C, int64_t ldc) {
  for (int64_t n = 0; n < codes.N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      double sum = 0.0;
      for (int64_t k = 0; k < codes.K; ++k) {
        sum += static_cast<double>(dequantized(codes, params, n, k)) * static_cast<double>(A[k * lda + m]);
      }
      C[n * ldc + m] = static_cast<float>(sum);
    }
  }
}

}  // namespace qgru::gptq
