#include "device_option.h"

#include "qgru/base/error.h"
#include "qgru/base/log.h"

#ifdef QGRU_WITH_CUDA
#include "qgru_cuda/cublas_library.h"
#endif

namespace qgru::cli {

namespace {

// Empty when a CUDA device can be used; otherwise why not. A device also needs cuBLAS, loaded here (the first CUDA
// use) on a machine that has a device, never at start.
std::string cuda_unavailable_reason() {
#ifdef QGRU_WITH_CUDA
  return qgru::cuda::device_unusable_reason();
#else
  return "this qgru was built without CUDA (nvcc was not found at configure time)";
#endif
}

}  // namespace

Device resolve_device(const std::string& requested) {
  if (requested == "cpu") return Device::Cpu;
  const std::string reason = cuda_unavailable_reason();
  if (requested == "auto") {
    if (reason.empty()) {
      qgru::log()->info("--device auto: using CUDA");
      return Device::Cuda;
    }
    qgru::log()->info("--device auto: using the CPU ({})", reason);
    return Device::Cpu;
  }
  if (requested == "cuda") {
    if (!reason.empty()) throw qgru::Error("--device cuda: no usable CUDA device: " + reason);
    return Device::Cuda;
  }
  throw qgru::Error("--device " + requested + ": expected cpu, cuda or auto");
}

const char* device_name(Device device) { return device == Device::Cuda ? "cuda" : "cpu"; }

}  // namespace qgru::cli
