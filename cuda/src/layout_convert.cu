// transpose_convert (qgru_cuda/layout_convert.h): one thread per element, grid-stride, consecutive threads on
// consecutive source columns (coalesced reads; the operands it serves are a few MB at most).
#include <cuda_fp16.h>

#include "qgru_cuda/check.h"
#include "qgru_cuda/layout_convert.h"

namespace qgru::cuda {

namespace {

__global__ void transpose_convert_kernel(const void* src, bool src_f32, int64_t ld_src, void* dst, bool dst_f32,
                                         int64_t ld_dst, int64_t rows, int64_t cols) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const float value = src_f32 ? static_cast<const float*>(src)[r * ld_src + c]
                                : __half2float(static_cast<const __half*>(src)[r * ld_src + c]);
    if (dst_f32) {
      static_cast<float*>(dst)[c * ld_dst + r] = value;
    } else {
      static_cast<__half*>(dst)[c * ld_dst + r] = __float2half_rn(value);
    }
  }
}

}  // namespace

void transpose_convert(const void* src, bool src_f32, int64_t ld_src, void* dst, bool dst_f32, int64_t ld_dst,
                       int64_t rows, int64_t cols, void* stream) {
  const int64_t blocks64 = (rows * cols + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(blocks64 < 4096 ? (blocks64 > 0 ? blocks64 : 1) : 4096);
  transpose_convert_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(src, src_f32, ld_src, dst, dst_f32,
                                                                                   ld_dst, rows, cols);
  QGRU_CUDA_CHECK_LAUNCH("transpose_convert_kernel<<<...>>>");
}

}  // namespace qgru::cuda
