// The cuSOLVER calls of GPTQ on the GPU (gptq_launch.h Solver). Host code only (no kernel): kept out of the .cpp
// files so that the host files checked against the CUDA 12 headers (scripts/check_cuda12.sh) need no cuSOLVER
// header. cuSOLVER (libcusolver.so.12 in CUDA 12 and 13, 140 MB with its dependencies) is loaded when GPTQ first
// runs on the GPU, not linked: every other use of qgru (and of the GPU pack, scripts/gpu_pack.sh) starts
// without it, and a machine without it answers GPTQ on the GPU with one line saying so.
#include <cusolverDn.h>

#include <string>
#include <vector>

#include "gptq_launch.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/status.h"
#include "runtime_library.h"

namespace qgru::cuda::gptq_launch {

namespace {

void check_solver(cusolverStatus_t status, const char* call) {
  if (status != CUSOLVER_STATUS_SUCCESS) {
    throw CudaFailure("cuSOLVER error " + std::to_string(static_cast<int>(status)) + " in `" + call + "`");
  }
}
#define QGRU_CUSOLVER_CHECK(call) check_solver((call), #call)

cublasFillMode_t fill_of(bool upper) { return upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER; }

// The cuSOLVER entry points used, resolved once from the shared library.
struct CusolverApi {
  decltype(&cusolverDnCreate) create = nullptr;
  decltype(&cusolverDnDestroy) destroy = nullptr;
  decltype(&cusolverDnSetStream) set_stream = nullptr;
  decltype(&cusolverDnDpotrf_bufferSize) potrf_buffer = nullptr;
  decltype(&cusolverDnDpotrf) potrf = nullptr;
  decltype(&cusolverDnXtrtri_bufferSize) trtri_buffer = nullptr;
  decltype(&cusolverDnXtrtri) trtri = nullptr;
  std::string error;  // why it could not be loaded ("" when loaded)
};

const CusolverApi& cusolver() {
  static const CusolverApi api = [] {  // thread-safe initialization; the library stays loaded for the process
    CusolverApi a;
    RuntimeLibrary library = open_runtime_library(
        "cuSOLVER", {"libcusolver.so.12", "libcusolver.so.11", "libcusolver.so"},
        "GPTQ on the GPU needs it (the CUDA toolkit's or the nvidia-cusolver wheel's lib folder on LD_LIBRARY_PATH)");
    if (library.handle != nullptr) {
      resolve_runtime_symbol(library, "cusolverDnCreate", a.create);
      resolve_runtime_symbol(library, "cusolverDnDestroy", a.destroy);
      resolve_runtime_symbol(library, "cusolverDnSetStream", a.set_stream);
      resolve_runtime_symbol(library, "cusolverDnDpotrf_bufferSize", a.potrf_buffer);
      resolve_runtime_symbol(library, "cusolverDnDpotrf", a.potrf);
      resolve_runtime_symbol(library, "cusolverDnXtrtri_bufferSize", a.trtri_buffer);
      resolve_runtime_symbol(library, "cusolverDnXtrtri", a.trtri);
    }
    a.error = library.error;
    return a;
  }();
  if (!api.error.empty()) throw CudaFailure(api.error);
  return api;
}

}  // namespace

struct Solver::State {
  cudaStream_t stream = nullptr;
  cusolverDnHandle_t handle = nullptr;
  DeviceBuffer work, info;
  std::vector<unsigned char> host_work;

  // Grows the device workspace to `bytes` (kept for later calls).
  void reserve(size_t bytes) {
    if (work.bytes() < bytes) work = DeviceBuffer(bytes);
  }
  int read_info() {
    int value = 0;
    QGRU_CUDA_CHECK(cudaMemcpyAsync(&value, info.data(), sizeof value, cudaMemcpyDeviceToHost, stream));
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
    return value;
  }
};

Solver::Solver(cudaStream_t stream) : state_(new State) {
  state_->stream = stream;
  try {
    const CusolverApi& api = cusolver();
    QGRU_CUSOLVER_CHECK(api.create(&state_->handle));
    QGRU_CUSOLVER_CHECK(api.set_stream(state_->handle, stream));
    state_->info = DeviceBuffer(sizeof(int));
  } catch (...) {
    if (state_->handle != nullptr) cusolver().destroy(state_->handle);
    delete state_;
    throw;
  }
}

Solver::~Solver() {
  if (state_->handle != nullptr) cusolver().destroy(state_->handle);  // loaded: the handle exists
  delete state_;
}

int Solver::dpotrf(bool upper, int64_t n, double* A, int64_t lda) {
  State& s = *state_;
  int lwork = 0;
  QGRU_CUSOLVER_CHECK(cusolver().potrf_buffer(s.handle, fill_of(upper), static_cast<int>(n), A, static_cast<int>(lda),
                                                  &lwork));
  s.reserve(static_cast<size_t>(lwork) * sizeof(double) + sizeof(double));
  QGRU_CUSOLVER_CHECK(cusolver().potrf(s.handle, fill_of(upper), static_cast<int>(n), A, static_cast<int>(lda),
                                       static_cast<double*>(s.work.data()), lwork, static_cast<int*>(s.info.data())));
  return s.read_info();
}

int Solver::dtrtri(bool upper, int64_t n, double* A, int64_t lda) {
  State& s = *state_;
  size_t device_bytes = 0, host_bytes = 0;
  QGRU_CUSOLVER_CHECK(cusolver().trtri_buffer(s.handle, fill_of(upper), CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F, A, lda,
                                                  &device_bytes, &host_bytes));
  s.reserve(device_bytes + sizeof(double));
  if (s.host_work.size() < host_bytes + 8) s.host_work.resize(host_bytes + 8);
  QGRU_CUSOLVER_CHECK(cusolver().trtri(s.handle, fill_of(upper), CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F, A, lda,
                                       s.work.data(), device_bytes, s.host_work.data(), host_bytes,
                                       static_cast<int*>(s.info.data())));
  return s.read_info();
}

}  // namespace qgru::cuda::gptq_launch
