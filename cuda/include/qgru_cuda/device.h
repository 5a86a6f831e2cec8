#pragma once
// Device discovery for --device cuda|auto. Host-only API; compiled only in CUDA builds.
#include <string>

namespace qgru::cuda {

struct DeviceProbe {
  int device_count = 0;
  std::string reason;  // why no device is usable ("" when device_count > 0)
};

// Asks the CUDA runtime how many devices it sees; never throws.
DeviceProbe probe_devices();

// Throws NoDevice ("no CUDA device: <reason>") unless a GPU is usable.
void require_device();

// Multiprocessor count and name of the current device (require_device first).
int multiprocessor_count();
std::string device_name();

}  // namespace qgru::cuda
