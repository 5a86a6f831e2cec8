#include "qgru_cuda/cublas_library.h"

#include <cstdlib>

#include "qgru_cuda/device.h"
#include "qgru_cuda/status.h"
#include "runtime_library.h"

namespace qgru::cuda {

std::vector<std::string> cublas_library_candidates() {
  const char* chosen = std::getenv("QGRU_CUBLAS_LIBRARY");
  if (chosen != nullptr && *chosen != '\0') return {chosen};
  // The major of the cuBLAS headers compiled against: its soname (a CUDA 13 build calls cuBLAS 13's ABI).
  return {"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublas.so"};
}

CublasLibrary load_cublas_library(const std::vector<std::string>& candidates) {
  const std::string help = "qgru on the GPU needs it: put the CUDA " + std::to_string(CUBLAS_VER_MAJOR) +
                           " toolkit's lib64 folder or PyTorch's nvidia wheels' lib folder (nvidia/cu" +
                           std::to_string(CUBLAS_VER_MAJOR) +
                           "/lib) on LD_LIBRARY_PATH, or name the file in QGRU_CUBLAS_LIBRARY";
  RuntimeLibrary library = open_runtime_library("cuBLAS", candidates, help);
  CublasLibrary api;
  if (library.handle != nullptr) {
#define QGRU_CUBLAS_RESOLVE(name, type) resolve_runtime_symbol(library, #name, api.name);
    QGRU_CUBLAS_FUNCTIONS(QGRU_CUBLAS_RESOLVE)
#undef QGRU_CUBLAS_RESOLVE
  }
  api.file = library.file;
  api.error = library.error;
  return api;
}

namespace {
const CublasLibrary& cublas_library_once() {
  static const CublasLibrary api = load_cublas_library(cublas_library_candidates());  // thread-safe initialization
  return api;
}
}  // namespace

const CublasLibrary& cublas_library() {
  const CublasLibrary& api = cublas_library_once();
  if (!api.error.empty()) throw CudaFailure(api.error);
  return api;
}

std::string cublas_unusable_reason() { return cublas_library_once().error; }

std::string device_unusable_reason() {
  const DeviceProbe probe = probe_devices();
  return probe.device_count > 0 ? cublas_unusable_reason() : probe.reason;
}

}  // namespace qgru::cuda
