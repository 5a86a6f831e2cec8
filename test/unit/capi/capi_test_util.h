#pragma once
// Helpers for the C API tests: the last error message's contents, and the five tensor descriptors of one
// qgruQuantizeGPTQ call, destroyed with the test.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "qgru/capi/qgru_gptq.h"

namespace capi_test {

// Whether qgruGetLastErrorMessage() (this thread's last error) contains text.
inline bool message_has(const char* text) {
  return std::string(qgruGetLastErrorMessage()).find(text) != std::string::npos;
}

// Descriptors for c [N, M], a [K, M], packed [N, K/8] (I32), scale / zero [N, G], all but packed in dtype.
struct Tensors {
  qgruTensorDescriptor_t c = nullptr, a = nullptr, packed = nullptr, scale = nullptr, zero = nullptr;
  Tensors(int64_t N, int64_t K, int64_t M, int64_t G, qgruDtype_t dtype) {
    const int64_t c_shape[2] = {N, M}, a_shape[2] = {K, M}, p_shape[2] = {N, K / 8}, s_shape[2] = {N, G};
    REQUIRE(qgruCreateTensorDescriptor(&c, dtype, 2, c_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&a, dtype, 2, a_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&packed, QGRU_DTYPE_I32, 2, p_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&scale, dtype, 2, s_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&zero, dtype, 2, s_shape, nullptr) == QGRU_STATUS_SUCCESS);
  }
  ~Tensors() {
    for (auto t : {c, a, packed, scale, zero}) qgruDestroyTensorDescriptor(t);
  }
  Tensors(const Tensors&) = delete;
  Tensors& operator=(const Tensors&) = delete;
};

}  // namespace capi_test
