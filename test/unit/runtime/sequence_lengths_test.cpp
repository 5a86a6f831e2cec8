// Batches of unequal lengths: steps past a row's length leave its state unchanged and output zero, h_n is
// the state after its last valid step, the reverse direction starts at the row's own last step. The
// property that pins all of it: every row of a padded batch gets the very codes (and float values) it gets
// when run alone over its own steps, in every executor (float, reference, fast at each level the CPU has,
// the CUDA cell's host emulation).
#include <doctest/doctest.h>

#include <string>
#include <tuple>
#include <vector>

#include "qgru/kernels/gru_step.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru/runtime/quant_executor.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

// The CUDA runner's flow (cuda/src/quant_gru_cuda.cpp) with the GEMMs emulated on the host.
class EmulatedCudaLengthsRunner : public GruCellRunner {
 public:
  explicit EmulatedCudaLengthsRunner(const QuantizedGru& model) : model_(model) {}
  void run_cell(int layer, int direction, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, int32_t* out,
                int out_stride, int out_offset) override {
    const GruCellQuantParams& p = model_.cell(layer, direction);
    const TensorQuant& xq = p.q(GruTensor::x);
    const std::vector<int32_t> codes = kernels::emulate_gru_cell(p.view(), p.q_W.data(), p.q_R.data(), p.input_size,
                                                                 CodeSpace{xq.zp, xq.qmin(), xq.qmax()}, q_x, T, N,
                                                                 q_h.data(), direction == 1, lengths);
    store_cell_codes(codes, T, N, p.hidden_size, direction, q_h, out, out_stride, out_offset, lengths);
  }

 private:
  const QuantizedGru& model_;
};

// Every row of `batch` (run with `lengths`) against `alone(n)` (row n run over its own steps): the same values
// at valid steps, `zero` after them, and the same h_n.
template <class V, class Alone>
void check_rows_as_alone(const std::vector<V>& output, const std::vector<V>& h_n, const std::vector<int32_t>& lengths,
                         int T, int N, int F, int H, int cells, const std::vector<V>& zero_per_column, Alone alone,
                         const std::string& what) {
  for (int n = 0; n < N; ++n) {
    CAPTURE(what);
    CAPTURE(n);
    const int steps = lengths[static_cast<size_t>(n)];
    std::vector<V> out_alone, hn_alone;
    alone(n, steps, out_alone, hn_alone);
    for (int t = 0; t < T; ++t) {
      CAPTURE(t);
      for (int f = 0; f < F; ++f) {
        const V got = output[(static_cast<size_t>(t) * N + n) * F + f];
        const V want = t < steps ? out_alone[static_cast<size_t>(t) * F + f] : zero_per_column[static_cast<size_t>(f)];
        REQUIRE(got == want);
      }
    }
    for (int c = 0; c < cells; ++c) {
      for (int j = 0; j < H; ++j) REQUIRE(h_n[(static_cast<size_t>(c) * N + n) * H + j] == hn_alone[static_cast<size_t>(c) * H + j]);
    }
  }
}

}  // namespace

