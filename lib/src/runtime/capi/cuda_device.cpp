// The runtime C API's CUDA device: the whole-model CUDA executor (qgru_cuda/quant_gru_cuda.h) on the
// chosen device, its exceptions answered as statuses. Built with CUDA only when QGRU_RUNTIME_WITH_CUDA is
// set (lib/CMakeLists.txt); otherwise every CUDA context is DEVICE_NOT_BUILT.
#include "runtime_capi_internal.h"

#ifdef QGRU_RUNTIME_WITH_CUDA
#include <cuda_runtime.h>

#include "qgru_cuda/device.h"
#include "qgru_cuda/quant_gru_cuda.h"
#include "qgru_cuda/status.h"
#endif

namespace qgru::runtime_capi {

#ifdef QGRU_RUNTIME_WITH_CUDA
namespace {

// Runs fn with the device current on this thread, CUDA's exceptions as statuses.
template <class Fn>
auto on_device(int device_id, Fn&& fn) {
  try {
    const cudaError_t e = cudaSetDevice(device_id);
    if (e != cudaSuccess) {
      throw StatusError{QGRU_RT_EXECUTION_FAILED, std::string("cudaSetDevice(") + std::to_string(device_id) + "): " +
                                                      cudaGetErrorString(e)};
    }
    return fn();
  } catch (const cuda::NoDevice& e) {
    throw StatusError{QGRU_RT_DEVICE_UNAVAILABLE, e.what()};
  } catch (const cuda::NotSupported& e) {
    throw StatusError{QGRU_RT_NOT_SUPPORTED, e.what()};
  } catch (const cuda::CudaFailure& e) {
    throw StatusError{QGRU_RT_EXECUTION_FAILED, e.what()};
  }
}

class CudaExecutor : public DeviceExecutor {
 public:
  CudaExecutor(const QuantizedGru& model, int device_id)
      : device_id_(device_id), executor_(on_device(device_id, [&] { return cuda::QuantGruCuda(model); })) {}
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                           const int32_t* lengths) const override {
    return on_device(device_id_, [&] { return executor_.run_codes(q_x, T, N, q_h0, lengths); });
  }
  std::string describe() const override { return "cuda:" + std::to_string(device_id_) + " (" + executor_.describe() + ")"; }

 private:
  int device_id_;
  cuda::QuantGruCuda executor_;
};

}  // namespace

std::unique_ptr<DeviceExecutor> make_cuda_executor(const QuantizedGru& model, int device_id) {
  const cuda::DeviceProbe probe = cuda::probe_devices();
  if (probe.device_count == 0) throw StatusError{QGRU_RT_DEVICE_UNAVAILABLE, "no CUDA device: " + probe.reason};
  if (device_id < 0 || device_id >= probe.device_count) {
    throw StatusError{QGRU_RT_DEVICE_UNAVAILABLE, "CUDA device " + std::to_string(device_id) + " does not exist (" +
                                                      std::to_string(probe.device_count) + " device(s))"};
  }
  return std::make_unique<CudaExecutor>(model, device_id);
}

#else

std::unique_ptr<DeviceExecutor> make_cuda_executor(const QuantizedGru&, int) {
  throw StatusError{QGRU_RT_DEVICE_NOT_BUILT, "this qgru runtime was built without CUDA (no nvcc at build time)"};
}

#endif

}  // namespace qgru::runtime_capi
