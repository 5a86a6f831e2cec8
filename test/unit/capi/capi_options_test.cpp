// qgruSetQuantizeGPTQActOrder / qgruSetQuantizeGPTQDamping: out-of-range values are refused with a status
// and a message, and the values that are taken reach GPTQ: the C API's codes, scales and zeros equal
// qgru::gptq::gptq_quantize's with the same options, and differ from the defaults' (so a setter that did
// nothing would fail here).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "capi_test_util.h"
#include "qgru/capi/qgru_gptq.h"
#include "qgru/gptq/gptq.h"
#include "qgru/gptq/hessian.h"

namespace {

using capi_test::message_has;

// One CPU descriptor for c [N, M], a [K, M], packed [N, K/8], scale / zero [N, G] in F32.
struct Operator {
  qgruHandle_t handle = nullptr;
  qgruQuantizeGPTQDescriptor_t desc = nullptr;
  int64_t N, K, M, G;
  Operator(int64_t n, int64_t k, int64_t m, int64_t g) : N(n), K(k), M(m), G(g) {
    REQUIRE(qgruCreateHandle(&handle, QGRU_DEVICE_CPU, 0) == QGRU_STATUS_SUCCESS);
    const int64_t c_shape[2] = {N, M}, a_shape[2] = {K, M}, p_shape[2] = {N, K / 8}, s_shape[2] = {N, G};
    qgruTensorDescriptor_t c = nullptr, a = nullptr, p = nullptr, s = nullptr, z = nullptr;
    REQUIRE(qgruCreateTensorDescriptor(&c, QGRU_DTYPE_F32, 2, c_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&a, QGRU_DTYPE_F32, 2, a_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&p, QGRU_DTYPE_I32, 2, p_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&s, QGRU_DTYPE_F32, 2, s_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateTensorDescriptor(&z, QGRU_DTYPE_F32, 2, s_shape, nullptr) == QGRU_STATUS_SUCCESS);
    REQUIRE(qgruCreateQuantizeGPTQDescriptor(handle, &desc, c, a, p, s, z) == QGRU_STATUS_SUCCESS);
    for (auto t : {c, a, p, s, z}) qgruDestroyTensorDescriptor(t);
  }
  ~Operator() {
    qgruDestroyQuantizeGPTQDescriptor(desc);
    qgruDestroyHandle(handle);
  }
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  struct Out {
    std::vector<int32_t> codes;  // [N, K], unpacked from the [N, K/8] words
    std::vector<float> scale, zero;  // [N, G]
  };
  Out quantize(const std::vector<float>& a, const std::vector<float>& b) const {
    size_t bytes = 0;
    REQUIRE(qgruGetQuantizeGPTQWorkspaceSize(desc, &bytes) == QGRU_STATUS_SUCCESS);
    std::vector<unsigned char> workspace(bytes);
    std::vector<int32_t> packed(static_cast<size_t>(N * K / 8));
    Out out;
    out.scale.resize(static_cast<size_t>(N * G));
    out.zero.resize(static_cast<size_t>(N * G));
    const qgruStatus_t status = qgruQuantizeGPTQ(desc, workspace.data(), bytes, packed.data(), out.scale.data(),
                                                 out.zero.data(), a.data(), b.data(), nullptr);
    INFO(qgruGetLastErrorMessage());
    REQUIRE(status == QGRU_STATUS_SUCCESS);
    out.codes.resize(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const auto word = static_cast<uint32_t>(packed[static_cast<size_t>(n * K / 8 + k / 8)]);
        out.codes[static_cast<size_t>(n * K + k)] = static_cast<int32_t>((word >> (4 * (k % 8))) & 15u);
      }
    return out;
  }
};

// Calibration inputs whose columns have different energies in no sorted order, so act-order permutes.
std::vector<float> calibration(int64_t K, int64_t M, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(K * M));
  for (int64_t k = 0; k < K; ++k) {
    const float energy = 0.25f + static_cast<float>((k * 7) % 11) / 4.0f;
    for (int64_t m = 0; m < M; ++m) a[static_cast<size_t>(k * M + m)] = energy * dist(rng);
  }
  return a;
}

std::vector<float> weights(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  std::vector<float> b(static_cast<size_t>(N * K));
  for (auto& v : b) v = dist(rng);
  return b;
}

// The library on the same data and options, against the C API's output; returns the library's result.
qgru::gptq::GptqResult check_equals_library(const Operator& op, const Operator::Out& got, const std::vector<float>& a,
                                            const std::vector<float>& b, qgru::gptq::GptqOptions options) {
  qgru::gptq::HessianAccumulator hessian(op.K);
  hessian.add_feature_major(a.data(), op.M);
  options.bits = 4;
  options.group_size = op.G == 1 ? -1 : op.K / op.G;
  const auto want = qgru::gptq::gptq_quantize(std::vector<double>(b.begin(), b.end()), op.N, op.K, hessian.hessian(), options);
  int code_mismatches = 0, param_mismatches = 0;
  for (size_t i = 0; i < got.codes.size(); ++i) code_mismatches += got.codes[i] != want.codes[i];
  for (int64_t n = 0; n < op.N; ++n) {
    for (int64_t g = 0; g < op.G; ++g) {
      const size_t at = static_cast<size_t>(n * op.G + g), lib = static_cast<size_t>(g * op.N + n);
      param_mismatches += got.scale[at] != static_cast<float>(want.scales[lib]);
      param_mismatches += got.zero[at] != static_cast<float>(want.zeros[lib]);
    }
  }
  CHECK(code_mismatches == 0);
  CHECK(param_mismatches == 0);
  return want;
}

int differing_codes(const Operator::Out& x, const Operator::Out& y) {
  int count = 0;
  for (size_t i = 0; i < x.codes.size(); ++i) count += x.codes[i] != y.codes[i];
  return count;
}

}  // namespace

