#pragma once
// Internal: page-locked host memory (cudaMallocHost), grown on demand. A device-to-host copy into it is a real
// asynchronous DMA; into pageable memory the same cudaMemcpyAsync blocks the host until the stream gets there.
#include <cuda_runtime.h>

#include <cstddef>

#include "qgru_cuda/check.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);  // destructor: nothing to report to
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes` of pinned memory (previous contents are not kept).
  void* reserve(size_t bytes) {
    if (bytes > bytes_) {
      if (data_ != nullptr) cudaFreeHost(data_);
      data_ = nullptr;
      bytes_ = 0;
      QGRU_CUDA_CHECK(cudaMallocHost(&data_, bytes));
      count_device_allocation();
      bytes_ = bytes;
    }
    return data_;
  }
  void* data() { return data_; }  // null before the first reserve

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace qgru::cuda
