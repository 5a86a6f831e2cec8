// The cuSOLVER steps of GPTQ on the GPU (gptq_launch.h Solver): the CPU path's upper_cholesky_of_inverse
// (gptq.cpp) on the device. Row-major K×K matrices are column-major transposes, so the CPU's "lower, row-major"
// potrf is cuSOLVER's upper and its "upper, row-major" trtri is cuSOLVER's lower: the factors are the same
// matrices. Host code only (no kernel): kept out of the .cpp driver so that the host files checked against
// the CUDA 12 headers (scripts/check_cuda12.sh) need no cuSOLVER header.
#include <cusolverDn.h>

#include <string>

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

}  // namespace

struct Solver::State {
  int64_t K = 0;
  cudaStream_t stream = nullptr;
  cusolverDnHandle_t handle = nullptr;
  DeviceBuffer potrf_work, trtri_work, info;
  std::string trtri_host_work;
  int potrf_lwork = 0;
  size_t trtri_device_bytes = 0, trtri_host_bytes = 0;
};

Solver::Solver(int64_t K, double* work, cudaStream_t stream) : state_(new State) {
  State& s = *state_;
  s.K = K;
  s.stream = stream;
  try {
    QGRU_CUSOLVER_CHECK(cusolverDnCreate(&s.handle));
    QGRU_CUSOLVER_CHECK(cusolverDnSetStream(s.handle, stream));
    const int n = static_cast<int>(K);
    QGRU_CUSOLVER_CHECK(cusolverDnDpotrf_bufferSize(s.handle, CUBLAS_FILL_MODE_UPPER, n, work, n, &s.potrf_lwork));
    QGRU_CUSOLVER_CHECK(cusolverDnXtrtri_bufferSize(s.handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, K,
                                                    CUDA_R_64F, work, K, &s.trtri_device_bytes,
                                                    &s.trtri_host_bytes));
    s.potrf_work = DeviceBuffer(static_cast<size_t>(s.potrf_lwork) * sizeof(double) + 8);
    s.trtri_work = DeviceBuffer(s.trtri_device_bytes + 8);
    s.trtri_host_work.resize(s.trtri_host_bytes + 8);
    s.info = DeviceBuffer(sizeof(int));
  } catch (...) {
    if (s.handle != nullptr) cusolverDnDestroy(s.handle);
    delete state_;
    throw;
  }
}

Solver::~Solver() {
  if (state_->handle != nullptr) cusolverDnDestroy(state_->handle);  // destructor: nothing to report to
  delete state_;
}

bool Solver::upper_cholesky_of_inverse(double* R, double* U) {
  State& s = *state_;
  const int n = static_cast<int>(s.K);
  int info = 0;
  // J·H·J = L'·L'ᵀ (row-major lower = cuSOLVER's upper on the column-major view).
  QGRU_CUSOLVER_CHECK(cusolverDnDpotrf(s.handle, CUBLAS_FILL_MODE_UPPER, n, R, n,
                                       static_cast<double*>(s.potrf_work.data()), s.potrf_lwork,
                                       static_cast<int*>(s.info.data())));
  QGRU_CUDA_CHECK(cudaMemcpyAsync(&info, s.info.data(), sizeof info, cudaMemcpyDeviceToHost, s.stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  if (info != 0) return false;
  upper_from_reversed(R, s.K, U, s.stream);  // V
  // U = V⁻¹ (row-major upper = cuSOLVER's lower).
  QGRU_CUSOLVER_CHECK(cusolverDnXtrtri(s.handle, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, s.K, CUDA_R_64F, U,
                                       s.K, s.trtri_work.data(), s.trtri_device_bytes, s.trtri_host_work.data(),
                                       s.trtri_host_bytes, static_cast<int*>(s.info.data())));
  QGRU_CUDA_CHECK(cudaMemcpyAsync(&info, s.info.data(), sizeof info, cudaMemcpyDeviceToHost, s.stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  return info == 0;
}

}  // namespace qgru::cuda::gptq_launch
