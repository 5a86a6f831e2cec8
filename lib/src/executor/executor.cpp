// The executor chooser (qgru/runtime/executor.h): the device, then the fast executor, then the reference, each
// fallback with its reason. The CUDA executor itself is cuda_executor.cpp.
#include "qgru/runtime/executor.h"

#include <utility>

#include "cuda_executor.h"

namespace qgru {

namespace {

// The fast executor on the plan fast_path_support made (packed once); its stepper where the fast path has one.
class FastCpuExecutor : public Executor {
 public:
  FastCpuExecutor(const QuantizedGru& model, const FastPathSupport& support, const FastExecutorOptions& options)
      : model_(model), fast_(model, support, options) {}
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths) const override {
    return fast_.run_codes(q_x, T, N, q_h0, nullptr, lengths);
  }
  QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths) const override {
    return fast_.run(x, T, N, h0, nullptr, lengths);
  }
  std::unique_ptr<GruCellStepper> make_stepper(int N) const override {
    std::unique_ptr<GruCellStepper> stepper = fast_.make_stepper(N);
    return stepper ? std::move(stepper) : make_reference_stepper(model_, N);
  }

 private:
  const QuantizedGru& model_;
  FastQuantGru fast_;
};

// The reference executor (qgru/runtime/quant_executor.h).
class ReferenceCpuExecutor : public Executor {
 public:
  explicit ReferenceCpuExecutor(const QuantizedGru& model) : model_(model) {}
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths) const override {
    return run_quantized_gru_codes(model_, q_x, T, N, q_h0, nullptr, lengths);
  }
  QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths) const override {
    return run_quantized_gru(model_, x, T, N, h0, nullptr, lengths);
  }
  std::unique_ptr<GruCellStepper> make_stepper(int N) const override { return make_reference_stepper(model_, N); }

 private:
  const QuantizedGru& model_;
};

}  // namespace

ExecutorDevice parse_executor_device(const std::string& word) {
  if (word == "cpu") return ExecutorDevice::Cpu;
  if (word == "cuda") return ExecutorDevice::Cuda;
  if (word == "auto") return ExecutorDevice::Auto;
  throw Error("--device " + word + ": expected cpu, cuda or auto");
}

bool executor_cuda_built() { return executor::cuda_built(); }

std::unique_ptr<Executor> make_executor(const QuantizedGru& model, const ExecutorRequest& request) {
  if (request.executor != "fast" && request.executor != "reference") {
    throw Error("--executor " + request.executor + ": expected fast or reference");
  }
  std::vector<ExecutorFallback> fallbacks;
  if (request.device != ExecutorDevice::Cpu) {
    // Cuda: the device or an ExecutorError; Auto: the device when usable, else the CPU and why.
    const std::string unusable = executor::cuda_unusable_reason(request.device_id);
    if (unusable.empty()) {
      std::unique_ptr<Executor> device = executor::make_cuda_executor(model, request.device_id);
      device->name_ = "cuda";
      device->on_device_ = true;
      return device;
    }
    if (request.device == ExecutorDevice::Cuda) executor::throw_cuda_unusable(request.device_id);
    fallbacks.push_back({"cuda", "cpu", unusable});
  }
  std::unique_ptr<Executor> chosen;
  std::string name;
  if (request.executor == "fast") {
    const FastPathSupport support = fast_path_support(model, request.fast);
    if (support.supported) {
      chosen = std::make_unique<FastCpuExecutor>(model, support, request.fast);
      name = "fast (" + support.isa + ")";
    } else {
      fallbacks.push_back({"fast", "reference", support.reason});
      name = "reference (fast path: " + support.reason + ")";
    }
  } else {
    name = "reference";
  }
  if (!chosen) chosen = std::make_unique<ReferenceCpuExecutor>(model);
  chosen->name_ = std::move(name);
  chosen->fallbacks_ = std::move(fallbacks);
  return chosen;
}

}  // namespace qgru
