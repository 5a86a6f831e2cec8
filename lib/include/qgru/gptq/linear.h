#pragma once
// The GPTQ quantized linear on the CPU: C [N, M] = Ŵ · A for A [K, M], straight from packed codes, scales,
// zeros and g_idx. Ŵ[n, k] = scale(g, n) · (code(n, k) − zero(g, n)), g = g_idx[k] (or k / group_size).
// The fast path dequantizes kLinearTileK columns of Ŵ at a time into the workspace ([N, kLinearTileK]
// floats) and multiplies with sgemm; there is never a full dequantized copy of W. linear_reference() is the
// plain triple loop (float64 accumulation) the fast path is tested against.
#include <cstddef>
#include <cstdint>

namespace qgru::gptq {

inline constexpr int64_t kLinearTileK = 128;

// Codes of output n form a little-endian bit stream along K (pack.h); word w of that stream is
// words[w · word_stride_k + n · word_stride_n].
struct PackedCodesView {
  const uint32_t* words = nullptr;
  int bits = 4;
  int64_t N = 0, K = 0;
  int64_t word_stride_k = 0, word_stride_n = 0;
};
// AutoGPTQ qweight [K·bits/32, N].
inline PackedCodesView autogptq_codes(const int32_t* qweight, int bits, int64_t N, int64_t K) {
  return {reinterpret_cast<const uint32_t*>(qweight), bits, N, K, N, 1};
}
// Row-packed [N, K·bits/32] (the GPTQ C API's packed_weights [N, K/8] for 4 bits), rows `row_stride` words apart.
inline PackedCodesView row_packed_codes(const int32_t* packed, int bits, int64_t N, int64_t K, int64_t row_stride) {
  return {reinterpret_cast<const uint32_t*>(packed), bits, N, K, 1, row_stride};
}

// scale(g, n) = scale[g · stride_g + n · stride_n], zero(g, n) likewise; group of column k = g_idx[k] when
// g_idx is given, else k / group_size.
struct GroupParamsView {
  const float* scale = nullptr;
  const float* zero = nullptr;
  int64_t stride_g = 0, stride_n = 0;
  const int32_t* g_idx = nullptr;
  int64_t group_size = 0;
};

// Floats of workspace linear_f32 needs.
size_t linear_workspace_floats(const PackedCodesView& codes);

// A [K, M] with rows lda apart; C [N, M] with rows ldc apart (overwritten). C must not alias A.
void linear_f32(const PackedCodesView& codes, const GroupParamsView& params, const float* A, int64_t lda, int64_t M,
                float* C, int64_t ldc, float* workspace);
void linear_reference(const PackedCodesView& codes, const GroupParamsView& params, const float* A, int64_t lda,
                      int64_t M, float* C, int64_t ldc);

}  // namespace qgru::gptq
