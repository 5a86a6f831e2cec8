// QuantGruCudaStream (qgru_cuda/quant_gru_cuda.h): streaming on the device, the state kept there between frames.
#include <cuda_runtime.h>

#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/kernels/device_flow.h"
#include "qgru/kernels/persistent_gru.h"
#include "qgru/runtime/code_maps.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/stream_step.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/quant_gru_cuda.h"
#include "device_flow_launch.h"
#include "pinned_buffer.h"
#include "quant_gru_cuda_impl.h"
#include "step_graph.h"

namespace qgru::cuda {

// One frame's work captured into a CUDA graph (QuantGruCudaStream::Impl::capture). It holds the addresses it was
// captured with: the state's, the frame's, the pinned buffers' (all made by the constructor, fixed) and each cell's
// workspace (moved when a run of a larger shape grows it: a whole call of a longer T or a larger N, another state of a
// larger N; then it is captured again).
struct FrameGraph {
  cudaGraphExec_t exec = nullptr;
  std::vector<const void*> workspaces;        // each layer's cell workspace at capture
  std::vector<std::string> persistent_plans;  // per layer: the plan of the persistent run whose error words it copies
  int copies = 0;                             // its host<->device copies, counted (count_host_transfer) per replay
  bool launched = false;                      // replayed once: a later launch failure is an error, not a refusal
  FrameGraph() = default;
  FrameGraph(const FrameGraph&) = delete;
  FrameGraph& operator=(const FrameGraph&) = delete;
  ~FrameGraph() { reset(); }
  void reset() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);  // nothing to report to
    exec = nullptr;
    workspaces.clear();
    launched = false;
  }
};

struct QuantGruCudaStream::Impl {
  const QuantGruCuda::Impl* executor = nullptr;
  int N = 0;
  FrameIssue issue = FrameIssue::Graph;
  DeviceBuffer state;    // [L, N, H] int32
  DeviceBuffer frame;    // [N, C] floats or codes
  DeviceBuffer y;        // [N, H] floats
  DeviceBuffer y_codes;  // [N, H] codes
  PinnedBuffer in, out;  // one frame each way
  PinnedBuffer error_words;  // [L, kPersistentErrorWords]: each persistent layer's error words, copied back per frame
  std::vector<HToNextXMap> rescales;  // layer l -> l + 1
  CodeDequantizer dequantizer;        // the last layer's h
  InputQuantizer quantizer;           // layer 0's x
  // Per kind of frame, [floats][want_output]: its graph, and whether a frame of that kind has run its launches once
  // (the first runs them directly: the cells' plans, cuBLAS's first-call setup and the step graphs are made outside
  // any capture; the second frame is captured).
  FrameGraph graphs[2][2];
  bool launched_once[2][2] = {{false, false}, {false, false}};
  std::vector<std::string> launched_plans;  // as FrameGraph::persistent_plans, for a frame issued directly
  std::string capture_refusal;  // why frames are issued as launches after a failed capture or first launch ("" none)
  int captures = 0;

  std::vector<const void*> workspaces() const {
    std::vector<const void*> at;
    for (int l = 0; l < executor->model.num_layers; ++l) at.push_back(executor->cell(l, 0).workspace_address());
    return at;
  }
  // The cells' workspaces are where `at` says (no allocation: asked every frame).
  bool workspaces_at(const std::vector<const void*>& at) const {
    if (at.size() != static_cast<size_t>(executor->model.num_layers)) return false;
    for (size_t l = 0; l < at.size(); ++l) {
      if (executor->cell(static_cast<int>(l), 0).workspace_address() != at[l]) return false;
    }
    return true;
  }

