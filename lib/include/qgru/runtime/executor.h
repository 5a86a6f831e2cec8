#pragma once
// The one executor chooser of a quantized model (library qgru_executor, lib/src/executor/): the device first (the
// CUDA executor, cuda/: when this build has it and a device is usable), then on the CPU the fast executor
// (qgru/runtime/fast_executor.h, where the CPU and the model allow it), then the reference executor
// (qgru/runtime/quant_executor.h, the specification). Every executor computes the same codes (tested). Each
// fallback on the way is returned with its reason, for the caller to say (`qgru run --device auto` logs it).
// The CLI (run, verify), the runtime C API's contexts, the range search and, through the C API, the Python package
// choose here.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/runtime/stream_step.h"

namespace qgru {

enum class ExecutorDevice {
  Cpu,   // the CPU executors
  Cuda,  // the CUDA executor, or an ExecutorError saying why not
  Auto,  // the CUDA executor when this build has it and a device is usable, else the CPU (a fallback with its reason)
};

// --device's words: cpu, cuda, auto; anything else is a qgru::Error "--device <word>: expected cpu, cuda or auto".
ExecutorDevice parse_executor_device(const std::string& word);
// Whether this build has the CUDA executor (QGRU_HAVE_CUDA at configure time).
bool executor_cuda_built();

struct ExecutorRequest {
  ExecutorDevice device = ExecutorDevice::Cpu;
  int device_id = 0;              // the CUDA device ordinal
  std::string executor = "fast";  // on the CPU: "fast" (the reference where the fast path refuses) or "reference"
  FastExecutorOptions fast;       // the fast executor's level, threads and schedules
};

// Why the chooser could not give what was asked for (a usable CUDA device for ExecutorDevice::Cuda), or why a
// device executor failed. what(): the message; reason(): the cause alone (e.g. the CUDA probe's reason).
class ExecutorError : public Error {
 public:
  enum class Kind {
    NotBuilt,      // the device's executor is not in this build
    NoDevice,      // no usable device (none, the driver too old, device_id out of range)
    NotSupported,  // the model has a cell the device executor does not run
    Failed,        // a device call failed
  };
  ExecutorError(Kind kind, const std::string& message, std::string reason)
      : Error(message), kind_(kind), reason_(std::move(reason)) {}
  Kind kind() const { return kind_; }
  const std::string& reason() const { return reason_; }

 private:
  Kind kind_;
  std::string reason_;
};

// A fallback the chooser took: from what was asked (or preferred) to what runs, and why.
struct ExecutorFallback {
  std::string from;    // "cuda" or "fast"
  std::string to;      // "cpu" or "reference"
  std::string reason;  // e.g. the CUDA probe's reason, or the fast path's (FastPathSupport::reason)
};

// A model's executor as chosen; the model must outlive it and stay unchanged. Runs are const and thread-safe
// on the CPU executors; a device executor serializes its own.
class Executor {
 public:
  virtual ~Executor() = default;
  // What runs, as the run summary says it: "cuda", "fast (avx2)", "fast (avx512-vnni)", "reference", or
  // "reference (fast path: <why not>)".
  const std::string& name() const { return name_; }
  // The fallbacks taken, in the order they happened (the device's first).
  const std::vector<ExecutorFallback>& fallbacks() const { return fallbacks_; }
  bool on_device() const { return on_device_; }
  // More than name(): on CUDA "cuda:<device_id> (<detail()>)"; on the CPU name().
  virtual std::string describe() const { return name_; }
  // What the executor says of its own plan: on CUDA each cell's path (QuantGruCuda::describe()); empty on the CPU.
  virtual std::string detail() const { return ""; }
  // run_quantized_gru_codes / run_quantized_gru's contracts (lengths null: every sequence has T steps).
  virtual QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                                   const int32_t* lengths = nullptr) const = 0;
  virtual QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths = nullptr) const = 0;
  // run() for a caller that reads no codes: result.output_codes may be left empty (the CUDA executor's device flow
  // then copies only the floats back); the CPU executors return run()'s result.
  virtual QuantGruResult run_floats(const float* x, int T, int N, const float* h0, const int32_t* lengths = nullptr) const {
    return run(x, T, N, h0, lengths);
  }
  // The streaming cell for a batch of N on the CPU (the fast one where it applies, else the reference's); null on
  // a device (its runs are whole sequences).
  virtual std::unique_ptr<GruCellStepper> make_stepper(int N) const = 0;
  // A streaming state of N streams kept on the device (CUDA: the state never leaves it between frames; its buffers
  // made here, none per step); null on the CPU. A unidirectional model only (streaming_refusal).
  virtual std::unique_ptr<DeviceStepper> make_device_stepper(int N) const {
    (void)N;
    return nullptr;
  }

 protected:
  std::string name_;
  std::vector<ExecutorFallback> fallbacks_;
  bool on_device_ = false;
  friend std::unique_ptr<Executor> make_executor(const QuantizedGru& model, const ExecutorRequest& request);
};

// The executor for `model`: the device (Cuda: ExecutorError when not usable; Auto: the CPU with a fallback when
// not), then fast (unless request.executor is "reference"), then the reference with the fast path's reason. A
// request.executor other than "fast" or "reference" is a qgru::Error "--executor <word>: expected fast or reference".
std::unique_ptr<Executor> make_executor(const QuantizedGru& model, const ExecutorRequest& request);

}  // namespace qgru
