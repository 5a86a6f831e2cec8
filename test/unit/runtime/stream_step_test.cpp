// Streaming against the whole-sequence run (the specification): a sequence fed a few frames at a time
// through step_layer_loop, its state carried between calls, gives the very codes (every output, the final
// state) of one run_quantized_gru_codes over the whole sequence from the same h0, on every preset,
// multi-layer, with the reference stepper and every fast level this CPU has. Bidirectional models and
// out-of-range input are refused without touching the state.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/stream_step.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

// Codes drawn uniformly from a tensor's whole code range, its ends included (the edge codes the GEMMs'
// operand forms must carry exactly).
std::vector<int32_t> random_codes(const TensorQuant& q, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(q.qmin(), q.qmax());
  std::vector<int32_t> codes(count);
  for (size_t i = 0; i < count; ++i) codes[i] = i % 17 == 0 ? q.qmin() : i % 19 == 0 ? q.qmax() : pick(rng);
  return codes;
}

// h0 codes [L, N, H], each layer in its own h space.
std::vector<int32_t> random_state(const QuantizedGru& model, int N, uint32_t seed) {
  const size_t per_layer = static_cast<size_t>(N) * model.hidden_size;
  std::vector<int32_t> q_h0;
  for (int l = 0; l < model.num_layers; ++l) {
    const std::vector<int32_t> codes = random_codes(model.cell(l, 0).q(GruTensor::h), per_layer, seed + static_cast<uint32_t>(l));
    q_h0.insert(q_h0.end(), codes.begin(), codes.end());
  }
  return q_h0;
}

// Streams q_x [T, N, C] in chunks of 1, 2, 3, 1, 2, 3, ... frames; returns "" when the outputs and the final
// state equal the whole run's, else the first difference.
std::string stream_against_whole(const QuantizedGru& model, const std::vector<int32_t>& q_x, int T, int N,
                                 const std::vector<int32_t>& q_h0, GruCellStepper& stepper) {
  const QuantGruResult whole = run_quantized_gru_codes(model, q_x.data(), T, N, q_h0.data());
  const int H = model.hidden_size;
  const size_t NH = static_cast<size_t>(N) * H;
  std::vector<int32_t> state = q_h0;
  std::vector<int32_t> out(static_cast<size_t>(T) * NH, -1);
  std::vector<int32_t> next_x(NH);
  int chunk = 1;
  for (int t = 0; t < T; t += chunk, chunk = chunk % 3 + 1) {
    const int frames = std::min(chunk, T - t);
    step_layer_loop(model, q_x.data() + static_cast<size_t>(t) * N * model.input_size, frames, state.data(),
                    out.data() + static_cast<size_t>(t) * NH, next_x.data(), stepper);
  }
  std::ostringstream os;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != whole.output_codes[i]) {
      os << "output t=" << i / NH << " n=" << i % NH / static_cast<size_t>(H) << " unit=" << i % static_cast<size_t>(H)
         << ": whole " << whole.output_codes[i] << ", streamed " << out[i];
      return os.str();
    }
  }
  if (state != whole.h_n_codes) return "final state differs from h_n";
  return "";
}

TEST_CASE("streamed frames drift from the whole-sequence run (every preset, multi-layer, every executor)") {
  struct Shape {
    int C, H, L, N, T;
  };
  // H = 64 at N = 1: the fast path's one-kernel recurrence runs the whole sequence, the stepper the per-step
  // kernels; H = 33 and 257: padded rows; N = 5: several streams per step.
  // The linear_before_reset = 0 cell on the first and third shapes (its fast stepper is its own time loop's step).
  const Shape shapes[] = {{5, 33, 3, 1, 7}, {8, 64, 2, 1, 9}, {3, 17, 2, 5, 6}, {6, 257, 2, 2, 4}};
  for (const std::string& preset : bitwidth_preset_names()) {
    const BitwidthConfig config = load_bitwidth_config(preset);
    for (const Shape& s : shapes) {
     for (bool linear_before_reset : {true, false}) {
      if (!linear_before_reset && s.H != 33 && s.H != 17) continue;
      CAPTURE(preset);
      CAPTURE(s.H);
      CAPTURE(s.N);
      CAPTURE(linear_before_reset);
      test::CalibratedCase c = test::calibrated_case(s.C, s.H, s.L, /*D=*/1, s.T, s.N, config, 7u + static_cast<uint32_t>(s.H),
                                                     {}, linear_before_reset);
      const QuantizedGru& model = c.quantized;
      const size_t x_count = static_cast<size_t>(s.T) * s.N * s.C;
      // Calibrated float input (typical codes) from zeros, and codes over x's whole range from a random state.
      const std::vector<int32_t> typical = quantize_values(model.input_quant(), c.x.data(), x_count);
      const std::vector<int32_t> edge_h0 = random_state(model, s.N, 99);
      std::vector<int32_t> zp_h0;
      for (int l = 0; l < s.L; ++l) zp_h0.insert(zp_h0.end(), static_cast<size_t>(s.N) * s.H, model.cell(l, 0).q(GruTensor::h).zp);
      const std::vector<int32_t> edge = random_codes(model.input_quant(), x_count, 5u + static_cast<uint32_t>(s.H));

      std::unique_ptr<GruCellStepper> reference = make_reference_stepper(model, s.N);
      std::string bad = stream_against_whole(model, typical, s.T, s.N, zp_h0, *reference);
      CHECK_MESSAGE(bad.empty(), "reference stepper: " << bad);
      bad = stream_against_whole(model, edge, s.T, s.N, edge_h0, *reference);
      CHECK_MESSAGE(bad.empty(), "reference stepper, edge codes: " << bad);

      for (FastIsa isa : {FastIsa::Avx2, FastIsa::Avx512Vnni}) {
        FastExecutorOptions options;
        options.isa = isa;
        FastQuantGru fast(model, options);
        std::unique_ptr<GruCellStepper> stepper = fast.make_stepper(s.N);
        CHECK((stepper != nullptr) == fast.support().supported);
        if (!stepper) {
          MESSAGE("NOT TESTED: fast stepper at " << (isa == FastIsa::Avx2 ? "avx2" : "avx512-vnni") << ": "
                                                 << fast.support().reason);
          continue;
        }
        CAPTURE(fast.support().isa);
        bad = stream_against_whole(model, typical, s.T, s.N, zp_h0, *stepper);
        CHECK_MESSAGE(bad.empty(), "fast stepper: " << bad);
        bad = stream_against_whole(model, edge, s.T, s.N, edge_h0, *stepper);
        CHECK_MESSAGE(bad.empty(), "fast stepper, edge codes: " << bad);
      }
     }
    }
  }
}

