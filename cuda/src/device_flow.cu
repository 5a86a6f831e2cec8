// The CUDA executor's element kernels between the cells (device_flow_launch.h): each thread one element through the
// QGRU_HD functions of qgru/kernels/device_flow.h, which test/unit/kernels/device_flow_test.cpp runs on the host.
#include "device_flow_launch.h"

#include "qgru/kernels/workspace.h"
#include "qgru_cuda/check.h"

namespace qgru::cuda {

namespace {

constexpr int kFlowThreads = 256;

__global__ void __launch_bounds__(kFlowThreads) output_kernel(const kernels::OutputSink sink, int64_t count) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < count) kernels::output_element(sink, idx);
}

__global__ void __launch_bounds__(kFlowThreads) fill_codes_kernel(int32_t* codes, int64_t count, int32_t value) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < count) codes[idx] = value;
}

}  // namespace

void launch_output(const kernels::OutputSink& sink, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  const int64_t blocks = kernels::elementwise_blocks(count, kFlowThreads);
  output_kernel<<<static_cast<unsigned>(blocks), kFlowThreads, 0, stream>>>(sink, count);
  QGRU_CUDA_CHECK_LAUNCH("output_kernel<<<...>>>");
}

void launch_fill_codes(int32_t* codes, int64_t count, int32_t value, cudaStream_t stream) {
  if (count == 0) return;
  const int64_t blocks = kernels::elementwise_blocks(count, kFlowThreads);
  fill_codes_kernel<<<static_cast<unsigned>(blocks), kFlowThreads, 0, stream>>>(codes, count, value);
  QGRU_CUDA_CHECK_LAUNCH("fill_codes_kernel<<<...>>>");
}

}  // namespace qgru::cuda
