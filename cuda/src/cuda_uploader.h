#pragma once
// Internal: the CUDA Uploader (qgru/kernels/device_upload.h): cudaMalloc + cudaMemcpyAsync on one stream, and
// finish() = cudaStreamSynchronize of that stream. The ordering rule is stated in device_upload.h.
#include <cuda_runtime.h>

#include <vector>

#include "qgru/kernels/device_upload.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda {

class CudaUploader final : public kernels::Uploader {
 public:
  explicit CudaUploader(cudaStream_t stream) : stream_(stream) {}
  const void* put_bytes(const void* host, size_t bytes) override;
  const void* put_kept(std::vector<char> host) override;
  void finish() override;
  // The device allocations, for the executor to own (after finish()).
  std::vector<DeviceBuffer> take();

 private:
  cudaStream_t stream_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::vector<char>> kept_;  // host copies alive until finish()
  bool finished_ = false;
};

}  // namespace qgru::cuda
