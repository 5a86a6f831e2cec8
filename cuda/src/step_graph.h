#pragma once
// Internal: a cell's time loop captured once into a CUDA graph and replayed (GruCellCuda). The loop issues
// 2·T launches per run (the R·h GEMM and the step kernel per step; 4·T for the linear_before_reset = 0 cell, whose
// step has a second GEMM and a second kernel); replaying one graph costs one launch, so
// small batches are no longer bound by launch overhead. The graph holds the addresses it was captured with:
// it is recaptured when the shape, the direction or the workspace allocation changes. Capture needs a stream
// other than the legacy default stream; on that stream the loop is issued directly, and so it is on a stream that is
// being captured by the caller.
#include <cuda_runtime.h>

#include <cstdint>

#include "qgru_cuda/check.h"

namespace qgru::cuda {

// What issue() enqueues on `stream` (not the legacy default stream), captured into an executable graph. When issue()
// throws, or ending the capture or instantiating the graph fails, the capture is ended (the stream stays usable),
// nothing is kept and the exception propagates: issue()'s own, or CudaFailure. StepGraph's and QuantGruCudaStream's
// frame graph's one way to capture.
template <class Issue>
cudaGraphExec_t capture_graph(cudaStream_t stream, Issue issue) {
  QGRU_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    issue();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);  // leave the stream usable; the first error is the one reported
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  QGRU_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  QGRU_CUDA_CHECK(instantiated);
  return exec;
}

class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph() { reset(); }
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Replays the graph captured for (T, N, reverse, workspace, lengths, state), capturing `issue_steps` first if needed
  // (lengths: the device address of the run's sequence lengths, or null; state: the device address of the int32 h
  // state the steps read and write, a region of the workspace or the caller's in the device flow).
  template <class IssueSteps>
  void run(cudaStream_t stream, int64_t T, int64_t N, bool reverse, const void* workspace, const void* lengths,
           const void* state, IssueSteps issue_steps) {
    // Inside a capture of the caller's (QuantGruCudaStream's frame graph) the steps become part of that graph: a
    // capture cannot begin on a stream that is capturing already.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (stream != nullptr) QGRU_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (stream == nullptr || capturing != cudaStreamCaptureStatusNone) {
      issue_steps();
      return;
    }
    if (exec_ == nullptr || T != T_ || N != N_ || reverse != reverse_ || workspace != workspace_ || lengths != lengths_ ||
        state != state_) {
      reset();
      exec_ = capture_graph(stream, issue_steps);
      T_ = T;
      N_ = N;
      reverse_ = reverse;
      workspace_ = workspace;
      lengths_ = lengths;
      state_ = state;
    }
    QGRU_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  }

  void reset() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);  // nothing to report to
    exec_ = nullptr;
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
  int64_t T_ = -1, N_ = -1;
  bool reverse_ = false;
  const void* workspace_ = nullptr;
  const void* lengths_ = nullptr;
  const void* state_ = nullptr;
};

}  // namespace qgru::cuda
