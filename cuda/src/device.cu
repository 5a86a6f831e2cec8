#include <cuda_runtime.h>

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

}  // namespace qgru::cuda
