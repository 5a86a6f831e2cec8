// Multiplier + shift rescales (docs/FIXED_POINT.md §1a) against independent references: the rounding primitive
// against exact 128-bit rational arithmetic (every int16 value, edge multipliers, every tie), the derivation of
// multiplier and shift against the real ratio it encodes (float64 and exact bounds), real scales against their
// ranges, and whole multiplier-scale models: the fast executor's codes equal the reference executor's on every
// preset, both cells, edge shapes and edge codes; the artifact keeps every multiplier, and a changed one is refused.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "qgru/base/error.h"
#include "qgru/base/tensor_quant.h"
#include "qgru/fixed/rounding.h"
#include "qgru/quant/artifact_write.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/overflow_check.h"
#include "qgru/runtime/quant_executor.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

__extension__ typedef __int128 Int128;

// value · multiplier / 2^shift rounded half away from zero, in 128-bit integers: truncating division, then one
// more step in magnitude when twice the remainder reaches the divisor. shift in 0..62.
int64_t exact_rescale(int64_t value, int64_t multiplier, int shift) {
  const Int128 numerator = static_cast<Int128>(value) * multiplier;
  const Int128 divisor = static_cast<Int128>(1) << shift;
  Int128 quotient = numerator / divisor;
  const Int128 remainder = numerator % divisor;
  const Int128 twice = remainder < 0 ? -2 * remainder : 2 * remainder;
  if (twice >= divisor) quotient += numerator < 0 ? -1 : 1;
  return static_cast<int64_t>(quotient);
}

BitwidthConfig multiplier_config(const std::string& preset) {
  BitwidthConfig config = load_bitwidth_config(preset);
  for (TensorBitwidth& t : config.tensors) t.multiplier_scale = true;
  return config;
}

std::string first_mismatch(const QuantGruResult& ref, const QuantGruResult& got) {
  if (ref.output_codes.size() != got.output_codes.size()) return "output sizes differ";
  for (size_t i = 0; i < ref.output_codes.size(); ++i) {
    if (ref.output_codes[i] != got.output_codes[i]) {
      return "output flat index " + std::to_string(i) + ": reference " + std::to_string(ref.output_codes[i]) + ", fast " +
             std::to_string(got.output_codes[i]);
    }
  }
  if (ref.h_n_codes != got.h_n_codes) return "h_n codes differ";
  if (ref.output != got.output) return "dequantized outputs differ";
  return "";
}

}  // namespace

