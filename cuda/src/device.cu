#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "qgru/runtime/cuda_driver.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"

namespace qgru::cuda {

namespace {

// The driver's CUDA version, or the test seam's stand-in (see device.h).
int driver_cuda_version() {
  if (const char* pretend = std::getenv("QGRU_TEST_CUDA_DRIVER_VERSION")) return std::atoi(pretend);
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess) return 0;
  return version;
}

}  // namespace

DeviceProbe probe_devices() {
  DeviceProbe probe;
  probe.runtime_version = CUDART_VERSION;
  probe.driver_version = driver_cuda_version();
  probe.reason = cuda_driver::driver_problem(probe.driver_version, probe.runtime_version);
  if (!probe.reason.empty()) return probe;
  if (const char* pretend = std::getenv("QGRU_TEST_CUDA_DEVICE_COUNT")) {  // the test seam (device.h)
    probe.device_count = std::atoi(pretend);
    if (probe.device_count <= 0) {
      probe.device_count = 0;
      probe.reason = "QGRU_TEST_CUDA_DEVICE_COUNT says no GPU";
    }
    return probe;
  }
  const cudaError_t status = cudaGetDeviceCount(&probe.device_count);
  if (status != cudaSuccess) {
    probe.device_count = 0;
    probe.reason = std::string("CUDA runtime reports ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
  } else if (probe.device_count == 0) {
    probe.reason = "the NVIDIA driver (CUDA " + cuda_driver::version_text(probe.driver_version) + ") sees no GPU";
  }
  return probe;
}

void require_device() {
  const DeviceProbe probe = probe_devices();
  if (probe.device_count == 0) throw NoDevice(probe.reason);
}

std::string build_description() {
#ifdef QGRU_CUDART_STATIC
  const std::string linkage = "static";
#else
  const std::string linkage = "shared";
#endif
  return cuda_driver::build_text(CUDART_VERSION, linkage);
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
