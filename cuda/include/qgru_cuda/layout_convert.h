#pragma once
// A transposing copy with an element conversion on the GPU (the C API's [K, M] / [N, M] operands to and from the
// kernels' [M, K] / [M, N] fp16 rows without passing through the host). Host-only API without CUDA headers.
#include <cstdint>

namespace qgru::cuda {

// dst[c · ld_dst + r] = convert(src[r · ld_src + c]) for r < rows, c < cols. Elements are fp16 bits or fp32
// (src_f32 / dst_f32); fp32 -> fp16 rounds to nearest even, fp16 -> fp32 is exact. src and dst must not overlap.
// Enqueued on `stream` (a cudaStream_t), asynchronous. Throws CudaFailure on a launch error.
void transpose_convert(const void* src, bool src_f32, int64_t ld_src, void* dst, bool dst_f32, int64_t ld_dst,
                       int64_t rows, int64_t cols, void* stream);

}  // namespace qgru::cuda
