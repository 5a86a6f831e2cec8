// Every status code of the C API where it applies, and the numbers behind SUCCESS: qgruQuantizeGPTQ's codes
// equal qgru::gptq::gptq_quantize's on the same data, and the linear equals Ŵ·a computed here.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "capi_test_util.h"
#include "qgru/capi/qgru_gptq.h"
#include "qgru/gptq/gptq.h"
#include "qgru/gptq/hessian.h"
#include "qgru/half.h"

namespace {

using capi_test::message_has;
using capi_test::Tensors;

std::vector<float> seeded(size_t count, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> values(count);
  for (auto& v : values) v = dist(rng);
  return values;
}

struct CpuHandle {
  qgruHandle_t handle = nullptr;
  CpuHandle() { REQUIRE(qgruCreateHandle(&handle, QGRU_DEVICE_CPU, 0) == QGRU_STATUS_SUCCESS); }
  ~CpuHandle() { qgruDestroyHandle(handle); }
};

}  // namespace

TEST_CASE("capi_quantize_and_linear_succeed_and_match_the_library") {
  const int64_t N = 16, K = 64, M = 24, G = 4;
  CpuHandle cpu;
  Tensors t(N, K, M, G, QGRU_DTYPE_F32);
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  REQUIRE(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_SUCCESS);
  size_t bytes = 0;
  REQUIRE(qgruGetQuantizeGPTQWorkspaceSize(desc, &bytes) == QGRU_STATUS_SUCCESS);
  CHECK(bytes > 0);
  std::vector<unsigned char> workspace(bytes);
  const auto a = seeded(static_cast<size_t>(K * M), 1, 1.0f);
  const auto b = seeded(static_cast<size_t>(N * K), 2, 0.1f);
  std::vector<int32_t> packed(static_cast<size_t>(N * K / 8));
  std::vector<float> scale(static_cast<size_t>(N * G)), zero(static_cast<size_t>(N * G)), c(static_cast<size_t>(N * M));
  REQUIRE(qgruQuantizeGPTQ(desc, workspace.data(), bytes, packed.data(), scale.data(), zero.data(), a.data(), b.data(),
                           nullptr) == QGRU_STATUS_SUCCESS);
  CHECK(std::string(qgruGetLastErrorMessage()).empty());

  // The library on the same data: codes, scales and zeros in the C API's [N, K/8] / [N, G] layout.
  qgru::gptq::HessianAccumulator hessian(K);
  hessian.add_feature_major(a.data(), M);
  qgru::gptq::GptqOptions options;
  options.group_size = K / G;
  const auto want = qgru::gptq::gptq_quantize(std::vector<double>(b.begin(), b.end()), N, K, hessian.hessian(), options);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const auto word = static_cast<uint32_t>(packed[static_cast<size_t>(n * K / 8 + k / 8)]);
      REQUIRE(static_cast<int32_t>((word >> (4 * (k % 8))) & 15u) == want.codes[static_cast<size_t>(n * K + k)]);
    }
    for (int64_t g = 0; g < G; ++g) {
      CHECK(scale[static_cast<size_t>(n * G + g)] == static_cast<float>(want.scales[static_cast<size_t>(g * N + n)]));
      CHECK(zero[static_cast<size_t>(n * G + g)] == static_cast<float>(want.zeros[static_cast<size_t>(g * N + n)]));
    }
  }

  REQUIRE(qgruQuantizeLinearGPTQ(desc, workspace.data(), bytes, c.data(), a.data(), packed.data(), scale.data(),
                                 zero.data(), nullptr) == QGRU_STATUS_SUCCESS);
  double worst = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      double y = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const size_t p = static_cast<size_t>(n * G + k / (K / G));
        const auto word = static_cast<uint32_t>(packed[static_cast<size_t>(n * K / 8 + k / 8)]);
        const double w = scale[p] * (static_cast<double>((word >> (4 * (k % 8))) & 15u) - zero[p]);
        y += w * a[static_cast<size_t>(k * M + m)];
      }
      worst = std::max(worst, std::fabs(y - c[static_cast<size_t>(n * M + m)]) / (1.0 + std::fabs(y)));
    }
  }
  CHECK(worst < 1e-5);
  CHECK(qgruDestroyQuantizeGPTQDescriptor(desc) == QGRU_STATUS_SUCCESS);
}

