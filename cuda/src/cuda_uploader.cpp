#include "cuda_uploader.h"

#include <string>
#include <utility>

#include "qgru_cuda/check.h"

namespace qgru::cuda {

const void* CudaUploader::put_bytes(const void* host, size_t bytes) {
  if (finished_) throw Error("CUDA upload issued after the upload sequence was synchronized");
  buffers_.emplace_back(bytes);
  if (bytes > 0) {
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpyAsync(buffers_.back().data(), host, bytes, cudaMemcpyHostToDevice, stream_));
  }
  return buffers_.back().data();
}

const void* CudaUploader::put_kept(std::vector<char> host) {
  kept_.push_back(std::move(host));
  return put_bytes(kept_.back().data(), kept_.back().size());
}

void CudaUploader::finish() {
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream_));  // every copy has landed: any stream may read the weights now
  finished_ = true;
  kept_.clear();
}

std::vector<DeviceBuffer> CudaUploader::take() {
  if (!finished_) throw Error("CUDA upload buffers taken before the upload sequence was synchronized");
  return std::move(buffers_);
}

}  // namespace qgru::cuda
