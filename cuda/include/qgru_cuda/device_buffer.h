#pragma once
// Owning device allocation (cudaMalloc/cudaFree) with checked host<->device copies. Host-only API without
// CUDA headers, so plain C++ callers (tests, the CLI, the C API) can hold one. Move-only.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qgru::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // throws CudaFailure; 0 bytes holds no allocation
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  void upload(const void* host, size_t bytes);      // bytes <= this->bytes()
  void download(void* host, size_t bytes) const;    // bytes <= this->bytes()
  void zero();

  template <typename T>
  static DeviceBuffer from(const std::vector<T>& host) {
    DeviceBuffer buffer(host.size() * sizeof(T));
    buffer.upload(host.data(), host.size() * sizeof(T));
    return buffer;
  }
  template <typename T>
  std::vector<T> to_vector(size_t count) const {
    std::vector<T> host(count);
    download(host.data(), count * sizeof(T));
    return host;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Host<->device copies issued by qgru_cuda (DeviceBuffer's upload/download, the weight uploaders, the C API's
// staging), counted process-wide so a test can assert that a per-call path copies nothing: read the count,
// make the calls, read it again. count_host_transfer is what every such copy calls.
int64_t host_transfer_count();
void count_host_transfer();

// Allocations made by qgru_cuda (every DeviceBuffer of non-zero size, every growth of a pinned staging buffer),
// counted process-wide, so a test can assert that a path allocates nothing (a streaming step: its buffers are made
// when its state is).
int64_t device_allocation_count();
void count_device_allocation();

}  // namespace qgru::cuda