TEST_CASE("multiply_rshift_round differs from the exact rational rounding for some int16 value (edge multipliers, shifts 0..40)") {
  const int32_t multipliers[] = {1, 2, 3, 5, 0x40000000, 0x40000001, 0x5555'5555, 0x7fffffff, 0x6487ED51 /* pi/4 · 2^31 */};
  for (int32_t m : multipliers) {
    for (int shift : {0, 1, 2, 7, 15, 16, 17, 30, 31, 32, 40}) {
      for (int32_t v = std::numeric_limits<int16_t>::min(); v <= std::numeric_limits<int16_t>::max(); ++v) {
        const int64_t got = multiply_rshift_round(v, m, shift);
        const int64_t want = exact_rescale(v, m, shift);
        if (got != want) {
          CAPTURE(m);
          CAPTURE(shift);
          CAPTURE(v);
          REQUIRE(got == want);
        }
      }
    }
  }
}

TEST_CASE("multiply_rshift_round breaks ties toward zero or to even instead of away from zero") {
  // 3 · 1 / 2 = 1.5 -> 2, -1.5 -> -2; 5 · 1 / 2 = 2.5 -> 3 (half to even: 2); 3 · 5 / 2 = 7.5 -> 8
  CHECK(multiply_rshift_round(1, 3, 1) == 2);
  CHECK(multiply_rshift_round(-1, 3, 1) == -2);
  CHECK(multiply_rshift_round(1, 5, 1) == 3);
  CHECK(multiply_rshift_round(-1, 5, 1) == -3);
  CHECK(multiply_rshift_round(5, 3, 1) == 8);
  // just below and above a tie: 0x40000000 · 3 / 2^31 = 1.5 exactly; one less multiplier rounds down
  CHECK(multiply_rshift_round(3, 0x40000000, 31) == 2);
  CHECK(multiply_rshift_round(3, 0x3fffffff, 31) == 1);
  CHECK(multiply_rshift_round(-3, 0x3fffffff, 31) == -1);
  // the largest product the contract allows, 2^62, with the largest multiplier: exact
  const int64_t v = (int64_t{1} << 62) / 0x7fffffff;
  CHECK(multiply_rshift_round(v, 0x7fffffff, 62) == exact_rescale(v, 0x7fffffff, 62));
  CHECK(multiply_rshift_round(-v, 0x7fffffff, 62) == exact_rescale(-v, 0x7fffffff, 62));
}

TEST_CASE("multiplier_rescale encodes the ratio worse than 2^-bits or lets |input| · multiplier pass 2^62") {
  std::mt19937_64 rng(2026);
  std::uniform_real_distribution<double> exponent(-30.0, 29.0);
  std::uniform_real_distribution<double> bound_bits(0.0, 61.0);
  for (int i = 0; i < 20000; ++i) {
    const double ratio = std::exp2(exponent(rng));
    const double bound = std::floor(std::exp2(bound_bits(rng)));
    const MultiplierRescale r = multiplier_rescale(ratio, bound);
    CAPTURE(ratio);
    CAPTURE(bound);
    int bound_exponent = 0;
    std::frexp(std::max(bound, 1.0), &bound_exponent);
    const int bits = std::min(31, std::max(1, 62 - bound_exponent));
    REQUIRE(r.multiplier >= (int64_t{1} << (bits - 1)));
    REQUIRE(static_cast<int64_t>(r.multiplier) < (int64_t{1} << bits));
    REQUIRE(static_cast<double>(r.multiplier) * bound <= std::ldexp(1.0, 62));
    const double encoded = std::ldexp(static_cast<double>(r.multiplier), -r.shift);
    REQUIRE(std::fabs(encoded - ratio) <= ratio * std::ldexp(1.0, -bits));
  }
  // an exact power of two is exact; a fraction that rounds up to 2^31 is renormalised
  const MultiplierRescale half = multiplier_rescale(0.5, 100.0);
  CHECK(std::ldexp(static_cast<double>(half.multiplier), -half.shift) == 0.5);
  const MultiplierRescale almost_one = multiplier_rescale(1.0 - std::ldexp(1.0, -40), 100.0);
  CHECK(almost_one.multiplier == 0x40000000);
  CHECK(almost_one.shift == 30);
}

TEST_CASE("a multiplier rescale of every 8-bit code is not the correctly rounded product with the encoded ratio, within 1 of v·ratio") {
  for (double ratio : {0.0123, 0.37, 0.5, 0.99999, 1.0, 1.7, 3.14159, 200.5}) {
    const MultiplierRescale r = multiplier_rescale(ratio, 256.0);
    for (int v = -256; v <= 256; ++v) {
      const int64_t got = multiply_rshift_round(v, r.multiplier, r.shift);
      CHECK(got == exact_rescale(v, r.multiplier, r.shift));
      CHECK(std::fabs(static_cast<double>(got) - v * ratio) <= 0.5 + std::fabs(v * ratio) * std::ldexp(1.0, -30));
    }
  }
}

TEST_CASE("a real scale leaves part of its range uncovered or wastes codes") {
  struct Case {
    double lo, hi;
    int bits;
    bool is_unsigned, symmetric;
  };
  for (const Case& c : {Case{-1.3, 2.7, 8, false, false}, Case{0.01, 0.98, 8, true, false}, Case{-0.9, 0.4, 8, false, true},
                        Case{-3.0e-3, 5.0e-2, 16, false, false}, Case{-100.0, 0.0, 12, false, false}}) {
    const TensorQuant q = real_quant_from_range(c.lo, c.hi, c.bits, c.is_unsigned, c.symmetric).quant;
    CAPTURE(describe_quant(q));
    CHECK(q.mantissa >= 0.5);
    CHECK(q.mantissa < 1.0);
    const double lo = std::min(c.lo, 0.0), hi = std::max(c.hi, 0.0);
    const double levels = c.symmetric ? q.qmax() : static_cast<double>(q.qmax()) - q.qmin();
    const double want = c.symmetric ? std::max(-lo, hi) / levels : (hi - lo) / levels;
    CHECK(q.scale() == doctest::Approx(want).epsilon(1e-14));
    // both ends of the range land within half a step of the code range's ends (no clipping, no waste)
    CHECK(q.to_steps(lo) + q.zp >= q.qmin() - 0.5 - 1e-9);
    CHECK(q.to_steps(hi) + q.zp <= q.qmax() + 0.5 + 1e-9);
    CHECK(std::fabs(q.dequantize(q.quantize(hi)) - hi) <= 0.5 * q.scale() + 1e-12);
    CHECK(q.quantize(0.0) == q.zp);
  }
}

TEST_CASE("the fast executor's codes drift from the reference's on a multiplier-scale model (every preset, both cells, edge shapes and codes)") {
  struct Shape {
    int C, H, L, D, N, T;
  };
  const Shape shapes[] = {{3, 1, 1, 1, 1, 4}, {5, 7, 2, 2, 3, 5}, {9, 33, 2, 1, 2, 3}, {4, 32, 1, 2, 9, 3}};
  for (const std::string& preset : bitwidth_preset_names()) {
    const BitwidthConfig config = multiplier_config(preset);
    for (bool linear_before_reset : {true, false}) {
      for (const Shape& s : shapes) {
        if (preset != "int8" && s.H > 8) continue;  // 16-bit activations (tabulated pwl gates): keep the case cheap
        CAPTURE(preset);
        CAPTURE(linear_before_reset);
        CAPTURE(s.H);
        test::CalibratedCase c = test::calibrated_case(s.C, s.H, s.L, s.D, s.T, s.N, config, 515u + static_cast<uint32_t>(s.H),
                                                       {}, linear_before_reset);
        REQUIRE(c.quantized.cells.front().multiplier_scales);
        REQUIRE(prove_no_overflow(c.quantized).ok());
        for (int threads : {1, 2}) {
          FastExecutorOptions o;
          o.threads = threads;
          o.adaptive_split = false;
          FastQuantGru fast(c.quantized, o);
          CAPTURE(threads);
          CHECK(fast.support().supported == cpu_has_avx2());  // the fast path itself, not its reference fallback
          // float input (quantized with the real scale), then edge codes: x at both ends of its range, h0 too
          const std::string bad = first_mismatch(run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr),
                                                 fast.run(c.x.data(), c.T, c.N, nullptr));
          CHECK_MESSAGE(bad.empty(), bad);
          const TensorQuant& xq = c.quantized.input_quant();
          std::vector<int32_t> q_x(static_cast<size_t>(c.T) * c.N * s.C);
          for (size_t i = 0; i < q_x.size(); ++i) q_x[i] = (i % 3 == 0) ? xq.qmin() : (i % 3 == 1) ? xq.qmax() : xq.zp;
          std::vector<int32_t> q_h0(static_cast<size_t>(s.L) * s.D * c.N * s.H);
          for (size_t i = 0; i < q_h0.size(); ++i) {
            const TensorQuant& hq = c.quantized.cells[i / (static_cast<size_t>(c.N) * s.H)].q(GruTensor::h);
            q_h0[i] = i % 2 == 0 ? hq.qmin() : hq.qmax();
          }
          const std::string bad_edges = first_mismatch(run_quantized_gru_codes(c.quantized, q_x.data(), c.T, c.N, q_h0.data()),
                                                       fast.run_codes(q_x.data(), c.T, c.N, q_h0.data()));
          CHECK_MESSAGE(bad_edges.empty(), bad_edges);
        }
      }
    }
  }
}

