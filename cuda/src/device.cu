#include <cuda_runtime.h>

#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"

namespace qgru::cuda {

DeviceProbe probe_devices() {
  DeviceProbe probe;
  const cudaError_t status = cudaGetDeviceCount(&probe.device_count);
  if (status != cudaSuccess) {
    probe.device_count = 0;
    probe.reason = std::string("CUDA runtime reports ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
  } else if (probe.device_count == 0) {
    probe.reason = "the CUDA runtime sees no GPU";
  }
  return probe;
}

void require_device() {
  const DeviceProbe probe = probe_devices();
  if (probe.device_count == 0) throw NoDevice(probe.reason);
}

int multiprocessor_count() {
  int device = 0;
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  int count = 0;
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

std::string device_name() {
  int device = 0;
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  QGRU_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

}  // namespace qgru::cuda