TEST_CASE("capi_setters_refuse_out_of_range_values_with_a_message") {
  Operator op(16, 64, 32, 4);
  CHECK(qgruSetQuantizeGPTQActOrder(nullptr, 1) == QGRU_STATUS_NULL_POINTER);
  CHECK(qgruSetQuantizeGPTQDamping(nullptr, 0.01) == QGRU_STATUS_NULL_POINTER);
  CHECK(qgruSetQuantizeGPTQActOrder(op.desc, 2) == QGRU_STATUS_BAD_PARAM);
  CHECK(message_has("act_order 2, expected 0 or 1"));
  CHECK(qgruSetQuantizeGPTQActOrder(op.desc, -1) == QGRU_STATUS_BAD_PARAM);
  const double bad[] = {-1e-9, 1.0000001, 100.0, std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (double damp : bad) {
    CAPTURE(damp);
    CHECK(qgruSetQuantizeGPTQDamping(op.desc, damp) == QGRU_STATUS_BAD_PARAM);
    CHECK(message_has("QGRU_STATUS_BAD_PARAM: qgruSetQuantizeGPTQDamping: damp "));
    CHECK(message_has("expected a finite value in [0, 1]"));
  }
  // The edges of the range are taken; a refused value leaves the last good one in place (checked below by
  // quantizing after a refusal).
  CHECK(qgruSetQuantizeGPTQDamping(op.desc, 0.0) == QGRU_STATUS_SUCCESS);
  CHECK(std::string(qgruGetLastErrorMessage()).empty());
  CHECK(qgruSetQuantizeGPTQDamping(op.desc, 1.0) == QGRU_STATUS_SUCCESS);
  CHECK(qgruSetQuantizeGPTQActOrder(op.desc, 0) == QGRU_STATUS_SUCCESS);
  CHECK(qgruSetQuantizeGPTQActOrder(op.desc, 1) == QGRU_STATUS_SUCCESS);
}

TEST_CASE("capi_act_order_reaches_gptq_with_groups_kept_in_place") {
  for (int64_t G : {int64_t{4}, int64_t{1}}) {
    CAPTURE(G);
    Operator op(16, 64, 96, G);
    const auto a = calibration(op.K, op.M, 11);
    const auto b = weights(op.N, op.K, 12);
    const Operator::Out plain = op.quantize(a, b);
    REQUIRE(qgruSetQuantizeGPTQActOrder(op.desc, 1) == QGRU_STATUS_SUCCESS);
    const Operator::Out ordered = op.quantize(a, b);
    qgru::gptq::GptqOptions options;
    options.act_order = true;
    options.static_groups = true;
    const auto want = check_equals_library(op, ordered, a, b, options);
    int64_t moved = 0;  // the data does exercise a permutation
    for (int64_t k = 0; k < op.K; ++k) moved += want.perm[static_cast<size_t>(k)] != k;
    CHECK(moved > op.K / 2);
    CHECK(differing_codes(plain, ordered) > 0);
    REQUIRE(qgruSetQuantizeGPTQActOrder(op.desc, 0) == QGRU_STATUS_SUCCESS);  // and back
    CHECK(differing_codes(plain, op.quantize(a, b)) == 0);
  }
}

TEST_CASE("capi_damping_reaches_gptq") {
  Operator op(16, 64, 96, 4);
  const auto a = calibration(op.K, op.M, 21);
  const auto b = weights(op.N, op.K, 22);
  const Operator::Out default_damp = op.quantize(a, b);
  check_equals_library(op, default_damp, a, b, {});  // 0.01 unless set
  REQUIRE(qgruSetQuantizeGPTQDamping(op.desc, 0.5) == QGRU_STATUS_SUCCESS);
  REQUIRE(qgruSetQuantizeGPTQDamping(op.desc, 2.0) == QGRU_STATUS_BAD_PARAM);  // refused: 0.5 stays
  const Operator::Out strong = op.quantize(a, b);
  qgru::gptq::GptqOptions options;
  options.damp = 0.5;
  const auto want = check_equals_library(op, strong, a, b, options);
  CHECK(want.damp_used == 0.5);
  CHECK(differing_codes(default_damp, strong) > 0);
}
