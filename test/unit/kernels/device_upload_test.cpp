// The upload-ordering contract of the CUDA executors' constructors (qgru/kernels/device_upload.h), checked on
// the host with a recording uploader standing in for the device: the sequence ends with the synchronization,
// nothing is uploaded after it, and every array the kernels read was replaced by its uploaded copy (a pointer
// left pointing at host memory would be read by a kernel as a device address).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hand_gru_cell.h"
#include "qgru/kernels/device_upload.h"
#include "qgru/quant/activation_generation.h"
#include "qgru/runtime/activation_tables.h"

namespace dq = qgru::kernels;

namespace {

// Records "put <bytes>" / "finish"; each upload lands in memory the recorder owns (its "device").
class RecordingUploader : public dq::Uploader {
 public:
  std::vector<std::string> calls;
  std::vector<std::unique_ptr<std::vector<char>>> device;

  const void* put_bytes(const void* host, size_t bytes) override {
    calls.push_back(finished_ ? "put after finish" : "put " + std::to_string(bytes));
    device.push_back(std::make_unique<std::vector<char>>(bytes));
    if (bytes > 0) std::memcpy(device.back()->data(), host, bytes);
    return device.back()->data();
  }
  const void* put_kept(std::vector<char> host) override { return put_bytes(host.data(), host.size()); }
  void finish() override {
    calls.push_back("finish");
    finished_ = true;
  }
  bool owns(const void* p) const {
    for (const auto& d : device)
      if (p >= d->data() && p < d->data() + d->size()) return true;
    return false;
  }

 private:
  bool finished_ = false;
};

void check_sequence(const RecordingUploader& up, size_t puts) {
  REQUIRE(!up.calls.empty());
  CHECK(up.calls.back() == "finish");  // the last call is the synchronization
  size_t finishes = 0, seen_puts = 0;
  for (const std::string& call : up.calls) {
    finishes += call == "finish";
    seen_puts += call.rfind("put ", 0) == 0 && call != "put after finish";
    CHECK(call != "put after finish");
  }
  CHECK(finishes == 1);
  CHECK(seen_puts == puts);
}

}  // namespace

TEST_CASE("GRU cell upload: every array copied, the synchronization last, on both GEMM paths") {
  const qgru::test::HandGruCell cell(5, 3, 11);
  for (dq::GruGemmPath path : {dq::GruGemmPath::Int8, dq::GruGemmPath::Wide16}) {
    RecordingUploader up;
    const dq::GruCellUpload u = dq::upload_gru_cell(cell.view, cell.q_W.data(), cell.q_R.data(), cell.C, path, up);
    // 8 per-channel arrays + 3 table activations + W + R.
    check_sequence(up, 8 + 3 + 2);
    const qgru::GruCellParamsView& v = u.view;
    for (const void* p : {static_cast<const void*>(v.W_sum), static_cast<const void*>(v.q_bw),
                          static_cast<const void*>(v.shift_bw_to_gemm_x), static_cast<const void*>(v.shift_gemm_x_to_weight_ih_linear),
                          static_cast<const void*>(v.R_sum), static_cast<const void*>(v.q_br),
                          static_cast<const void*>(v.shift_br_to_gemm_h), static_cast<const void*>(v.shift_gemm_h_to_weight_hh_linear),
                          static_cast<const void*>(v.update_gate.table), static_cast<const void*>(v.reset_gate.table),
                          static_cast<const void*>(v.new_gate.table), u.W, u.R}) {
      CHECK(up.owns(p));
    }
    // The copies hold the host values (first and last element of each per-channel array and table).
    CHECK(std::memcmp(v.W_sum, cell.view.W_sum, 15 * sizeof(int64_t)) == 0);
    CHECK(std::memcmp(v.q_br, cell.view.q_br, 15 * sizeof(int32_t)) == 0);
    CHECK(v.new_gate.table[255] == cell.view.new_gate.table[255]);
    // The packed weights: row c of W at c * C_p, in the path's operand type.
    if (path == dq::GruGemmPath::Int8) {
      const dq::GruGemmLayout l = dq::plan_gru_gemm(5, 3, 1, 1);
      CHECK(static_cast<const int8_t*>(u.W)[l.C_p * 14 + 2] == cell.q_W[14 * 3 + 2]);
    } else {
      const dq::GruGemmLayout l = dq::plan_gru_wide(5, 3, 1, 1);
      CHECK(static_cast<const int16_t*>(u.W)[l.C_p * 14 + 2] == cell.q_W[14 * 3 + 2]);
    }
  }
}

