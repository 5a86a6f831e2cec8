#pragma once
// Device discovery for --device cuda|auto. Host-only API; compiled only in CUDA builds.
#include <string>

namespace qgru::cuda {

struct DeviceProbe {
  int device_count = 0;
  int driver_version = 0;   // the driver's CUDA version (cudaDriverGetVersion; 0: no driver installed)
  int runtime_version = 0;  // the CUDA runtime this binary was built with (CUDART_VERSION)
  std::string reason;       // why no device is usable ("" when device_count > 0)
};

// Asks the driver which CUDA version it supports and, when that can run this build (qgru/runtime/cuda_driver.h),
// how many devices the runtime sees; never throws. A driver too old for this build is reported as such (the
// runtime alone would say cudaErrorInsufficientDriver, as it does when no driver is installed at all).
// Test seam: the environment variable QGRU_TEST_CUDA_DRIVER_VERSION (e.g. 12020), when set, stands in for the
// driver's answer, so the too-old-driver path is tested on machines without that driver (test/cli);
// QGRU_TEST_CUDA_DEVICE_COUNT (with it) stands in for the runtime's device count, so what follows a usable device
// (the cuBLAS check of the device choice) is tested on machines without a GPU. Nothing runs on such a device.
DeviceProbe probe_devices();

// Throws NoDevice ("no CUDA device: <reason>") unless a GPU is usable.
void require_device();

// "built with CUDA 13.0 (CUDA runtime static, cuBLAS 13.x loaded at first use); needs an NVIDIA driver for CUDA
// 13.0 or newer (Linux driver 580 or newer)": what `qgru --version` prints about CUDA.
std::string build_description();

// Multiprocessor count and name of the current device (require_device first).
int multiprocessor_count();
std::string device_name();

}  // namespace qgru::cuda
