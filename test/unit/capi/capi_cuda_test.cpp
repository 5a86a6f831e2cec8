// The C API's CUDA device type without running a kernel: the status each build and machine must give
// (DEVICE_TYPE_NOT_SUPPORTED when CUDA is not built in, DEVICE_UNAVAILABLE when no GPU is present), shapes
// the GPU kernels refuse (NOT_SUPPORTED naming the shape), and argument errors answered before any device
// is asked. The GPU numbers (CUDA path vs CPU path) are checked by test_cuda_gpu (test/cuda/capi_check.cpp).
#include <doctest/doctest.h>

#include <string>

#include "capi_test_util.h"
#include "qgru/capi/qgru_gptq.h"

#ifndef QGRU_CAPI_EXPECT_CUDA
#error "test/CMakeLists.txt defines QGRU_CAPI_EXPECT_CUDA (1 when qgru is built with CUDA)"
#endif

namespace {

using capi_test::message_has;
using capi_test::Tensors;

struct CudaHandle {
  qgruHandle_t handle = nullptr;
  CudaHandle() { REQUIRE(qgruCreateHandle(&handle, QGRU_DEVICE_CUDA, 0) == QGRU_STATUS_SUCCESS); }
  ~CudaHandle() { qgruDestroyHandle(handle); }
};

// What this build and machine answer for the CUDA device type: DEVICE_TYPE_NOT_SUPPORTED (not built),
// DEVICE_UNAVAILABLE (built, no GPU) or SUCCESS (a GPU). Checked against the build configuration.
qgruStatus_t cuda_availability() {
  int count = -1;
  const qgruStatus_t status = qgruGetDeviceCount(QGRU_DEVICE_CUDA, &count);
  if (!QGRU_CAPI_EXPECT_CUDA) {
    REQUIRE(status == QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
    CHECK(count == 0);
    CHECK(message_has("not built"));
  } else if (status == QGRU_STATUS_SUCCESS) {
    CHECK(count > 0);
  } else {
    REQUIRE(status == QGRU_STATUS_DEVICE_UNAVAILABLE);
    CHECK(count == 0);
    CHECK(message_has("no CUDA device: "));
  }
  return status;
}

}  // namespace

TEST_CASE("capi_cuda_without_cuda_or_gpu_answers_a_status_not_a_crash") {
  const qgruStatus_t availability = cuda_availability();
  int cpu_count = 0;
  CHECK(qgruGetDeviceCount(QGRU_DEVICE_CPU, &cpu_count) == QGRU_STATUS_SUCCESS);
  CHECK(cpu_count == 1);
  CHECK(qgruGetDeviceCount(QGRU_DEVICE_CUDA, nullptr) == QGRU_STATUS_NULL_POINTER);

  CudaHandle cuda;  // creating a handle touches no device, in every build
  Tensors t(16, 64, 4, 2, QGRU_DTYPE_F16);
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  const qgruStatus_t created = qgruCreateQuantizeGPTQDescriptor(cuda.handle, &desc, t.c, t.a, t.packed, t.scale, t.zero);
  CHECK(created == availability);
  if (availability == QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED) {
    CHECK(message_has("QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED: qgruCreateQuantizeGPTQDescriptor: "));
    CHECK(message_has("not built into this qgru"));
    MESSAGE("qgru is built without CUDA: the CUDA device type answers DEVICE_TYPE_NOT_SUPPORTED");
  } else if (availability == QGRU_STATUS_DEVICE_UNAVAILABLE) {
    CHECK(message_has("QGRU_STATUS_DEVICE_UNAVAILABLE: qgruCreateQuantizeGPTQDescriptor: no CUDA device: "));
    MESSAGE("no GPU present: the CUDA device type answers DEVICE_UNAVAILABLE (the GPU path is checked by test_cuda_gpu on a GPU)");
  } else {
    REQUIRE(created == QGRU_STATUS_SUCCESS);
    size_t bytes = 0;
    CHECK(qgruGetQuantizeGPTQWorkspaceSize(desc, &bytes) == QGRU_STATUS_SUCCESS);
    CHECK(bytes >= 2 * 64 * 4 + 2 * 16 * 4);  // at least the fp16 staging of a and c
    CHECK(qgruDestroyQuantizeGPTQDescriptor(desc) == QGRU_STATUS_SUCCESS);
    MESSAGE("a GPU is present: the CUDA descriptor is created; the GPU numbers are checked by test_cuda_gpu");
  }
}

TEST_CASE("capi_cuda_device_id_beyond_the_devices_is_unavailable_and_negative_is_a_bad_param") {
  qgruHandle_t handle = nullptr;
  CHECK(qgruCreateHandle(&handle, QGRU_DEVICE_CUDA, -1) == QGRU_STATUS_BAD_PARAM);
  CHECK(message_has("device_id -1"));
  REQUIRE(qgruCreateHandle(&handle, QGRU_DEVICE_CUDA, 4096) == QGRU_STATUS_SUCCESS);
  Tensors t(16, 64, 4, 2, QGRU_DTYPE_F32);
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  const qgruStatus_t status = qgruCreateQuantizeGPTQDescriptor(handle, &desc, t.c, t.a, t.packed, t.scale, t.zero);
  if (QGRU_CAPI_EXPECT_CUDA) {
    CHECK(status == QGRU_STATUS_DEVICE_UNAVAILABLE);
    CHECK(message_has("no CUDA device"));
  } else {
    CHECK(status == QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
  }
  CHECK(desc == nullptr);
  qgruDestroyHandle(handle);
}

TEST_CASE("capi_cuda_shapes_without_a_kernel_are_not_supported_before_the_device_is_asked") {
  CudaHandle cuda;
  struct Case {
    int64_t N, K, M, G;
    const char* why;
  };
  // Each passes the CPU's rules (K a multiple of 8, G dividing K) and breaks one GPU rule.
  const Case cases[] = {
      {16, 40, 4, 1, "K must be a multiple of the tile's block_k = 32"},
      {12, 64, 4, 1, "N must be a multiple of 8"},  // N = 12: packed [12, 8] is fine for the CPU
      {16, 64, 4, 16, "group_size must be a positive multiple of 8"},  // group of 4 inputs
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    Tensors t(c.N, c.K, c.M, c.G, QGRU_DTYPE_F16);
    qgruQuantizeGPTQDescriptor_t desc = nullptr;
    const qgruStatus_t status = qgruCreateQuantizeGPTQDescriptor(cuda.handle, &desc, t.c, t.a, t.packed, t.scale, t.zero);
    CHECK(desc == nullptr);
    if (!QGRU_CAPI_EXPECT_CUDA) {
      CHECK(status == QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
      continue;
    }
    CHECK(status == QGRU_STATUS_NOT_SUPPORTED);
    CHECK(message_has("QGRU_STATUS_NOT_SUPPORTED: qgruCreateQuantizeGPTQDescriptor: quantized linear not supported for M="));
    CHECK(message_has(("N=" + std::to_string(c.N) + " K=" + std::to_string(c.K)).c_str()));
    CHECK(message_has(c.why));
  }
}

TEST_CASE("capi_cuda_bad_arguments_are_named_before_the_device_is_asked") {
  // Without CUDA or a GPU these would otherwise read DEVICE_*: the argument's own status comes first.
  CudaHandle cuda;
  const int64_t N = 16, K = 64, M = 4, G = 2;
  Tensors t(N, K, M, G, QGRU_DTYPE_F32);
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  CHECK(qgruCreateQuantizeGPTQDescriptor(cuda.handle, nullptr, t.c, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_NULL_POINTER);
  CHECK(qgruCreateQuantizeGPTQDescriptor(cuda.handle, &desc, t.c, t.a, t.packed, t.scale, nullptr) == QGRU_STATUS_NULL_POINTER);
  CHECK(qgruCreateQuantizeGPTQDescriptor(cuda.handle, &desc, t.c, t.a, t.packed, t.packed, t.zero) == QGRU_STATUS_BAD_TENSOR_DTYPE);
  const int64_t wrong_c[2] = {N, M + 1}, column_major[2] = {1, K};
  const int64_t a_shape[2] = {K, M};
  qgruTensorDescriptor_t c_bad = nullptr, a_cm = nullptr;
  REQUIRE(qgruCreateTensorDescriptor(&c_bad, QGRU_DTYPE_F32, 2, wrong_c, nullptr) == QGRU_STATUS_SUCCESS);
  REQUIRE(qgruCreateTensorDescriptor(&a_cm, QGRU_DTYPE_F32, 2, a_shape, column_major) == QGRU_STATUS_SUCCESS);
  CHECK(qgruCreateQuantizeGPTQDescriptor(cuda.handle, &desc, c_bad, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_SHAPE);
  CHECK(message_has("c has shape [16, 5], expected [N, M]"));
  CHECK(qgruCreateQuantizeGPTQDescriptor(cuda.handle, &desc, t.c, a_cm, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_STRIDES);
  CHECK(desc == nullptr);
  qgruDestroyTensorDescriptor(c_bad);
  qgruDestroyTensorDescriptor(a_cm);
}

TEST_CASE("capi_new_status_codes_have_names") {
  CHECK(std::string(qgruStatusString(QGRU_STATUS_DEVICE_UNAVAILABLE)) == "QGRU_STATUS_DEVICE_UNAVAILABLE");
  CHECK(std::string(qgruStatusString(QGRU_STATUS_NOT_SUPPORTED)) == "QGRU_STATUS_NOT_SUPPORTED");
  CHECK(std::string(qgruStatusString(QGRU_STATUS_EXECUTION_FAILED)) == "QGRU_STATUS_EXECUTION_FAILED");
  CHECK(QGRU_STATUS_INTERNAL_ERROR == 8);  // the earlier codes keep their numbers
}
