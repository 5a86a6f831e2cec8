// The integer executor against the float GRU on random models: SQNR of h over all steps, and the same
// check failing when one rescale shift is off by one.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "qgru/runtime/quant_executor.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

struct Target {
  const char* preset;
  double min_sqnr_db;  // asserted bound, a few dB under the measured figures (see the MESSAGE lines)
};

TEST_CASE("integer h tracks the float GRU (2 layers, bidirectional, H edges; both cell variants)") {
  // Measured (random seeds as below): int8 32.2 .. 44.3 dB, int16-activations 42.3 .. 54.0 dB (8-bit weights
  // dominate the 16-bit activations' error); the linear_before_reset = 0 cell (r ⊙ h requantized into h's space
  // before R_n): int8 31.7 .. 48.5 dB, int16-activations 43.0 .. 58.5 dB.
  const Target targets[] = {{"int8", 28.0}, {"int16-activations", 40.0}};
  for (const Target& target : targets) {
    const BitwidthConfig config = load_bitwidth_config(target.preset);
    for (int H : {1, 31, 33}) {
     for (bool linear_before_reset : {true, false}) {
      const std::string preset = target.preset;
      CAPTURE(preset);
      CAPTURE(H);
      CAPTURE(linear_before_reset);
      test::CalibratedCase c = test::calibrated_case(/*C=*/5, H, /*L=*/2, /*D=*/2, /*T=*/12, /*N=*/3, config,
                                                     7u + static_cast<uint32_t>(H), {}, linear_before_reset);
      const QuantGruResult q = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
      REQUIRE(q.output.size() == c.float_result.output.size());
      REQUIRE(q.h_n.size() == c.float_result.h_n.size());
      const double sqnr = test::sqnr_db(c.float_result.output, q.output);
      const double sqnr_hn = test::sqnr_db(c.float_result.h_n, q.h_n);
      MESSAGE(preset << " H=" << H << " linear_before_reset=" << linear_before_reset << ": SQNR(h, all steps) = " << sqnr
                     << " dB, SQNR(h_n) = " << sqnr_hn << " dB");
      CHECK(sqnr >= target.min_sqnr_db);
      CHECK(sqnr_hn >= target.min_sqnr_db);
     }
    }
  }
}

TEST_CASE("the linear_before_reset = 0 cell's own shifts, off by one, break the SQNR check") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  test::CalibratedCase c = test::calibrated_case(5, 31, 2, 2, 12, 3, config, 11u, {}, /*linear_before_reset=*/false);
  const double good = test::sqnr_db(c.float_result.output, run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr).output);
  REQUIRE(good >= 23.0);
  SUBCASE("shift_reset_mul_h_to_h") {
    for (auto& cell : c.quantized.cells) cell.shift_reset_mul_h_to_h -= 1;
  }
  SUBCASE("shift_weight_hh_linear_to_new_gate_input") {
    for (auto& cell : c.quantized.cells) cell.shift_weight_hh_linear_to_new_gate_input -= 1;
  }
  SUBCASE("the other cell's C-3 on these parameters") {
    for (auto& cell : c.quantized.cells) {
      cell.linear_before_reset = true;
      compute_derived_shifts(cell);
    }
  }
  const double bad = test::sqnr_db(c.float_result.output, run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr).output);
  MESSAGE("SQNR correct " << good << " dB, with the injected error " << bad << " dB");
  CHECK(bad < 23.0);
}

TEST_CASE("a rescale shift off by one breaks the SQNR check") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  test::CalibratedCase c = test::calibrated_case(5, 31, 2, 2, 12, 3, config, 11u);
  const double good = test::sqnr_db(c.float_result.output, run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr).output);
  REQUIRE(good >= 23.0);
  SUBCASE("shift_weight_ih_linear_to_new_gate_input") {
    for (auto& cell : c.quantized.cells) cell.shift_weight_ih_linear_to_new_gate_input += 1;
  }
  SUBCASE("shift_update_gate_output") {
    for (auto& cell : c.quantized.cells) cell.shift_update_gate_output -= 1;
  }
  SUBCASE("shift_gemm_h_to_weight_hh_linear of every channel") {
    for (auto& cell : c.quantized.cells) {
      for (auto& s : cell.shift_gemm_h_to_weight_hh_linear) s += 1;
    }
  }
  const double bad = test::sqnr_db(c.float_result.output, run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr).output);
  MESSAGE("SQNR correct " << good << " dB, with the injected error " << bad << " dB");
  CHECK(bad < 23.0);
}