TEST_CASE("a padded row gets the codes it gets alone: reference, fast and emulated CUDA executors, float GRU (both cells)") {
  const int C = 3, H = 33, L = 2, D = 2, T = 7, N = 5;
  const std::vector<int32_t> lengths = {7, 3, 1, 0, 5};
  for (const char* preset : {"int8", "int16-activations"}) {
   for (bool linear_before_reset : {true, false}) {
    CAPTURE(preset);
    CAPTURE(linear_before_reset);
    const auto c = test::calibrated_case(C, H, L, D, T, N, load_bitwidth_config(preset), 4242, {}, linear_before_reset);
    const std::vector<float> h0 = test::random_input(static_cast<size_t>(L * D) * N * H, 99, 0.3f);
    const int F = D * H;
    const int cells = L * D;
    // Each row alone: its own steps, its own h0 rows.
    auto h0_of = [&](int n) {
      std::vector<float> rows;
      for (int cell = 0; cell < cells; ++cell) {
        const auto from = h0.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(cell) * N + n) * H);
        rows.insert(rows.end(), from, from + H);
      }
      return rows;
    };

    // Float GRU.
    const FloatGruResult f = run_float_gru(c.model, c.x.data(), T, N, h0.data(), nullptr, lengths.data());
    check_rows_as_alone<float>(f.output, f.h_n, lengths, T, N, F, H, cells, std::vector<float>(static_cast<size_t>(F), 0.0f),
                               [&](int n, int steps, std::vector<float>& out, std::vector<float>& hn) {
                                 if (steps == 0) {
                                   hn = h0_of(n);
                                   return;
                                 }
                                 const auto xs = test::sequence_alone(c.x, N, C, n, steps);
                                 const auto h0n = h0_of(n);
                                 const FloatGruResult r = run_float_gru(c.model, xs.data(), steps, 1, h0n.data());
                                 out = r.output;
                                 hn = r.h_n;
                               },
                               "float");

    // Integer executors: the reference alone is the specification of each row.
    const QuantizedGru& q = c.quantized;
    const std::vector<int32_t> q_x = quantize_values(q.input_quant(), c.x.data(), c.x.size());
    const std::vector<int32_t> q_h0 = quantize_initial_state(q, h0.data(), N);
    std::vector<int32_t> zp_out(static_cast<size_t>(F));
    for (int f2 = 0; f2 < F; ++f2) zp_out[static_cast<size_t>(f2)] = q.cell(L - 1, f2 / H).q(GruTensor::h).zp;
    auto alone = [&](int n, int steps, std::vector<int32_t>& out, std::vector<int32_t>& hn) {
      std::vector<int32_t> h0n;
      for (int cell = 0; cell < cells; ++cell) {
        const auto from = q_h0.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(cell) * N + n) * H);
        h0n.insert(h0n.end(), from, from + H);
      }
      if (steps == 0) {
        hn = h0n;
        return;
      }
      const auto xs = test::sequence_alone(q_x, N, C, n, steps);
      const QuantGruResult r = run_quantized_gru_codes(q, xs.data(), steps, 1, h0n.data());
      out = r.output_codes;
      hn = r.h_n_codes;
    };
    const QuantGruResult ref = run_quantized_gru_codes(q, q_x.data(), T, N, q_h0.data(), nullptr, lengths.data());
    check_rows_as_alone<int32_t>(ref.output_codes, ref.h_n_codes, lengths, T, N, F, H, cells, zp_out, alone, "reference");

    for (FastIsa isa : {FastIsa::Avx2, FastIsa::Avx512Vnni}) {
      FastExecutorOptions options;
      options.isa = isa;
      for (int threads : {1, 2}) {
        options.threads = threads;
        const FastQuantGru fast(q, options);
        const QuantGruResult r = fast.run_codes(q_x.data(), T, N, q_h0.data(), nullptr, lengths.data());
        CAPTURE(fast.support().reason);
        CHECK(r.output_codes == ref.output_codes);
        CHECK(r.h_n_codes == ref.h_n_codes);
      }
    }
    EmulatedCudaLengthsRunner cuda(q);
    const QuantGruResult emulated = run_layer_loop(q, q_x.data(), T, N, q_h0.data(), cuda, lengths.data());
    CHECK(emulated.output_codes == ref.output_codes);
    CHECK(emulated.h_n_codes == ref.h_n_codes);
    // Dequantized, the padding is exactly 0.0.
    CHECK(ref.output[(static_cast<size_t>(6) * N + 3) * F] == 0.0f);
   }
  }
}

TEST_CASE("the fast executor's float entry point drops the padding of short rows (batch-1 loop in registers, B-1 per step, float output from the time loop)") {
  // Shapes that take the fast path's other time loops: H = 64 at N = 1 (the whole loop in registers on the
  // avx512-vnni level), N = 9 (B-1 inside the loop, x quantized straight into operand bytes); the floats of
  // run() (dequantized by the time loop) against the reference's run_quantized_gru.
  // Named variables, not structured bindings: clang 14 cannot capture those in CAPTURE's lambda.
  for (const auto& shape : {std::tuple<int, int, std::vector<int32_t>>{64, 1, {5}},
                            std::tuple<int, int, std::vector<int32_t>>{32, 9, {12, 0, 3, 12, 7, 1, 12, 11, 6}},
                            std::tuple<int, int, std::vector<int32_t>>{128, 9, {12, 0, 3, 12, 7, 1, 12, 11, 6}}}) {
    const int H = std::get<0>(shape), N = std::get<1>(shape);
    const std::vector<int32_t>& lengths = std::get<2>(shape);
    CAPTURE(H);
    CAPTURE(N);
    const int T = 12;
    const auto c = test::calibrated_case(H, H, 1, 1, T, N, load_bitwidth_config("int8"), 77);
    const QuantGruResult ref = run_quantized_gru(c.quantized, c.x.data(), T, N, nullptr, nullptr, lengths.data());
    for (int threads : {1, 2}) {
      FastExecutorOptions options;
      options.threads = threads;
      const FastQuantGru fast(c.quantized, options);
      REQUIRE(fast.support().supported);
      const QuantGruResult r = fast.run(c.x.data(), T, N, nullptr, nullptr, lengths.data());
      CHECK(r.output_codes == ref.output_codes);
      CHECK(r.output == ref.output);
      CHECK(r.h_n_codes == ref.h_n_codes);
      CHECK(r.h_n == ref.h_n);
    }
  }
}

TEST_CASE("lengths outside [0, T] are refused, naming the row") {
  const auto c = test::calibrated_case(2, 3, 1, 1, 4, 2, load_bitwidth_config("int8"), 7);
  const std::vector<int32_t> bad = {4, 5};
  CHECK_THROWS_WITH_AS(run_quantized_gru(c.quantized, c.x.data(), 4, 2, nullptr, nullptr, bad.data()),
                       "sequence length 5 of row 1 is outside [0, T = 4]", Error);
  CHECK_THROWS_WITH_AS(run_float_gru(c.model, c.x.data(), 4, 2, nullptr, nullptr, bad.data()),
                       "sequence length 5 of row 1 is outside [0, T = 4]", Error);
}

}  // namespace qgru
