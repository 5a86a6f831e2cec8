// qgru/gptq/job_device.h: the GPTQ job's devices by name. Here, in qgru_capi, because this is the GPTQ library
// that links qgru_cuda_gptq when qgru is built with CUDA (QGRU_CAPI_WITH_CUDA, lib/CMakeLists.txt).
#include "qgru/gptq/job_device.h"

#include "qgru/base/error.h"

#ifdef QGRU_CAPI_WITH_CUDA
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/gptq_device.h"
#endif

namespace qgru::gptq {

#ifdef QGRU_CAPI_WITH_CUDA
namespace {
// JobDevice::Hessian over the GPU's float64 accumulator: host float32 rows uploaded chunk by chunk, or rows
// already on the GPU read where they are.
struct CudaJobHessian : JobDevice::Hessian {
  explicit CudaJobHessian(int64_t K) : device(K) {}
  void add(const std::vector<float>& values, int64_t M, bool feature_major) override {
    if (feature_major) device.add_feature_major(values.data(), M);
    else device.add_token_major(values.data(), M);
  }
  void add_device_rows(uintptr_t rows, int64_t M, int64_t ld, uintptr_t producer_stream,
                       const std::string& source) override {
    device.add_stream_rows(reinterpret_cast<const float*>(rows), M, ld, producer_stream, source);
  }
  std::vector<double> finish() override { return device.hessian(); }
  cuda::DeviceHessian device;
};
}  // namespace
#endif

std::vector<std::string> job_devices() {
#ifdef QGRU_CAPI_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

JobDevice make_job_device(const std::string& device) {
  if (device == "cpu") return {};
  if (device != "cuda") throw Error("device '" + device + "': expected cpu or cuda");
#ifdef QGRU_CAPI_WITH_CUDA
  const std::string reason = cuda::device_unusable_reason();  // a GPU, and cuBLAS loaded at its first use
  if (!reason.empty()) throw Error("device cuda: no usable CUDA device: " + reason);
  JobDevice job_device;
  job_device.name = "cuda";
  job_device.hessian = [](int64_t K) { return std::make_unique<CudaJobHessian>(K); };
  job_device.quantize = cuda::gptq_quantize_cuda;
  return job_device;
#else
  throw Error("device cuda: this qgru was built without CUDA (nvcc was not found at configure time)");
#endif
}

}  // namespace qgru::gptq