  // Enqueues one frame on the executor's stream: x (floats or codes, per `floats`) from `in`; the output (floats or
  // codes) into `out` when want_output; each persistent layer's error words into `error_words`, its plan into
  // plans[l] ("" for a per-step layer). No synchronization: issued directly or captured alike. Returns the frame's
  // host<->device copies; they are counted (count_host_transfer) here when `capturing` is false, else per replay.
  int issue_frame(bool floats, bool want_output, std::vector<std::string>& plans, bool capturing) {
    const QuantizedGru& model = executor->model;
    const int L = model.num_layers, H = model.hidden_size, C = model.input_size;
    const size_t NH = static_cast<size_t>(N) * H;
    cudaStream_t stream = executor->stream;
    int copies = 0;
    const auto copy = [&](void* to, const void* from, size_t bytes, cudaMemcpyKind kind) {
      QGRU_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, stream));
      if (!capturing) count_host_transfer();
      ++copies;
    };
    copy(frame.data(), in.reserve(static_cast<size_t>(N) * C * 4), static_cast<size_t>(N) * C * 4, cudaMemcpyHostToDevice);
    kernels::LayerInputSource source;
    source.cols = C;
    if (floats) {
      source.kind = kernels::LayerInputKind::Floats;
      source.values = static_cast<const float*>(frame.data());
      source.quantizer = quantizer;
    } else {
      source.kind = kernels::LayerInputKind::Codes;
      source.codes = static_cast<const int32_t*>(frame.data());
    }
    plans.assign(static_cast<size_t>(L), std::string());
    auto* words = static_cast<int*>(error_words.reserve(static_cast<size_t>(L) * kernels::kPersistentErrorWords * sizeof(int)));
    const int32_t* out_codes = nullptr;
    for (int l = 0; l < L; ++l) {
      const GruCellCuda& cell = executor->cell(l, 0);
      out_codes = cell.run_on_device(source, 1, N, static_cast<int32_t*>(state.data()) + l * NH, false, nullptr);
      GruCellCuda::DeviceErrorWords errors = cell.last_device_error_words();
      if (errors.words != nullptr) {
        copy(words + static_cast<size_t>(l) * kernels::kPersistentErrorWords, errors.words,
             kernels::kPersistentErrorWords * sizeof(int), cudaMemcpyDeviceToHost);
        plans[static_cast<size_t>(l)] = std::move(errors.plan);
      }
      source = kernels::LayerInputSource{};
      source.kind = kernels::LayerInputKind::PreviousLayer;
      source.cols = H;
      source.H = H;
      source.previous[0] = out_codes;
      if (l + 1 < L) source.rescale[0] = rescales[static_cast<size_t>(l)];
    }
    if (want_output) {
      kernels::OutputSink sink;
      sink.H = H;
      sink.D = 1;
      sink.cell_out[0] = out_codes;
      sink.dequantizer[0] = dequantizer;
      sink.y = static_cast<float*>(y.data());
      sink.codes = floats ? nullptr : static_cast<int32_t*>(y_codes.data());
      launch_output(sink, static_cast<int64_t>(NH), stream);
      copy(out.reserve(NH * 4), floats ? y.data() : y_codes.data(), NH * 4, cudaMemcpyDeviceToHost);
    }
    return copies;
  }

  // Captures one frame of this kind into g. On any failure (an operation the capture refuses, an instantiation
  // error) the stream is left usable, the reason kept, and frames are issued as launches from then on. No work is
  // pending when it begins (every frame and whole call ends synchronized), so an error here is the capture's.
  bool capture(FrameGraph& g, bool floats, bool want_output) {
    g.reset();
    std::string failure;
    try {
      g.exec = capture_graph(executor->stream, [&] { g.copies = issue_frame(floats, want_output, g.persistent_plans, true); });
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an exception that is not a std::exception";
    }
    if (!failure.empty()) {
      (void)cudaGetLastError();  // a refused capture's error is not sticky; a sticky one fails the direct frame next
      capture_refusal = "the frame's capture failed: " + failure;
      return false;
    }
    g.workspaces = workspaces();
    ++captures;
    return true;
  }

  // Launches g. A graph the driver will not launch the first time (a node it captured but cannot run as captured)
  // is a refusal like a failed capture: graphs off, the reason kept, false returned and the frame issued as launches.
  // A graph that launched before and fails now is an error.
  bool replay(FrameGraph& g) {
    const cudaError_t launched = cudaGraphLaunch(g.exec, executor->stream);
    if (launched == cudaSuccess) {
      g.launched = true;
      for (int i = 0; i < g.copies; ++i) count_host_transfer();
      return true;
    }
    if (g.launched) QGRU_CUDA_CHECK(launched);  // throws
    (void)cudaGetLastError();
    capture_refusal = std::string("the frame's graph did not launch: ") + cudaGetErrorString(launched);
    g.reset();
    return false;
  }

  // One frame: replayed from its kind's graph, captured first, or issued as launches (kernels::choose_frame_action);
  // then one synchronization and the persistent layers' error words.
  void step_frame(bool floats, bool want_output) {
    const std::vector<std::string>* plans = &launched_plans;
    FrameGraph& g = graphs[floats ? 1 : 0][want_output ? 1 : 0];
    bool& launched = launched_once[floats ? 1 : 0][want_output ? 1 : 0];
    const kernels::FrameAction action = kernels::choose_frame_action(
        issue == FrameIssue::Graph && capture_refusal.empty(), launched, g.exec != nullptr, workspaces_at(g.workspaces));
    const bool replayed = (action == kernels::FrameAction::Replay ||
                           (action == kernels::FrameAction::Capture && capture(g, floats, want_output))) &&
                          replay(g);
    if (replayed) {
      plans = &g.persistent_plans;
    } else {
      issue_frame(floats, want_output, launched_plans, false);
      launched = true;
    }
    QGRU_CUDA_CHECK(cudaStreamSynchronize(executor->stream));
    const auto* words = static_cast<const int*>(error_words.data());
    for (size_t l = 0; l < plans->size(); ++l) {
      if (!(*plans)[l].empty()) GruCellCuda::check_error_words(words + l * kernels::kPersistentErrorWords, (*plans)[l]);
    }
  }
};

