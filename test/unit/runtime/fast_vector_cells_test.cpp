// The fast executor's vector kernels for the cells beside the power-of-two linear_before_reset = 1 one (fast_kernels.h:
// cell_rows_avx512_multiplier, cell_rows_avx2_multiplier, reset_hidden_avx512, reset_hidden_avx2, their multiplier
// forms, and reset_hidden_avx512_i32, reset_hidden_avx2_i32 beside the int32 cell): the plan chooses them on both levels (a silent fall back to the element-by-element kernel fails
// here), and their codes equal the reference executor's on every preset, both scale kinds, both levels, odd H, two
// layers, both directions, typical and edge codes, h0 and sequence lengths.
#include <doctest/doctest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../../../lib/src/runtime/fast/fast_plan.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/overflow_check.h"
#include "qgru/runtime/quant_executor.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

BitwidthConfig scales_config(const std::string& preset, bool multiplier_scales) {
  BitwidthConfig config = load_bitwidth_config(preset);
  if (multiplier_scales) {
    for (TensorBitwidth& t : config.tensors) t.multiplier_scale = true;
  }
  return config;
}

// Both levels; the test needs both (the avx2 kernels run on every AVX-512 machine too).
std::vector<FastIsa> both_levels() {
  std::vector<FastIsa> levels;
  if (cpu_has_avx2()) levels.push_back(FastIsa::Avx2);
  if (cpu_has_avx512_vnni()) levels.push_back(FastIsa::Avx512Vnni);
  if (levels.size() < 2) MESSAGE("NOT TESTED: only ", levels.size(), " of the two fast levels run on this CPU");
  return levels;
}

// "" when the codes (outputs and final states) are equal, else the first difference.
std::string first_mismatch(const QuantGruResult& ref, const QuantGruResult& got) {
  if (ref.output_codes.size() != got.output_codes.size()) return "output sizes differ";
  for (size_t i = 0; i < ref.output_codes.size(); ++i) {
    if (ref.output_codes[i] != got.output_codes[i]) {
      std::ostringstream os;
      os << "output code " << i << ": reference " << ref.output_codes[i] << ", fast " << got.output_codes[i];
      return os.str();
    }
  }
  if (ref.h_n_codes != got.h_n_codes) return "h_n codes differ";
  if (ref.output != got.output) return "dequantized outputs differ";
  return "";
}

// The kernel names the plan must choose for a cell of this kind at this level.
std::string level_prefix(FastIsa isa) { return isa == FastIsa::Avx512Vnni ? "avx512" : "avx2"; }