TEST_CASE("float input and integer input give the same codes; h0 is honoured") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  test::CalibratedCase c = test::calibrated_case(4, 9, 2, 2, 5, 2, config, 21u);
  const QuantGruResult from_float = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  const std::vector<int32_t> q_x = quantize_values(c.quantized.input_quant(), c.x.data(), c.x.size());
  const QuantGruResult from_codes = run_quantized_gru_codes(c.quantized, q_x.data(), c.T, c.N, nullptr);
  CHECK(from_float.output_codes == from_codes.output_codes);
  CHECK(from_float.h_n_codes == from_codes.h_n_codes);

  // A non-zero h0 changes the result, and the float run with the same h0 (calibrated with it) is tracked.
  const std::vector<float> h0 = test::random_input(static_cast<size_t>(4) * c.N * 9, 99u, 0.5f);
  test::CalibratedCase c0 = test::calibrated_case(4, 9, 2, 2, 5, 2, config, 21u, h0);
  const QuantGruResult with_h0 = run_quantized_gru(c0.quantized, c0.x.data(), c0.T, c0.N, h0.data());
  const QuantGruResult without_h0 = run_quantized_gru(c0.quantized, c0.x.data(), c0.T, c0.N, nullptr);
  CHECK(with_h0.output_codes != without_h0.output_codes);
  const double sqnr = test::sqnr_db(c0.float_result.output, with_h0.output);
  MESSAGE("SQNR with h0: " << sqnr << " dB");
  CHECK(sqnr >= 23.0);
}

TEST_CASE("an input code outside x's range is refused") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  test::CalibratedCase c = test::calibrated_case(3, 4, 1, 1, 2, 1, config, 5u);
  std::vector<int32_t> q_x(static_cast<size_t>(2 * 1 * 3), 0);
  q_x[4] = 1000;
  CHECK_THROWS_WITH_AS(run_quantized_gru_codes(c.quantized, q_x.data(), 2, 1, nullptr),
                       doctest::Contains("flat index 4"), Error);
}

}  // namespace
}  // namespace qgru