TEST_CASE("GPTQ layer upload: qweight, qzeros, scales and the act-order permutation, the synchronization last") {
  const std::vector<int32_t> qweight(64, 7), qzeros(4, 1), perm = {3, 2, 1, 0};
  const std::vector<uint16_t> scales(16, 0x3C00);
  for (const std::vector<int32_t>* order : {static_cast<const std::vector<int32_t>*>(nullptr), &perm}) {
    RecordingUploader up;
    const dq::GptqLayerUpload u = dq::upload_gptq_layer(qweight, qzeros, scales, order, up);
    check_sequence(up, order == nullptr ? 3 : 4);
    CHECK(up.owns(u.qweight));
    CHECK(up.owns(u.qzeros));
    CHECK(up.owns(u.scales));
    CHECK((order == nullptr ? u.perm == nullptr : up.owns(u.perm)));
    CHECK(u.qweight[63] == 7u);
    CHECK(u.scales[15] == 0x3C00);
  }
}

TEST_CASE("stripes layer upload: tiles, group parameters, the act-order permutation and zeroed counters, the synchronization last") {
  dq::StripeWeights s;
  s.n_padded = 3 * dq::kStripeTileN;
  s.words.assign(1024, 0x12345678u);
  s.params.assign(128, 0x00083C00u);
  for (const bool act_order : {false, true}) {
    s.perm = act_order ? std::vector<int32_t>{1, 0, 3, 2} : std::vector<int32_t>{};
    RecordingUploader up;
    const dq::StripeLayerUpload u = dq::upload_stripe_layer(s, up);
    // The counters are one of the uploads before finish(): the synchronization covers their zeros too (a
    // cudaMemset after it would not be ordered before a launch on a caller's non-blocking stream).
    check_sequence(up, act_order ? 4 : 3);
    CHECK(up.owns(u.words));
    CHECK(up.owns(u.params));
    CHECK((act_order ? up.owns(u.perm) : u.perm == nullptr));
    CHECK(u.words[1023] == 0x12345678u);
    CHECK(u.params[127] == 0x00083C00u);
    REQUIRE(up.owns(u.counters));
    const int64_t counters = dq::stripe_counter_count(s.n_padded);
    CHECK(counters == dq::kStripeMaxMTiles * 3);  // every m tile of a launch of kStripeMaxRows rows, every column
    REQUIRE(up.owns(u.counters + counters - 1));
    for (int64_t i = 0; i < counters; ++i) REQUIRE(u.counters[i] == 0u);
  }
}

TEST_CASE("a piecewise-linear activation's upload: its four arrays and its bucket index, every code the same output") {
  qgru::TensorQuant input, output;
  input.bits = 16;
  input.shift = 10;  // codes span [-32, 32)
  output.bits = 16;
  output.symmetric = true;
  output.shift = 15;  // tanh into [-1, 1)
  const qgru::ActivationTables tables = qgru::generate_activation(qgru::ActivationFunction::Tanh, qgru::ActivationImpl::Pwl,
                                                                  qgru::default_pwl_segments(16), input, output);
  const qgru::ActivationView host = tables.view();
  REQUIRE(host.num_segments > 16);
  CHECK(host.pwl_bucket == nullptr);  // the host view: the plain search, the reference
  RecordingUploader up;
  const qgru::ActivationView device = dq::upload_activation(host, up);
  CHECK(up.calls.size() == 5);  // thresholds, slopes, intercepts, shifts, the bucket index
  for (const void* p : {static_cast<const void*>(device.pwl_threshold), static_cast<const void*>(device.pwl_q_b),
                        static_cast<const void*>(device.pwl_term_c), static_cast<const void*>(device.pwl_shift),
                        static_cast<const void*>(device.pwl_bucket)}) {
    CHECK(up.owns(p));
  }
  CHECK(device.pwl_bucket_shift == 8);  // 65,536 codes in 256 buckets
  int64_t first_mismatch = INT64_MIN;
  for (int64_t q = int64_t{host.q_in_min} - 3; q <= int64_t{host.q_in_max} + 3; ++q) {
    if (qgru::evaluate_activation(device, static_cast<int32_t>(q)) != qgru::evaluate_activation(host, static_cast<int32_t>(q)) &&
        first_mismatch == INT64_MIN) {
      first_mismatch = q;
    }
  }
  CHECK_MESSAGE(first_mismatch == INT64_MIN, "the uploaded activation differs at q_in = " << first_mismatch);
}