QuantGruCudaStream::QuantGruCudaStream(const QuantGruCuda& executor, int N, FrameIssue issue)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.executor = executor.impl_.get();
  s.issue = issue;
  const QuantizedGru& model = s.executor->model;
  const std::string refusal = streaming_refusal(model);
  if (!refusal.empty()) throw Error("CUDA streaming: " + refusal);
  if (N < 1) throw Error("CUDA streaming: N = " + std::to_string(N) + ", expected >= 1");
  s.N = N;
  const int L = model.num_layers, H = model.hidden_size, C = model.input_size;
  const size_t NH = static_cast<size_t>(N) * H;
  // Every buffer a step uses, now: the state, one frame each way (device and pinned), each cell's one-step workspace.
  s.state = DeviceBuffer(static_cast<size_t>(L) * NH * sizeof(int32_t));
  s.frame = DeviceBuffer(static_cast<size_t>(N) * C * 4);
  s.y = DeviceBuffer(NH * sizeof(float));
  s.y_codes = DeviceBuffer(NH * sizeof(int32_t));
  s.in.reserve(static_cast<size_t>(N) * C * 4);
  s.out.reserve(NH * 4);
  s.error_words.reserve(static_cast<size_t>(L) * kernels::kPersistentErrorWords * sizeof(int));
  for (int l = 0; l < L; ++l) {
    s.executor->cell(l, 0).reserve(1, N);
    if (l + 1 < L) s.rescales.push_back(h_to_next_x_map(model, l, 0));
  }
  s.dequantizer = code_dequantizer(model.cell(L - 1, 0).q(GruTensor::h));
  s.quantizer = input_quantizer(model.input_quant());
  for (int l = 0; l < L; ++l) {
    launch_fill_codes(static_cast<int32_t*>(s.state.data()) + l * NH, static_cast<int64_t>(NH), model.cell(l, 0).q(GruTensor::h).zp,
                      s.executor->stream);
  }
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.executor->stream));
}

QuantGruCudaStream::~QuantGruCudaStream() = default;
QuantGruCudaStream::QuantGruCudaStream(QuantGruCudaStream&&) noexcept = default;
QuantGruCudaStream& QuantGruCudaStream::operator=(QuantGruCudaStream&&) noexcept = default;

int QuantGruCudaStream::batch() const { return impl_->N; }

int QuantGruCudaStream::captures() const { return impl_->captures; }

std::string QuantGruCudaStream::describe() const {
  const Impl& s = *impl_;
  if (s.issue == FrameIssue::Launches) return "launches a frame (asked)";
  if (!s.capture_refusal.empty()) return "launches a frame: " + s.capture_refusal;
  return "one graph a frame (captured " + std::to_string(s.captures) + (s.captures == 1 ? " time)" : " times)");
}

void QuantGruCudaStream::step(const float* x, int frames, float* y) {
  Impl& s = *impl_;
  const QuantizedGru& model = s.executor->model;
  const size_t frame_in = static_cast<size_t>(s.N) * model.input_size, frame_out = static_cast<size_t>(s.N) * model.hidden_size;
  for (int f = 0; f < frames; ++f) {
    std::memcpy(s.in.reserve(frame_in * 4), x + static_cast<size_t>(f) * frame_in, frame_in * sizeof(float));
    s.step_frame(true, y != nullptr);
    if (y != nullptr) std::memcpy(y + static_cast<size_t>(f) * frame_out, s.out.reserve(frame_out * 4), frame_out * sizeof(float));
  }
}

void QuantGruCudaStream::step_codes(const int32_t* q_x, int frames, int32_t* y_codes) {
  Impl& s = *impl_;
  const QuantizedGru& model = s.executor->model;
  check_input_codes(model, q_x, frames, s.N);  // every frame before the state changes
  const size_t frame_in = static_cast<size_t>(s.N) * model.input_size, frame_out = static_cast<size_t>(s.N) * model.hidden_size;
  for (int f = 0; f < frames; ++f) {
    std::memcpy(s.in.reserve(frame_in * 4), q_x + static_cast<size_t>(f) * frame_in, frame_in * sizeof(int32_t));
    s.step_frame(false, y_codes != nullptr);
    if (y_codes != nullptr) {
      std::memcpy(y_codes + static_cast<size_t>(f) * frame_out, s.out.reserve(frame_out * 4), frame_out * sizeof(int32_t));
    }
  }
}

void QuantGruCudaStream::get_codes(int32_t* q_h) const {
  const Impl& s = *impl_;
  int copies = 0;  // on the executor's stream: ordered after the steps (a legacy-stream copy would not be)
  counted_copy(q_h, s.state.data(), s.state.bytes(), cudaMemcpyDeviceToHost, s.executor->stream, copies);
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.executor->stream));
}

void QuantGruCudaStream::set_codes(const int32_t* q_h) {
  const Impl& s = *impl_;
  int copies = 0;
  counted_copy(s.state.data(), q_h, s.state.bytes(), cudaMemcpyHostToDevice, s.executor->stream, copies);
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.executor->stream));
}

}  // namespace qgru::cuda
