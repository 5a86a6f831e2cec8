// The shared layer / direction loop (qgru/runtime/layer_loop.h) with a cell runner that emulates the CUDA
// executor's flow on the CPU (kernels::emulate_gru_cell: packed int8 operands and the TN GEMM cuBLAS
// computes, or the wide 16-bit kernel's tiled loop) against the reference executor, code for code, on random
// 2-layer bidirectional models of every preset and its multiplier-scale form, with and without h0. Also: the loop visits the cells in
// order with the requantized input, store_cell_codes puts codes and the final state where they belong, and
// a wrong cell is caught.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "qgru/kernels/gru_step.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

// What the CUDA runner (cuda/src/quant_gru_cuda.cpp) does per cell, with the GEMMs emulated on the host.
class EmulatedCudaRunner : public GruCellRunner {
 public:
  explicit EmulatedCudaRunner(const QuantizedGru& model, bool flip_direction = false)
      : model_(model), flip_direction_(flip_direction) {}
  void run_cell(int layer, int direction, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, int32_t* out,
                int out_stride, int out_offset) override {
    const GruCellQuantParams& p = model_.cell(layer, direction);
    const TensorQuant& xq = p.q(GruTensor::x);
    const CodeSpace x_space{xq.zp, xq.qmin(), xq.qmax()};
    const bool reverse = (direction == 1) != flip_direction_;
    const std::vector<int32_t> codes = kernels::emulate_gru_cell(p.view(), p.q_W.data(), p.q_R.data(), p.input_size,
                                                                 x_space, q_x, T, N, q_h.data(), reverse, lengths);
    store_cell_codes(codes, T, N, p.hidden_size, direction, q_h, out, out_stride, out_offset, lengths);
    paths.push_back(path_of(p, x_space));
  }
  std::vector<kernels::GruGemmPath> paths;

 private:
  static kernels::GruGemmPath path_of(const GruCellQuantParams& p, const CodeSpace& x_space) {
    const auto W = std::minmax_element(p.q_W.begin(), p.q_W.end());
    const auto R = std::minmax_element(p.q_R.begin(), p.q_R.end());
    return kernels::plan_gru_operands(*W.first, *W.second, *R.first, *R.second, x_space, p.view().h).path;
  }
  const QuantizedGru& model_;
  bool flip_direction_;
};

std::string first_mismatch(const QuantGruResult& want, const QuantGruResult& got, int H, int D) {
  std::ostringstream os;
  if (want.output_codes.size() != got.output_codes.size()) return "output sizes differ";
  const size_t width = static_cast<size_t>(D) * H;
  for (size_t i = 0; i < want.output_codes.size(); ++i) {
    if (want.output_codes[i] != got.output_codes[i]) {
      const size_t row = i / width, col = i % width;
      os << "output t=" << row / static_cast<size_t>(want.N) << " n=" << row % static_cast<size_t>(want.N)
         << " direction=" << col / static_cast<size_t>(H) << " unit=" << col % static_cast<size_t>(H)
         << ": reference " << want.output_codes[i] << ", emulated CUDA flow " << got.output_codes[i];
      return os.str();
    }
  }
  if (want.h_n_codes != got.h_n_codes) return "h_n codes differ";
  if (want.output != got.output || want.h_n != got.h_n) return "dequantized values differ";
  return "";
}

TEST_CASE("CUDA flow through the shared layer loop drifts from the reference executor (every preset, 2 layers, bidirectional)") {
  struct Case {
    const char* preset;
    kernels::GruGemmPath path;
  };
  const Case cases[] = {{"int8", kernels::GruGemmPath::Int8},
                        {"int16-activations", kernels::GruGemmPath::Wide16},
                        {"int16", kernels::GruGemmPath::Wide16}};
  for (const Case& k : cases) {
    for (bool multiplier : {false, true}) {  // and the preset's multiplier-scale form (docs/FIXED_POINT.md §1a)
      BitwidthConfig config = load_bitwidth_config(k.preset);
      for (TensorBitwidth& t : config.tensors) t.multiplier_scale = multiplier;
      for (int H : {1, 31, 33}) {
        if (multiplier && H == 1) continue;  // the multiplier forms: H = 31 and 33 with h0 (cheap)
        const int C = 5, L = 2, D = 2, T = 6, N = 3;
        // One model per H, calibrated with its h0, runs from zeros and from that h0: the flow is the same code
        // either way, and a model costs more than its runs (the 16-bit presets fit 12 PWL tables over 2^16 codes).
        const std::vector<float> h0_of_model =
            test::random_input(static_cast<size_t>(L * D * N * H), 77u + static_cast<uint32_t>(H), 0.5f);
        const test::CalibratedCase c = test::calibrated_case(C, H, L, D, T, N, config, 31u + static_cast<uint32_t>(H), h0_of_model);
        for (bool with_h0 : {false, true}) {
          if (multiplier && !with_h0) continue;
          const std::string preset = k.preset;
          CAPTURE(preset);
          CAPTURE(multiplier);
          CAPTURE(H);
          CAPTURE(with_h0);
          std::vector<float> h0;
          if (with_h0) h0 = h0_of_model;
          // Inputs wider than the calibration data, so that x saturates at both ends.
          std::vector<float> x = c.x;
          for (float& v : x) v *= 3.0f;
          const std::vector<int32_t> q_x = quantize_values(c.quantized.input_quant(), x.data(), x.size());
          const std::vector<int32_t> q_h0 = quantize_initial_state(c.quantized, h0.empty() ? nullptr : h0.data(), N);
          const int32_t* q_h0_data = q_h0.empty() ? nullptr : q_h0.data();
          const QuantGruResult want = run_quantized_gru_codes(c.quantized, q_x.data(), T, N, q_h0_data);
          EmulatedCudaRunner runner(c.quantized);
          const QuantGruResult got = run_layer_loop(c.quantized, q_x.data(), T, N, q_h0_data, runner);
          const std::string mismatch = first_mismatch(want, got, H, D);
          CHECK_MESSAGE(mismatch.empty(), mismatch);
          REQUIRE(runner.paths.size() == 4);
          for (kernels::GruGemmPath p : runner.paths) CHECK(p == k.path);
        }
      }
    }
  }
}