TEST_CASE("streamed frames of a multiplier-scale model drift from the whole-sequence run (both cells, every level)") {
  // docs/FIXED_POINT.md §1a: the fast stepper runs such cells element by element through the cell's own rescale.
  for (const std::string& preset : {std::string("int8"), std::string("int16-activations")}) {
    BitwidthConfig config = load_bitwidth_config(preset);
    for (TensorBitwidth& t : config.tensors) t.multiplier_scale = true;
    for (bool linear_before_reset : {true, false}) {
      CAPTURE(preset);
      CAPTURE(linear_before_reset);
      const int C = 3, H = 17, L = 2, N = 5, T = 6;
      test::CalibratedCase c = test::calibrated_case(C, H, L, /*D=*/1, T, N, config, 404u, {}, linear_before_reset);
      const QuantizedGru& model = c.quantized;
      REQUIRE(model.cells.front().multiplier_scales);
      const std::vector<int32_t> edge = random_codes(model.input_quant(), static_cast<size_t>(T) * N * C, 6u);
      const std::vector<int32_t> edge_h0 = random_state(model, N, 98);
      std::unique_ptr<GruCellStepper> reference = make_reference_stepper(model, N);
      std::string bad = stream_against_whole(model, edge, T, N, edge_h0, *reference);
      CHECK_MESSAGE(bad.empty(), "reference stepper: " << bad);
      for (FastIsa isa : {FastIsa::Avx2, FastIsa::Avx512Vnni}) {
        FastExecutorOptions options;
        options.isa = isa;
        FastQuantGru fast(model, options);
        std::unique_ptr<GruCellStepper> stepper = fast.make_stepper(N);
        if (!stepper) {
          MESSAGE("NOT TESTED: fast stepper: " << fast.support().reason);
          continue;
        }
        bad = stream_against_whole(model, edge, T, N, edge_h0, *stepper);
        CHECK_MESSAGE(bad.empty(), "fast stepper: " << bad);
      }
    }
  }
}

TEST_CASE("a bidirectional model streams instead of being refused") {
  test::CalibratedCase c = test::calibrated_case(4, 8, 1, /*D=*/2, 3, 1, load_bitwidth_config("int8"), 3u);
  CHECK(streaming_refusal(c.quantized).find("2 directions") != std::string::npos);
  std::unique_ptr<GruCellStepper> stepper = make_reference_stepper(c.quantized, 1);
  std::vector<int32_t> q_x(4, c.quantized.input_quant().zp), state(16, 0), next_x(8);
  CHECK_THROWS_WITH_AS(step_layer_loop(c.quantized, q_x.data(), 1, state.data(), nullptr, next_x.data(), *stepper),
                       doctest::Contains("unidirectional"), Error);
}

TEST_CASE("an out-of-range code in a later frame changes the state before it is refused") {
  test::CalibratedCase c = test::calibrated_case(3, 5, 2, 1, 4, 2, load_bitwidth_config("int8"), 11u);
  const QuantizedGru& model = c.quantized;
  std::vector<int32_t> q_x = quantize_values(model.input_quant(), c.x.data(), c.x.size());
  q_x.back() = model.input_quant().qmax() + 1;  // the last frame's last code
  std::vector<int32_t> state = random_state(model, 2, 4);
  const std::vector<int32_t> before = state;
  std::vector<int32_t> next_x(10);
  std::unique_ptr<GruCellStepper> stepper = make_reference_stepper(model, 2);
  CHECK_THROWS_WITH_AS(step_layer_loop(model, q_x.data(), 4, state.data(), nullptr, next_x.data(), *stepper),
                       doctest::Contains("outside x's code range"), Error);
  CHECK(state == before);
}

}  // namespace
}  // namespace qgru