TEST_CASE("a multiplier-scale artifact loses a multiplier or a mantissa on the way through the file, or accepts a changed one") {
  const BitwidthConfig config = multiplier_config("int8");
  test::CalibratedCase c = test::calibrated_case(5, 6, 2, 2, 4, 2, config, 77u);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("qgru_multiplier_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.qgru.json").string();
  write_artifact(path, c.quantized);
  const QuantizedGru back = read_artifact(path);
  REQUIRE(back.cells.size() == c.quantized.cells.size());
  for (size_t i = 0; i < back.cells.size(); ++i) {
    const GruCellQuantParams& a = c.quantized.cells[i];
    const GruCellQuantParams& b = back.cells[i];
    CHECK(b.multiplier_scales);
    CHECK(b.mantissa_W == a.mantissa_W);
    CHECK(b.multiplier_gemm_x_to_weight_ih_linear == a.multiplier_gemm_x_to_weight_ih_linear);
    CHECK(b.multiplier_update_gate_output == a.multiplier_update_gate_output);
    CHECK(b.q(GruTensor::h).mantissa == a.q(GruTensor::h).mantissa);
  }
  const QuantGruResult ref = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  CHECK(run_quantized_gru(back, c.x.data(), c.T, c.N, nullptr).output_codes == ref.output_codes);

  std::ifstream in(path);
  nlohmann::json root = nlohmann::json::parse(in);
  in.close();
  CHECK(root["version"] == 3);
  CHECK(root["scales"] == "multiplier");
  auto refused_after = [&](const std::function<void(nlohmann::json&)>& change, const std::string& expected) {
    nlohmann::json copy = root;
    change(copy);
    std::ofstream(path) << copy.dump(2);
    try {
      read_artifact(path);
      FAIL("accepted: " << expected);
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(expected) != std::string::npos, e.what());
    }
  };
  refused_after([](nlohmann::json& j) { j["cells"][0]["derived"]["multiplier_update_gate_output"] = 12345; },
                "multiplier_update_gate_output");
  refused_after([](nlohmann::json& j) { j["cells"][1]["tensors"]["h"]["mantissa"] = 0.75; }, "differs");
  refused_after([](nlohmann::json& j) { j["cells"][0]["tensors"]["x"]["mantissa"] = 1.5; }, "outside [0.5, 1)");
  refused_after([](nlohmann::json& j) { j["version"] = 2; }, "scales");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a power-of-two model gets multipliers or a new artifact version") {
  test::CalibratedCase c = test::calibrated_case(4, 5, 1, 1, 3, 2, load_bitwidth_config("int8"), 9u);
  const GruCellQuantParams& p = c.quantized.cells.front();
  CHECK_FALSE(p.multiplier_scales);
  CHECK(p.multiplier_gemm_x_to_weight_ih_linear.empty());
  CHECK(p.multiplier_update_gate_output == 1);
  CHECK(p.mantissa_W.empty());
  for (const TensorQuant& q : p.quant) CHECK(q.power_of_two());
}

