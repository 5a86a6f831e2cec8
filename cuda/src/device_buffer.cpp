#include "qgru_cuda/device_buffer.h"

#include <atomic>
#include <string>
#include <utility>

#include "qgru_cuda/check.h"

namespace qgru::cuda {

namespace {
std::atomic<int64_t> g_host_transfers{0};
std::atomic<int64_t> g_device_allocations{0};
}  // namespace

int64_t device_allocation_count() { return g_device_allocations.load(std::memory_order_relaxed); }
void count_device_allocation() { g_device_allocations.fetch_add(1, std::memory_order_relaxed); }

int64_t host_transfer_count() { return g_host_transfers.load(std::memory_order_relaxed); }
void count_host_transfer() { g_host_transfers.fetch_add(1, std::memory_order_relaxed); }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) {
    QGRU_CUDA_CHECK(cudaMalloc(&data_, bytes));
    count_device_allocation();
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);  // never throws from a destructor; a failure here is not actionable
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) throw Error("DeviceBuffer::upload of " + std::to_string(bytes) + " bytes into " + std::to_string(bytes_));
  if (bytes > 0) {
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice));
  }
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes > bytes_) throw Error("DeviceBuffer::download of " + std::to_string(bytes) + " bytes from " + std::to_string(bytes_));
  if (bytes > 0) {
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost));
  }
}

void DeviceBuffer::zero() {
  if (bytes_ > 0) QGRU_CUDA_CHECK(cudaMemset(data_, 0, bytes_));
}

}  // namespace qgru::cuda