TEST_CASE("capi_fp16_linear_matches_fp32_within_half_precision") {
  const int64_t N = 8, K = 32, M = 4, G = 1;
  CpuHandle cpu;
  Tensors t32(N, K, M, G, QGRU_DTYPE_F32), t16(N, K, M, G, QGRU_DTYPE_F16);
  qgruQuantizeGPTQDescriptor_t d32 = nullptr, d16 = nullptr;
  REQUIRE(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &d32, t32.c, t32.a, t32.packed, t32.scale, t32.zero) == QGRU_STATUS_SUCCESS);
  REQUIRE(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &d16, t16.c, t16.a, t16.packed, t16.scale, t16.zero) == QGRU_STATUS_SUCCESS);
  size_t bytes = 0;
  REQUIRE(qgruGetQuantizeGPTQWorkspaceSize(d16, &bytes) == QGRU_STATUS_SUCCESS);
  std::vector<unsigned char> workspace(bytes);
  auto a = seeded(static_cast<size_t>(K * M), 3, 1.0f);
  auto b = seeded(static_cast<size_t>(N * K), 4, 0.1f);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a16[i] = qgru::float_to_half_bits(a[i]);
    a[i] = qgru::half_bits_to_float(a16[i]);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    b16[i] = qgru::float_to_half_bits(b[i]);
    b[i] = qgru::half_bits_to_float(b16[i]);
  }
  std::vector<int32_t> p16(static_cast<size_t>(N * K / 8)), p32(p16.size());
  std::vector<uint16_t> s16(static_cast<size_t>(N)), z16(static_cast<size_t>(N)), c16(static_cast<size_t>(N * M));
  std::vector<float> s32(static_cast<size_t>(N)), z32(static_cast<size_t>(N)), c32(static_cast<size_t>(N * M));
  REQUIRE(qgruQuantizeGPTQ(d16, workspace.data(), bytes, p16.data(), s16.data(), z16.data(), a16.data(), b16.data(), nullptr) == QGRU_STATUS_SUCCESS);
  REQUIRE(qgruQuantizeGPTQ(d32, workspace.data(), bytes, p32.data(), s32.data(), z32.data(), a.data(), b.data(), nullptr) == QGRU_STATUS_SUCCESS);
  CHECK(p16 == p32);  // same values in, same codes out
  REQUIRE(qgruQuantizeLinearGPTQ(d16, workspace.data(), bytes, c16.data(), a16.data(), p16.data(), s16.data(), z16.data(), nullptr) == QGRU_STATUS_SUCCESS);
  for (size_t i = 0; i < s32.size(); ++i) s32[i] = qgru::half_bits_to_float(s16[i]);  // the scales fp16 carries
  REQUIRE(qgruQuantizeLinearGPTQ(d32, workspace.data(), bytes, c32.data(), a.data(), p32.data(), s32.data(), z32.data(), nullptr) == QGRU_STATUS_SUCCESS);
  for (size_t i = 0; i < c32.size(); ++i) {
    CHECK(qgru::half_bits_to_float(c16[i]) == doctest::Approx(c32[i]).epsilon(2e-3).scale(1e-2));
  }
  qgruDestroyQuantizeGPTQDescriptor(d16);
  qgruDestroyQuantizeGPTQDescriptor(d32);
}

