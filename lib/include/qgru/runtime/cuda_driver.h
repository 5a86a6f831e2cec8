#pragma once
// Which NVIDIA driver a CUDA build of qgru needs, and the one-line reason a driver cannot serve it. Plain C++
// without CUDA headers: cuda/src/device.cu feeds it cudaDriverGetVersion() and CUDART_VERSION, the unit tests
// feed it any pair, so every message is tested without a GPU.
//
// Versions are encoded as the CUDA runtime encodes them: 1000·major + 10·minor (12040 is CUDA 12.4); a driver
// version of 0 means no driver is installed (cudaDriverGetVersion's answer when libcuda.so.1 is absent).
// The rule (CUDA minor version compatibility, docs/CUDA.md "Toolkits and drivers"): a binary built with a
// CUDA M.x toolkit runs on a driver whose own CUDA version is M.0 or newer. The first driver series of each
// major version (Linux) is kDriverFloors' entry; older drivers fail every CUDA call with
// cudaErrorInsufficientDriver, which the runtime words as if no GPU were there.
#include <string>

namespace qgru::cuda_driver {

struct DriverFloor {
  int cuda_major;
  const char* linux_driver_series;  // the first Linux driver series that supports CUDA cuda_major.0
};
inline constexpr DriverFloor kDriverFloors[] = {{11, "450"}, {12, "525"}, {13, "580"}};

inline int major_of(int cuda_version) { return cuda_version / 1000; }

// "12.4" for 12040.
inline std::string version_text(int cuda_version) {
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

// "an NVIDIA driver for CUDA 13.0 or newer (Linux driver 580 or newer)" for any 13.x runtime.
inline std::string required_driver_text(int runtime_version) {
  const int major = major_of(runtime_version);
  std::string text = "an NVIDIA driver for CUDA " + std::to_string(major) + ".0 or newer";
  for (const DriverFloor& floor : kDriverFloors) {
    if (floor.cuda_major == major) text += std::string(" (Linux driver ") + floor.linux_driver_series + " or newer)";
  }
  return text;
}

// What `qgru --version` says about CUDA: the toolkit the binary was built with and the driver it needs.
inline std::string build_text(int runtime_version, const std::string& cudart_linkage) {
  return "built with CUDA " + version_text(runtime_version) + " (CUDA runtime " + cudart_linkage + ", cuBLAS " +
         std::to_string(major_of(runtime_version)) + ".x loaded at first use); needs " +
         required_driver_text(runtime_version);
}

// "" when a driver of CUDA version driver_version can run a binary built with runtime_version; otherwise one
// sentence saying why not and what would help.
inline std::string driver_problem(int driver_version, int runtime_version) {
  const std::string built = "this qgru was built with CUDA " + version_text(runtime_version) + " and needs " +
                            required_driver_text(runtime_version);
  if (driver_version <= 0) return "no NVIDIA driver is installed (libcuda.so.1 was not found); " + built;
  if (major_of(driver_version) >= major_of(runtime_version)) return "";
  std::string text = "the NVIDIA driver is too old: it supports CUDA " + version_text(driver_version) + ", " + built +
                     "; update the driver";
  text += ", or build qgru with a CUDA " + std::to_string(major_of(driver_version)) + ".x toolkit";
  return text;
}

}  // namespace qgru::cuda_driver