namespace qgru {
namespace {

// Records what the observer sees.
class Recorder : public QuantGruObserver {
 public:
  struct Step {
    int layer, direction, t;
    std::vector<int32_t> q_x, q_h_prev, q_h_new, q_update_gate_output;
  };
  std::vector<Step> steps;
  void on_step(const QuantStepView& s) override {
    Step step{s.layer, s.direction, s.t, {}, {}, {}, {}};
    step.q_x.assign(s.q_x, s.q_x + static_cast<size_t>(s.batch) * s.input_size);
    step.q_h_prev.assign(s.q_h_prev, s.q_h_prev + static_cast<size_t>(s.batch) * s.hidden_size);
    step.q_h_new.assign(s.q_h_new, s.q_h_new + static_cast<size_t>(s.batch) * s.hidden_size);
    step.q_update_gate_output.assign(s.q_update_gate_output, s.q_update_gate_output + static_cast<size_t>(s.batch) * s.hidden_size);
    const TensorQuant& u = s.quant(GruTensor::update_gate_output);
    for (int32_t q : step.q_update_gate_output) CHECK((q >= u.qmin() && q <= u.qmax()));
    steps.push_back(std::move(step));
  }
};

TEST_CASE("the observer sees every step in order, and layer 1's x is layer 0's h requantized") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  const int T = 4, N = 2, H = 5, D = 2;
  test::CalibratedCase c = test::calibrated_case(3, H, 2, D, T, N, config, 61u);
  Recorder recorder;
  const QuantGruResult result = run_quantized_gru(c.quantized, c.x.data(), T, N, nullptr, &recorder);
  REQUIRE(recorder.steps.size() == static_cast<size_t>(2 * D * T));
  // Order: layer by layer, direction by direction; the reverse direction visits T-1 .. 0.
  std::map<std::pair<int, int>, std::vector<int32_t>> h_out;  // (layer, t) -> [N, D*H] codes
  for (size_t i = 0; i < recorder.steps.size(); ++i) {
    const Recorder::Step& s = recorder.steps[i];
    const int step = static_cast<int>(i % T);
    CHECK(s.layer == static_cast<int>(i / (D * T)));
    CHECK(s.direction == static_cast<int>((i / T) % D));
    CHECK(s.t == (s.direction == 0 ? step : T - 1 - step));
    if (step > 0) CHECK(s.q_h_prev == recorder.steps[i - 1].q_h_new);  // the state carries over
    auto& out = h_out[{s.layer, s.t}];
    out.resize(static_cast<size_t>(N) * D * H);
    for (int n = 0; n < N; ++n) {
      for (int j = 0; j < H; ++j) out[static_cast<size_t>(n * D * H + s.direction * H + j)] = s.q_h_new[static_cast<size_t>(n * H + j)];
    }
  }
  // Last layer: the output codes are the observed h codes.
  for (int t = 0; t < T; ++t) {
    const std::vector<int32_t>& o = h_out[{1, t}];
    CHECK(std::equal(o.begin(), o.end(), result.output_codes.begin() + static_cast<std::ptrdiff_t>(t) * N * D * H));
  }
  // Layer 1's x: each direction's h code moved into layer 1's x space, computed in double.
  const TensorQuant& x1 = c.quantized.cell(1, 0).q(GruTensor::x);
  for (const Recorder::Step& s : recorder.steps) {
    if (s.layer != 1) continue;
    const std::vector<int32_t>& h0 = h_out[{0, s.t}];
    for (size_t i = 0; i < h0.size(); ++i) {
      const int d = static_cast<int>((i / H) % D);
      const TensorQuant& h = c.quantized.cell(0, d).q(GruTensor::h);
      const double v = std::round((h0[i] - h.zp) * std::ldexp(1.0, x1.shift - h.shift)) + x1.zp;
      const int32_t expected = static_cast<int32_t>(std::min<double>(std::max<double>(v, x1.qmin()), x1.qmax()));
      CHECK(s.q_x[i] == expected);
    }
  }
}

}  // namespace
}  // namespace qgru

