// The cuSOLVER calls of GPTQ on the GPU (gptq_launch.h Solver). Host code only (no kernel): kept out of the .cpp
// files so that the host files checked against the CUDA 12 headers (scripts/check_cuda12.sh) need no cuSOLVER
// header.
#include <cusolverDn.h>

#include <string>
#include <vector>

#include "gptq_launch.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/status.h"

namespace qgru::cuda::gptq_launch {

namespace {

void check_solver(cusolverStatus_t status, const char* call) {
  if (status != CUSOLVER_STATUS_SUCCESS) {
    throw CudaFailure("cuSOLVER error " + std::to_string(static_cast<int>(status)) + " in `" + call + "`");
  }
}
#define QGRU_CUSOLVER_CHECK(call) check_solver((call), #call)

cublasFillMode_t fill_of(bool upper) { return upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER; }

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
    QGRU_CUSOLVER_CHECK(cusolverDnCreate(&state_->handle));
    QGRU_CUSOLVER_CHECK(cusolverDnSetStream(state_->handle, stream));
    state_->info = DeviceBuffer(sizeof(int));
  } catch (...) {
    if (state_->handle != nullptr) cusolverDnDestroy(state_->handle);
    delete state_;
    throw;
  }
}

Solver::~Solver() {
  if (state_->handle != nullptr) cusolverDnDestroy(state_->handle);  // destructor: nothing to report to
  delete state_;
}

int Solver::dpotrf(bool upper, int64_t n, double* A, int64_t lda) {
  State& s = *state_;
  int lwork = 0;
  QGRU_CUSOLVER_CHECK(cusolverDnDpotrf_bufferSize(s.handle, fill_of(upper), static_cast<int>(n), A, static_cast<int>(lda),
                                                  &lwork));
  s.reserve(static_cast<size_t>(lwork) * sizeof(double) + sizeof(double));
  QGRU_CUSOLVER_CHECK(cusolverDnDpotrf(s.handle, fill_of(upper), static_cast<int>(n), A, static_cast<int>(lda),
                                       static_cast<double*>(s.work.data()), lwork, static_cast<int*>(s.info.data())));
  return s.read_info();
}

int Solver::dtrtri(bool upper, int64_t n, double* A, int64_t lda) {
  State& s = *state_;
  size_t device_bytes = 0, host_bytes = 0;
  QGRU_CUSOLVER_CHECK(cusolverDnXtrtri_bufferSize(s.handle, fill_of(upper), CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F, A, lda,
                                                  &device_bytes, &host_bytes));
  s.reserve(device_bytes + sizeof(double));
  if (s.host_work.size() < host_bytes + 8) s.host_work.resize(host_bytes + 8);
  QGRU_CUSOLVER_CHECK(cusolverDnXtrtri(s.handle, fill_of(upper), CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F, A, lda,
                                       s.work.data(), device_bytes, s.host_work.data(), host_bytes,
                                       static_cast<int*>(s.info.data())));
  return s.read_info();
}

}  // namespace qgru::cuda::gptq_launch
