#include "qgru/gptq/resident_linear.h"

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "capi_internal.h"
#include "qgru/base/error.h"

namespace qgru::gptq {

ResidentLinear::ResidentLinear(CheckpointLayer layer, LinearDevice device, int device_id, std::string name)
    : layer_(std::move(layer)), device_(device), device_id_(device_id), name_(std::move(name)) {
  if (device_ != LinearDevice::kCuda) return;
  const std::string refused = name_ + ": device cuda: ";
  if (device_id_ < 0) throw Error(refused + "device_id " + std::to_string(device_id_) + ": expected >= 0");
#ifdef QGRU_CAPI_WITH_CUDA
  capi::Outcome outcome;
  try {
    outcome = capi::cuda_resident_checkpoint(layer_.layer, layer_.qweight, device_id_, cuda_);
  } catch (const Error& e) {  // the layer's own checks (a width or shape no GPU kernel takes)
    throw Error(refused + e.what());
  }
  if (!outcome.ok()) throw Error(refused + outcome.message);
#else
  throw Error(refused + "this qgru was built without CUDA (nvcc was not found at configure time)");
#endif
}

ResidentLinear::~ResidentLinear() = default;

std::vector<float> ResidentLinear::run(const std::vector<float>& x, int64_t M) const {
  const int64_t K = layer_.layer.K;
  if (M < 0 || static_cast<int64_t>(x.size()) != M * K) {
    throw Error(name_ + ": x holds " + std::to_string(x.size()) + " values, expected M·K = " + std::to_string(M) + "·" +
                std::to_string(K));
  }
  std::vector<float> y;
  if (M == 0) return y;  // no rows (the GPU kernels take M >= 1)
  if (device_ == LinearDevice::kCpu) {
    y = layer_linear_f32(layer_.layer, layer_.qweight, x, M);
  } else {
#ifdef QGRU_CAPI_WITH_CUDA
    const std::lock_guard<std::mutex> one_at_a_time(cuda_calls_);
    const capi::Outcome outcome = capi::cuda_resident_run_host(*cuda_, device_id_, x, M, y);
    if (!outcome.ok()) throw Error(name_ + ": device cuda: " + outcome.message);
#endif
  }
  add_linear_bias(y, layer_.bias, M);
  return y;
}

void ResidentLinear::require_cuda_for_device_operands() const {
  if (device_ != LinearDevice::kCuda) throw Error(name_ + ": device rows need a layer on device cuda");
}

int64_t ResidentLinear::device_workspace_bytes(int64_t M) const {
  require_cuda_for_device_operands();
  int64_t bytes = 0;
#ifdef QGRU_CAPI_WITH_CUDA
  if (M > 0) {
    const capi::Outcome outcome = capi::cuda_resident_workspace_bytes(*cuda_, device_id_, M, &bytes);
    if (!outcome.ok()) throw Error(name_ + ": device cuda: " + outcome.message);
  }
#endif
  return bytes;
}

void ResidentLinear::run_device(uintptr_t x, int64_t M, uintptr_t y, uintptr_t workspace, uintptr_t stream) const {
  require_cuda_for_device_operands();
  if (M < 0) throw Error(name_ + ": M = " + std::to_string(M) + ", expected >= 0");
  if (x % 16 != 0) throw Error(name_ + ": x in device memory must be 16-byte aligned");
  if (M == 0) return;
#ifdef QGRU_CAPI_WITH_CUDA
  const std::lock_guard<std::mutex> one_at_a_time(cuda_calls_);
  const capi::Outcome outcome = capi::cuda_resident_run_device(
      *cuda_, device_id_, reinterpret_cast<const void*>(x), M, reinterpret_cast<void*>(y),
      reinterpret_cast<void*>(workspace), reinterpret_cast<void*>(stream));
  if (!outcome.ok()) throw Error(name_ + ": device cuda: " + outcome.message);
#else
  static_cast<void>(y);
  static_cast<void>(workspace);
  static_cast<void>(stream);
#endif
}

}  // namespace qgru::gptq