TEST_CASE("capi_descriptor_statuses") {
  const int64_t N = 16, K = 64, M = 8, G = 2;
  CpuHandle cpu;
  Tensors t(N, K, M, G, QGRU_DTYPE_F32);
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  SUBCASE("null pointers") {
    CHECK(qgruCreateQuantizeGPTQDescriptor(nullptr, &desc, t.c, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_NULL_POINTER);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, nullptr, t.c, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_NULL_POINTER);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.a, nullptr, t.scale, t.zero) == QGRU_STATUS_NULL_POINTER);
    CHECK(qgruCreateHandle(nullptr, QGRU_DEVICE_CPU, 0) == QGRU_STATUS_NULL_POINTER);
    CHECK(qgruDestroyHandle(nullptr) == QGRU_STATUS_NULL_POINTER);
    CHECK(qgruDestroyTensorDescriptor(nullptr) == QGRU_STATUS_NULL_POINTER);
    CHECK(qgruDestroyQuantizeGPTQDescriptor(nullptr) == QGRU_STATUS_NULL_POINTER);
    size_t size = 0;
    CHECK(qgruGetQuantizeGPTQWorkspaceSize(nullptr, &size) == QGRU_STATUS_NULL_POINTER);
    CHECK(message_has("NULL"));
  }
  // The CUDA device type's statuses (not built, no device, no kernel for the shape) are in
  // capi_cuda_test.cpp. An unknown device or dtype value (BAD_PARAM / BAD_TENSOR_DTYPE) is tested from C
  // (test/capi_c), where any int converts to the enum; in C++ such a value would be undefined.
  SUBCASE("bad dtypes") {
    const int64_t shape[2] = {N, M};
    qgruTensorDescriptor_t c16 = nullptr;
    REQUIRE(qgruCreateTensorDescriptor(&c16, QGRU_DTYPE_F16, 2, shape, nullptr) == QGRU_STATUS_SUCCESS);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, c16, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_DTYPE);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.a, t.scale, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_DTYPE);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.packed, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_DTYPE);
    qgruDestroyTensorDescriptor(c16);
  }
  SUBCASE("bad shapes") {
    const int64_t wrong_c[2] = {N, M + 1}, odd_k[2] = {K + 4, M}, three_groups[2] = {N, 3}, rank1[1] = {N};
    qgruTensorDescriptor_t c_bad = nullptr, a_bad = nullptr, s_bad = nullptr, r1 = nullptr;
    REQUIRE(qgruCreateTensorDescriptor(&c_bad, QGRU_DTYPE_F32, 2, wrong_c, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&a_bad, QGRU_DTYPE_F32, 2, odd_k, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&s_bad, QGRU_DTYPE_F32, 2, three_groups, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&r1, QGRU_DTYPE_F32, 1, rank1, nullptr) == QGRU_STATUS_SUCCESS);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, c_bad, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_SHAPE);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, a_bad, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_SHAPE);
    CHECK(message_has("K a multiple of 8"));
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.a, t.packed, s_bad, s_bad) == QGRU_STATUS_BAD_TENSOR_SHAPE);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.a, t.packed, t.scale, s_bad) == QGRU_STATUS_BAD_TENSOR_SHAPE);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, r1, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_SHAPE);
    const int64_t negative[2] = {N, -1};
    qgruTensorDescriptor_t neg = nullptr;
    CHECK(qgruCreateTensorDescriptor(&neg, QGRU_DTYPE_F32, 2, negative, nullptr) == QGRU_STATUS_BAD_TENSOR_SHAPE);
    CHECK(qgruCreateTensorDescriptor(&neg, QGRU_DTYPE_F32, 0, negative, nullptr) == QGRU_STATUS_BAD_PARAM);
    for (auto d : {c_bad, a_bad, s_bad, r1}) qgruDestroyTensorDescriptor(d);
  }
  SUBCASE("bad strides") {
    const int64_t shape[2] = {K, M}, column_major[2] = {1, K}, overlapping[2] = {M - 1, 1}, padded[2] = {M + 3, 1};
    qgruTensorDescriptor_t cm = nullptr, ov = nullptr, pad = nullptr, zero_stride = nullptr;
    REQUIRE(qgruCreateTensorDescriptor(&cm, QGRU_DTYPE_F32, 2, shape, column_major) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&ov, QGRU_DTYPE_F32, 2, shape, overlapping) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&pad, QGRU_DTYPE_F32, 2, shape, padded) == QGRU_STATUS_SUCCESS);
    const int64_t zeros[2] = {0, 1};
    CHECK(qgruCreateTensorDescriptor(&zero_stride, QGRU_DTYPE_F32, 2, shape, zeros) == QGRU_STATUS_BAD_TENSOR_STRIDES);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, cm, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_STRIDES);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, ov, t.packed, t.scale, t.zero) == QGRU_STATUS_BAD_TENSOR_STRIDES);
    CHECK(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, pad, t.packed, t.scale, t.zero) == QGRU_STATUS_SUCCESS);
    qgruDestroyQuantizeGPTQDescriptor(desc);
    for (auto d : {cm, ov, pad}) qgruDestroyTensorDescriptor(d);
  }
}

