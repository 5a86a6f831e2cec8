#include "qgru_cuda/check.h"

#include <string>

#include "qgru_cuda/cublas_library.h"

namespace qgru::cuda {

namespace {
std::string place(const char* call, const char* file, int line) {
  return std::string(" in `") + call + "` at " + file + ":" + std::to_string(line);
}
}  // namespace

void check_cuda_status(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw CudaFailure(std::string("CUDA error ") + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")" +
                    place(call, file, line));
}

void check_cublas_status(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  // A status other than success came from a cuBLAS call, so cuBLAS is loaded (cublas_library() does not throw).
  const CublasLibrary& api = cublas_library();
  const std::string text =
      std::string(api.cublasGetStatusName(status)) + " (" + api.cublasGetStatusString(status) + ")";
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) throw NotSupported("cuBLAS " + text + place(call, file, line));
  throw CudaFailure("cuBLAS error " + text + place(call, file, line));
}

}  // namespace qgru::cuda
