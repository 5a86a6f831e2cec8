// The chooser's CUDA executor (cuda_executor.h): QuantGruCuda on one device, CUDA's exceptions as ExecutorError.
#include "cuda_executor.h"

#ifdef QGRU_EXECUTOR_WITH_CUDA
#include <cuda_runtime.h>

#include <mutex>

#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/quant_gru_cuda.h"
#include "qgru_cuda/status.h"
#endif

namespace qgru::executor {

#ifdef QGRU_EXECUTOR_WITH_CUDA
namespace {

using Kind = ExecutorError::Kind;

// Runs fn with the device current on this thread, CUDA's exceptions as ExecutorError.
template <class Fn>
auto with_device(int device_id, Fn&& fn) {
  try {
    const cudaError_t e = cudaSetDevice(device_id);
    if (e != cudaSuccess) {
      const std::string message = std::string("cudaSetDevice(") + std::to_string(device_id) + "): " + cudaGetErrorString(e);
      throw ExecutorError(Kind::Failed, message, message);
    }
    return fn();
  } catch (const cuda::NoDevice& e) {
    throw ExecutorError(Kind::NoDevice, e.what(), e.what());
  } catch (const cuda::NotSupported& e) {
    throw ExecutorError(Kind::NotSupported, e.what(), e.what());
  } catch (const cuda::CudaFailure& e) {
    throw ExecutorError(Kind::Failed, e.what(), e.what());
  }
}

// QuantGruCudaStream on the executor's device, CUDA's exceptions as ExecutorError. Every call holds the executor's
// lock: a stream state runs the executor's cells (their workspaces, captured step graphs, stream and cuBLAS handle),
// which whole runs and the context's other states on other threads use too.
class CudaDeviceStepper : public DeviceStepper {
 public:
  CudaDeviceStepper(const cuda::QuantGruCuda& executor, int N, int device_id, std::mutex& calls)
      : device_id_(device_id), calls_(calls), stream_(make_stream(executor, N, device_id, calls)) {}
  void step(const float* x, int frames, float* y) override {
    const std::lock_guard<std::mutex> lock(calls_);
    with_device(device_id_, [&] { stream_.step(x, frames, y); });
  }
  void step_codes(const int32_t* q_x, int frames, int32_t* y_codes) override {
    const std::lock_guard<std::mutex> lock(calls_);
    with_device(device_id_, [&] { stream_.step_codes(q_x, frames, y_codes); });
  }
  void get_codes(int32_t* q_h) const override {
    const std::lock_guard<std::mutex> lock(calls_);
    with_device(device_id_, [&] { stream_.get_codes(q_h); });
  }
  void set_codes(const int32_t* q_h) override {
    const std::lock_guard<std::mutex> lock(calls_);
    with_device(device_id_, [&] { stream_.set_codes(q_h); });
  }

 private:
  // The constructor reserves the cells' one-step workspaces: under the lock too.
  static cuda::QuantGruCudaStream make_stream(const cuda::QuantGruCuda& executor, int N, int device_id, std::mutex& calls) {
    const std::lock_guard<std::mutex> lock(calls);
    return with_device(device_id, [&] { return cuda::QuantGruCudaStream(executor, N); });
  }

  int device_id_;
  std::mutex& calls_;  // the executor's (it outlives the stepper: a state holds its context)
  cuda::QuantGruCudaStream stream_;
};

class CudaExecutor : public Executor {
 public:
  CudaExecutor(const QuantizedGru& model, int device_id)
      : device_id_(device_id), executor_(with_device(device_id, [&] { return cuda::QuantGruCuda(model); })) {}
  std::string describe() const override { return "cuda:" + std::to_string(device_id_) + " (" + detail() + ")"; }
  std::string detail() const override {  // the cells' plans are made and cached by runs: under the lock
    const std::lock_guard<std::mutex> lock(calls_);
    return executor_.describe();
  }
  // One call at a time (Executor's contract: a device executor serializes its own runs): QuantGruCuda's buffers,
  // its cells' workspaces and captured step graphs, its streams and cuBLAS handles are one set per executor.
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths) const override {
    const std::lock_guard<std::mutex> lock(calls_);
    return with_device(device_id_, [&] { return executor_.run_codes(q_x, T, N, q_h0, lengths); });
  }
  QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths) const override {
    const std::lock_guard<std::mutex> lock(calls_);
    return with_device(device_id_, [&] { return executor_.run(x, T, N, h0, lengths); });
  }
  QuantGruResult run_floats(const float* x, int T, int N, const float* h0, const int32_t* lengths) const override {
    const std::lock_guard<std::mutex> lock(calls_);
    return with_device(device_id_, [&] { return executor_.run_floats(x, T, N, h0, lengths); });
  }
  std::unique_ptr<GruCellStepper> make_stepper(int) const override { return nullptr; }
  // On the device flow only (QGRU_CUDA_GRU_FLOW=device, until the GPU self-test has passed); else null, and the C API
  // steps by whole runs of the frames from the state, as before.
  std::unique_ptr<DeviceStepper> make_device_stepper(int N) const override {
    if (!executor_.device_flow()) return nullptr;
    return std::make_unique<CudaDeviceStepper>(executor_, N, device_id_, calls_);
  }

 private:
  int device_id_;
  cuda::QuantGruCuda executor_;
  mutable std::mutex calls_;
};

}  // namespace

bool cuda_built() { return true; }

std::string cuda_unusable_reason(int device_id) {
  const cuda::DeviceProbe probe = cuda::probe_devices();
  if (probe.device_count == 0) return probe.reason;
  if (device_id < 0 || device_id >= probe.device_count) {
    return "CUDA device " + std::to_string(device_id) + " does not exist (" + std::to_string(probe.device_count) +
           " device(s))";
  }
  // The executor's GEMMs need cuBLAS: loaded here, at the first CUDA use on a machine that has a device.
  return cuda::cublas_unusable_reason();
}

void throw_cuda_unusable(int device_id) {
  const cuda::DeviceProbe probe = cuda::probe_devices();
  if (probe.device_count == 0) throw ExecutorError(Kind::NoDevice, "no CUDA device: " + probe.reason, probe.reason);
  const std::string reason = cuda_unusable_reason(device_id);
  throw ExecutorError(Kind::NoDevice, reason, reason);
}

std::unique_ptr<Executor> make_cuda_executor(const QuantizedGru& model, int device_id) {
  return std::make_unique<CudaExecutor>(model, device_id);
}

#else

bool cuda_built() { return false; }

std::string cuda_unusable_reason(int) { return "this qgru was built without CUDA (nvcc was not found at configure time)"; }

void throw_cuda_unusable(int device_id) {
  throw ExecutorError(ExecutorError::Kind::NotBuilt, "this qgru runtime was built without CUDA (no nvcc at build time)",
                      cuda_unusable_reason(device_id));
}

std::unique_ptr<Executor> make_cuda_executor(const QuantizedGru&, int device_id) { throw_cuda_unusable(device_id); }

#endif

}  // namespace qgru::executor