TEST_CASE("a cell run in the wrong direction is caught by the comparison") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  test::CalibratedCase c = test::calibrated_case(4, 9, 2, 2, 5, 2, config, 21u);
  const std::vector<int32_t> q_x = quantize_values(c.quantized.input_quant(), c.x.data(), c.x.size());
  const QuantGruResult want = run_quantized_gru_codes(c.quantized, q_x.data(), c.T, c.N, nullptr);
  EmulatedCudaRunner wrong(c.quantized, /*flip_direction=*/true);
  const QuantGruResult got = run_layer_loop(c.quantized, q_x.data(), c.T, c.N, nullptr, wrong);
  CHECK(!first_mismatch(want, got, 9, 2).empty());
}

// Records the calls and writes a recognisable code per (layer, direction, t, n, j).
class RecordingRunner : public GruCellRunner {
 public:
  struct Call {
    int layer, direction;
    std::vector<int32_t> q_x, q_h;
  };
  std::vector<Call> calls;
  int C0 = 0, H = 0, D = 0;
  void run_cell(int layer, int direction, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, int32_t* out,
                int out_stride, int out_offset) override {
    const int C = layer == 0 ? C0 : D * H;
    calls.push_back({layer, direction, std::vector<int32_t>(q_x, q_x + static_cast<size_t>(T) * N * C), q_h});
    std::vector<int32_t> codes(static_cast<size_t>(T) * N * H);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<int32_t>((i * 7 + static_cast<size_t>(direction) * 3) % 100) - 50;
    store_cell_codes(codes, T, N, H, direction, q_h, out, out_stride, out_offset);
  }
};

TEST_CASE("the layer loop visits cells in order, feeds layer 1 the requantized codes and keeps each final state") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  test::CalibratedCase c = test::calibrated_case(3, 4, 2, 2, 5, 2, config, 8u);
  const std::vector<int32_t> q_x = quantize_values(c.quantized.input_quant(), c.x.data(), c.x.size());
  RecordingRunner runner;
  runner.C0 = 3;
  runner.H = 4;
  runner.D = 2;
  const QuantGruResult r = run_layer_loop(c.quantized, q_x.data(), c.T, c.N, nullptr, runner);
  REQUIRE(runner.calls.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(runner.calls[static_cast<size_t>(i)].layer == i / 2);
    CHECK(runner.calls[static_cast<size_t>(i)].direction == i % 2);
    // Each cell starts from zp_h of its own h space.
    const int32_t zp = c.quantized.cells[static_cast<size_t>(i)].q(GruTensor::h).zp;
    for (int32_t q : runner.calls[static_cast<size_t>(i)].q_h) CHECK(q == zp);
  }
  CHECK(runner.calls[0].q_x == q_x);
  // Layer 1's input: layer 0's codes ([T, N, D*H], direction d at columns d*H) requantized.
  const std::vector<int32_t>& x1 = runner.calls[2].q_x;
  REQUIRE(x1.size() == static_cast<size_t>(5 * 2 * 8));
  for (size_t row = 0; row < 10; ++row) {
    for (int d = 0; d < 2; ++d) {
      for (size_t j = 0; j < 4; ++j) {
        const int32_t code = static_cast<int32_t>(((row * 4 + j) * 7 + static_cast<size_t>(d) * 3) % 100) - 50;
        CHECK(x1[row * 8 + static_cast<size_t>(d) * 4 + j] == requantize_h_to_next_x(c.quantized, 0, d, code));
      }
    }
  }
  // h_n: forward = the codes at t = T-1, reverse = at t = 0.
  for (size_t cell = 0; cell < 4; ++cell) {
    const size_t d = cell % 2, t = d == 0 ? 4 : 0;
    for (size_t i = 0; i < 8; ++i) {
      const int32_t code = static_cast<int32_t>(((t * 8 + i) * 7 + d * 3) % 100) - 50;
      CHECK(r.h_n_codes[cell * 8 + i] == code);
    }
  }
}

TEST_CASE("store_cell_codes refuses a cell output of the wrong size") {
  std::vector<int32_t> q_h(2), out(12);
  CHECK_THROWS_WITH_AS(store_cell_codes(std::vector<int32_t>(5), 3, 1, 2, 0, q_h, out.data(), 4, 0),
                       doctest::Contains("expected T·N·H = 6"), Error);
}

}  // namespace
}  // namespace qgru