TEST_CASE("multiplier-scale cells and the linear_before_reset = 0 cell's C-2 / C-2a fall back to the element kernel (every preset, both levels)") {
  for (const std::string& preset : bitwidth_preset_names()) {
    for (bool multiplier_scales : {false, true}) {
      for (bool linear_before_reset : {true, false}) {
        if (!multiplier_scales && linear_before_reset) continue;  // the power-of-two cell: fast_plan_test
        CAPTURE(preset);
        CAPTURE(multiplier_scales);
        CAPTURE(linear_before_reset);
        const test::CalibratedCase c = test::calibrated_case(/*C=*/6, /*H=*/9, /*L=*/1, /*D=*/1, /*T=*/3, /*N=*/2,
                                                             scales_config(preset, multiplier_scales), 71u, {},
                                                             linear_before_reset);
        REQUIRE(c.quantized.cells.front().multiplier_scales == multiplier_scales);
        for (FastIsa isa : both_levels()) {
          FastExecutorOptions o;
          o.isa = isa;
          const FastPathSupport s = fast_path_support(c.quantized, o);
          REQUIRE(s.supported);
          for (const fast::PackedCell& pc : s.plan->cells) {
            const std::string name = pc.kernels.name, reset_hidden = pc.kernels.reset_hidden_name;
            CAPTURE(name);
            CAPTURE(reset_hidden);
            CHECK(name != "element");
            if (multiplier_scales) CHECK(name == level_prefix(isa) + " int64 multiplier");
            CHECK((pc.kernels.reset_hidden != nullptr) == !linear_before_reset);
            if (!linear_before_reset) {  // int32 lanes with the int32 cell (the int8 preset), else int64 lanes
              const char* lanes = multiplier_scales ? " int64 multiplier" : preset == "int8" ? " int32" : " int64";
              CHECK(reset_hidden == level_prefix(isa) + lanes);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("the vector kernels of multiplier-scale and linear_before_reset = 0 cells drift from the reference (every preset, both levels, odd H, lengths)") {
  struct Shape {
    int C, H, L, D, N, T;
  };
  // H off the vector widths (4, 8 and 16 lanes), two layers, both directions, batch 1 and odd batches
  const Shape shapes[] = {{3, 1, 1, 1, 1, 4}, {5, 7, 2, 2, 3, 5}, {9, 13, 2, 1, 2, 3}, {4, 33, 1, 2, 5, 3}};
  for (const std::string& preset : bitwidth_preset_names()) {
    for (bool multiplier_scales : {false, true}) {
      for (bool linear_before_reset : {true, false}) {
        if (!multiplier_scales && linear_before_reset) continue;  // the power-of-two cell: fast_executor_test
        for (const Shape& s : shapes) {
          if (preset != "int8" && s.H > 7) continue;  // 16-bit activations (tabulated pwl gates): keep the case cheap
          CAPTURE(preset);
          CAPTURE(multiplier_scales);
          CAPTURE(linear_before_reset);
          CAPTURE(s.H);
          const test::CalibratedCase c = test::calibrated_case(s.C, s.H, s.L, s.D, s.T, s.N, scales_config(preset, multiplier_scales),
                                                               907u + static_cast<uint32_t>(s.H), {}, linear_before_reset);
          const QuantizedGru& m = c.quantized;
          REQUIRE(prove_no_overflow(m).ok());
          // typical codes (the float input quantized), then edge codes: x and h0 at both ends of their ranges
          const std::vector<int32_t> typical = quantize_values(m.input_quant(), c.x.data(), c.x.size());
          std::mt19937 rng(29u + static_cast<uint32_t>(s.H));
          std::vector<int32_t> edge_x(typical.size());
          for (int32_t& v : edge_x) v = (rng() & 1u) ? m.input_quant().qmin() : m.input_quant().qmax();
          std::vector<int32_t> edge_h0(static_cast<size_t>(s.L) * s.D * s.N * s.H);
          for (size_t i = 0; i < edge_h0.size(); ++i) {
            const TensorQuant& hq = m.cells[i / (static_cast<size_t>(s.N) * s.H)].q(GruTensor::h);
            edge_h0[i] = (rng() & 1u) ? hq.qmin() : hq.qmax();
          }
          std::vector<int32_t> lengths(static_cast<size_t>(s.N));
          for (int n = 0; n < s.N; ++n) lengths[static_cast<size_t>(n)] = s.T - n % (s.T + 1);  // T, T - 1, ..., 0, T, ...
          const QuantGruResult ref_typical = run_quantized_gru_codes(m, typical.data(), s.T, s.N, nullptr);
          const QuantGruResult ref_edges = run_quantized_gru_codes(m, edge_x.data(), s.T, s.N, edge_h0.data());
          const QuantGruResult ref_lengths =
              run_quantized_gru_codes(m, typical.data(), s.T, s.N, edge_h0.data(), nullptr, lengths.data());
          const QuantGruResult ref_float = run_quantized_gru(m, c.x.data(), s.T, s.N, nullptr);
          for (FastIsa isa : both_levels()) {
            for (int threads : {1, 2}) {
              CAPTURE(level_prefix(isa));
              CAPTURE(threads);
              FastExecutorOptions o;
              o.isa = isa;
              o.threads = threads;
              o.adaptive_split = false;
              const FastQuantGru fast(m, o);
              REQUIRE(fast.support().supported);  // the fast path itself, not its reference fallback
              std::string bad = first_mismatch(ref_typical, fast.run_codes(typical.data(), s.T, s.N, nullptr));
              CHECK_MESSAGE(bad.empty(), bad);
              bad = first_mismatch(ref_edges, fast.run_codes(edge_x.data(), s.T, s.N, edge_h0.data()));
              CHECK_MESSAGE(bad.empty(), bad);
              bad = first_mismatch(ref_lengths, fast.run_codes(typical.data(), s.T, s.N, edge_h0.data(), nullptr, lengths.data()));
              CHECK_MESSAGE(bad.empty(), bad);
              bad = first_mismatch(ref_float, fast.run(c.x.data(), s.T, s.N, nullptr));
              CHECK_MESSAGE(bad.empty(), bad);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace qgru