TEST_CASE("the multiplier's bits do not shrink when a 16-bit GEMM sum would overflow the 64-bit product") {
  // int16 preset, C = 700: |corrected gemm| reaches 700 · 2^15 · 2^16 ≈ 2^40.5, so the multiplier of the rescale
  // into weight_ih_linear may have at most 62 - 41 = 21 bits; the proof must hold with it.
  test::CalibratedCase c = test::calibrated_case(700, 2, 1, 1, 2, 1, multiplier_config("int16"), 5u);
  const GruCellQuantParams& p = c.quantized.cells.front();
  for (int32_t m : p.multiplier_gemm_x_to_weight_ih_linear) CHECK(m < (1 << 21));
  CHECK(p.multiplier_weight_ih_linear_to_update_gate_input >= (1 << 30));  // a 16-bit difference keeps 31 bits
  const OverflowProof proof = prove_no_overflow(c.quantized);
  CHECK_MESSAGE(proof.ok(), proof.first_failure());
}

}  // namespace qgru

namespace qgru {

TEST_CASE("a config with multiplier scales on some tensors only gives those tensors real scales or loses them in the file") {
  BitwidthConfig config = load_bitwidth_config("int8");
  config.of(GruTensor::h).multiplier_scale = true;
  config.of(GruTensor::W).multiplier_scale = true;
  test::CalibratedCase c = test::calibrated_case(4, 9, 2, 1, 3, 2, config, 303u);
  for (const GruCellQuantParams& p : c.quantized.cells) {
    CHECK(p.multiplier_scales);  // one real scale makes every rescale a multiplier
    CHECK_FALSE(p.q(GruTensor::h).power_of_two());
    CHECK(p.q(GruTensor::x).power_of_two());
    CHECK(p.q(GruTensor::weight_ih_linear).power_of_two());
    for (double m : p.mantissa_R) CHECK(m == 1.0);
    int real_rows = 0;
    for (double m : p.mantissa_W) real_rows += m != 1.0 ? 1 : 0;
    CHECK(real_rows > 0);
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("qgru_mixed_scales_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.qgru.json").string();
  write_artifact(path, c.quantized);
  const QuantizedGru back = read_artifact(path);
  const QuantGruResult ref = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  CHECK(run_quantized_gru(back, c.x.data(), c.T, c.N, nullptr).output_codes == ref.output_codes);
  FastQuantGru fast(back, FastExecutorOptions{});
  const std::string bad = first_mismatch(ref, fast.run(c.x.data(), c.T, c.N, nullptr));
  CHECK_MESSAGE(bad.empty(), bad);
  std::filesystem::remove_all(dir);
}

}  // namespace qgru