TEST_CASE("capi_call_statuses_workspace_nulls_and_internal_error") {
  const int64_t N = 8, K = 16, M = 8, G = 1;
  CpuHandle cpu;
  Tensors t(N, K, M, G, QGRU_DTYPE_F32);
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  REQUIRE(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_SUCCESS);
  size_t bytes = 0;
  REQUIRE(qgruGetQuantizeGPTQWorkspaceSize(desc, &bytes) == QGRU_STATUS_SUCCESS);
  CHECK(qgruGetQuantizeGPTQWorkspaceSize(desc, nullptr) == QGRU_STATUS_NULL_POINTER);
  std::vector<unsigned char> workspace(bytes);
  auto a = seeded(static_cast<size_t>(K * M), 5, 1.0f);
  const auto b = seeded(static_cast<size_t>(N * K), 6, 0.1f);
  std::vector<int32_t> packed(static_cast<size_t>(N * K / 8));
  std::vector<float> scale(static_cast<size_t>(N)), zero(static_cast<size_t>(N)), c(static_cast<size_t>(N * M));
  CHECK(qgruQuantizeGPTQ(desc, workspace.data(), bytes - 1, packed.data(), scale.data(), zero.data(), a.data(), b.data(), nullptr) ==
        QGRU_STATUS_INSUFFICIENT_WORKSPACE);
  CHECK(qgruQuantizeLinearGPTQ(desc, workspace.data(), 0, c.data(), a.data(), packed.data(), scale.data(), zero.data(), nullptr) ==
        QGRU_STATUS_INSUFFICIENT_WORKSPACE);
  CHECK(qgruQuantizeGPTQ(desc, nullptr, bytes, packed.data(), scale.data(), zero.data(), a.data(), b.data(), nullptr) ==
        QGRU_STATUS_NULL_POINTER);
  CHECK(qgruQuantizeGPTQ(desc, workspace.data(), bytes, packed.data(), scale.data(), zero.data(), a.data(), nullptr, nullptr) ==
        QGRU_STATUS_NULL_POINTER);
  CHECK(qgruQuantizeLinearGPTQ(desc, workspace.data(), bytes, nullptr, a.data(), packed.data(), scale.data(), zero.data(), nullptr) ==
        QGRU_STATUS_NULL_POINTER);
  CHECK(qgruQuantizeGPTQ(nullptr, workspace.data(), bytes, packed.data(), scale.data(), zero.data(), a.data(), b.data(), nullptr) ==
        QGRU_STATUS_NULL_POINTER);
  // Non-finite calibration data: the library throws, the C API answers INTERNAL_ERROR with the reason.
  a[3] = std::nanf("");
  CHECK(qgruQuantizeGPTQ(desc, workspace.data(), bytes, packed.data(), scale.data(), zero.data(), a.data(), b.data(), nullptr) ==
        QGRU_STATUS_INTERNAL_ERROR);
  CHECK(message_has("non-finite"));
  CHECK(std::string(qgruStatusString(QGRU_STATUS_INTERNAL_ERROR)) == "QGRU_STATUS_INTERNAL_ERROR");
  CHECK(qgruDestroyQuantizeGPTQDescriptor(desc) == QGRU_STATUS_SUCCESS);
}

TEST_CASE("capi_resident_weights_are_refused_where_they_cannot_be_kept") {
  CHECK(qgruSetQuantizeGPTQWeights(nullptr, nullptr, nullptr, nullptr, nullptr) == QGRU_STATUS_NULL_POINTER);
  CHECK(message_has("desc is NULL"));
  const int64_t N = 8, K = 32, M = 2, G = 1;
  CpuHandle cpu;
  Tensors t(N, K, M, G, QGRU_DTYPE_F32);
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  REQUIRE(qgruCreateQuantizeGPTQDescriptor(cpu.handle, &desc, t.c, t.a, t.packed, t.scale, t.zero) == QGRU_STATUS_SUCCESS);
  std::vector<int32_t> packed(static_cast<size_t>(N * K / 8));
  std::vector<float> scale(static_cast<size_t>(N * G), 1.0f), zero(static_cast<size_t>(N * G), 8.0f), a(static_cast<size_t>(K * M)),
      c(static_cast<size_t>(N * M));
  CHECK(qgruSetQuantizeGPTQWeights(desc, packed.data(), nullptr, zero.data(), nullptr) == QGRU_STATUS_NULL_POINTER);
  CHECK(message_has("weight pointer is NULL"));
  // A CPU descriptor reads the host weights on every call: nothing to keep resident.
  CHECK(qgruSetQuantizeGPTQWeights(desc, packed.data(), scale.data(), zero.data(), nullptr) ==
        QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
  CHECK(message_has("CUDA descriptors"));
  // ... so NULL weights on the linear stay a NULL_POINTER there.
  size_t bytes = 0;
  REQUIRE(qgruGetQuantizeGPTQWorkspaceSize(desc, &bytes) == QGRU_STATUS_SUCCESS);
  std::vector<unsigned char> workspace(bytes);
  CHECK(qgruQuantizeLinearGPTQ(desc, workspace.data(), bytes, c.data(), a.data(), nullptr, nullptr, nullptr, nullptr) ==
        QGRU_STATUS_NULL_POINTER);
  CHECK(qgruDestroyQuantizeGPTQDescriptor(desc) == QGRU_STATUS_SUCCESS);
}