namespace qgru {
namespace {

// Variants of the presets through the same executor: per-tensor weights, symmetric h, unsigned x,
// 12-bit tables, odd widths.
BitwidthConfig variant(const std::string& preset, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(bitwidth_preset_text(preset));
  edit(j);
  return parse_bitwidth_config(j, "variant of " + preset);
}

TEST_CASE("config variants run and track the float GRU") {
  struct Case {
    const char* name;
    BitwidthConfig config;
    bool non_negative_input;
    double min_sqnr_db;  // a few dB under the measured figure (MESSAGE)
  };
  const Case cases[] = {
      {"int8, per-tensor W and R", variant("int8", [](nlohmann::json& j) {
         j["tensors"]["W"]["granularity"] = "per_tensor";
         j["tensors"]["R"]["granularity"] = "per_tensor";
       }), false, 28.0},  // measured 33.4 dB
      {"int8, symmetric h, unsigned x", variant("int8", [](nlohmann::json& j) {
         j["tensors"]["h"]["symmetric"] = true;
         j["tensors"]["x"]["signed"] = false;
       }), true, 28.0},  // measured 33.9 dB
      {"12 bits everywhere, tables", variant("int8", [](nlohmann::json& j) {
         for (auto& t : j["tensors"].items()) t.value()["bits"] = 12;
       }), false, 52.0},  // measured 58.6 dB
      {"6-bit weights, 10-bit activations, pwl", variant("int16", [](nlohmann::json& j) {
         for (auto& t : j["tensors"].items()) t.value()["bits"] = 10;
         j["tensors"]["W"]["bits"] = 6;
         j["tensors"]["R"]["bits"] = 6;
       }), false, 27.0},  // measured 31.8 dB
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    test::CalibratedCase k = test::calibrated_case(6, 17, 2, 2, 10, 3, c.config, 71u);
    if (c.non_negative_input) {
      for (float& v : k.x) v = std::fabs(v);
      test::MinMaxObserver observer;
      k.float_result = run_float_gru(k.model, k.x.data(), k.T, k.N, nullptr, &observer);
      k.quantized = quantize_gru(k.model, c.config, observer.provider());
      CHECK(k.quantized.input_quant().zp == 0);  // unsigned x of a non-negative range: code 0 is 0.0
      CHECK_FALSE(k.quantized.cell(0, 0).gemm_x_int32);  // u8 codes do not fit int8: int64 accumulators
      CHECK(k.quantized.cell(0, 0).gemm_h_int32);
    }
    const QuantGruResult q = run_quantized_gru(k.quantized, k.x.data(), k.T, k.N, nullptr);
    const double sqnr = test::sqnr_db(k.float_result.output, q.output);
    MESSAGE(name << ": SQNR(h) = " << sqnr << " dB");
    CHECK(sqnr >= c.min_sqnr_db);
  }
}

}  // namespace
}  // namespace qgru

namespace qgru {
namespace {

// dequantize_result_fast's float arithmetic against the reference's double arithmetic, bit for bit: every
// 16-bit code of both directions' h, with scales 2^-shift from the smallest to the largest shift it takes
// the float path for; outside that range and for a real scale it must say so and fall back.
TEST_CASE("dequantize_result_fast equals dequantize_result bit for bit over every 16-bit code") {
  QuantizedGru model = test::calibrated_case(3, 4, 2, 2, 2, 1, load_bitwidth_config("int16"), 11u).quantized;
  const int D = model.num_directions, H = model.hidden_size;
  QuantGruResult codes;
  const int32_t code_count = 1 << 16;
  const int rows = code_count / H;  // output rows [rows, D*H]: each direction sees every code once
  for (int r = 0; r < rows; ++r)
    for (int d = 0; d < D; ++d)
      for (int j = 0; j < H; ++j) codes.output_codes.push_back(-32768 + r * H + j + d);  // d shifts direction 1 by one
  codes.h_n_codes.assign(codes.output_codes.begin(), codes.output_codes.begin() + static_cast<std::ptrdiff_t>(model.cells.size()) * H);
  for (const int shift : {-100, -31, -1, 0, 1, 7, 15, 16, 24, 31, 62, 100}) {
    for (GruCellQuantParams& p : model.cells) {
      p.quant[static_cast<size_t>(GruTensor::h)].shift = shift + p.direction;
      p.quant[static_cast<size_t>(GruTensor::h)].zp = 1234 - 7 * p.layer;
    }
    const bool in_range = shift + 1 <= 100;
    CHECK(float_dequantize_exact(model) == in_range);
    QuantGruResult reference = codes, fast = codes;
    dequantize_result(model, reference);
    dequantize_result_fast(model, fast);
    CAPTURE(shift);
    REQUIRE(fast.output.size() == reference.output.size());
    CHECK(std::memcmp(fast.output.data(), reference.output.data(), fast.output.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(fast.h_n.data(), reference.h_n.data(), fast.h_n.size() * sizeof(float)) == 0);
  }
  model.cells[1].quant[static_cast<size_t>(GruTensor::h)].shift = 5;
  model.cells[1].quant[static_cast<size_t>(GruTensor::h)].mantissa = 0.75;  // a real scale: the reference's path
  CHECK_FALSE(float_dequantize_exact(model));
}

}  // namespace
}  // namespace qgru
