// The float executor against an independent float64 GRU (pytorch_reference.h: PyTorch's equations, and Keras's
// reset_after=False ones for the linear_before_reset = 0 cell), and its properties: reverse direction = forward on
// reversed time, observer views that recompute the step exactly.
#include <doctest/doctest.h>

#include <cmath>

#include "pytorch_reference.h"
#include "qgru/model/float_gru.h"
#include "qgru/model/float_gru_cell.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/io/sequence_io.h"

using qgru_test::GruShape;

namespace {

struct Case {
  GruShape shape;
  int T, N;
  bool with_h0;
};

void check_against_reference(const Case& c, unsigned seed, bool linear_before_reset = true) {
  const auto sd = qgru_test::random_pytorch_gru(c.shape, seed);
  auto model = qgru::float_gru_from_tensors(sd, qgru::WeightLayout::Auto, "memory");
  model.linear_before_reset = linear_before_reset;
  const auto x = qgru_test::random_values(static_cast<size_t>(c.T * c.N * c.shape.C), seed + 1);
  std::vector<float> h0;
  if (c.with_h0) {
    h0 = qgru_test::random_values(static_cast<size_t>(c.shape.L * c.shape.D * c.N * c.shape.H), seed + 2, 0.5f);
  }
  const auto result = qgru::run_float_gru(model, x.data(), c.T, c.N, c.with_h0 ? h0.data() : nullptr);
  const auto reference = qgru_test::reference_pytorch_gru(sd, c.shape, x, c.T, c.N, h0, linear_before_reset);
  CAPTURE(linear_before_reset);
  CAPTURE(c.shape.C);
  CAPTURE(c.shape.H);
  CAPTURE(c.shape.L);
  CAPTURE(c.shape.D);
  CAPTURE(c.T);
  CAPTURE(c.N);
  REQUIRE(result.T == c.T);
  REQUIRE(result.N == c.N);
  REQUIRE(result.output.size() == static_cast<size_t>(c.T * c.N * c.shape.D * c.shape.H));
  REQUIRE(result.h_n.size() == static_cast<size_t>(c.shape.L * c.shape.D * c.N * c.shape.H));
  const std::vector<int64_t> y_shape{c.T, c.N, c.shape.D * c.shape.H};
  const std::vector<int64_t> hn_shape{c.shape.L * c.shape.D, c.N, c.shape.H};
  CHECK_MESSAGE(qgru_test::max_abs_diff(result.output, reference.output) <= 1e-5,
                qgru_test::first_mismatch(result.output, reference.output, 1e-5, y_shape, "[t, n, channel]"));
  CHECK_MESSAGE(qgru_test::max_abs_diff(result.h_n, reference.h_n) <= 1e-5,
                qgru_test::first_mismatch(result.h_n, reference.h_n, 1e-5, hn_shape, "[layer*D+direction, n, channel]"));
  // The outputs are not trivially small (a GRU that outputs zeros would pass a tolerance check).
  double norm = 0.0;
  for (float v : result.output) norm += std::fabs(v);
  CHECK(norm > 1e-3 * static_cast<double>(result.output.size()));
}

}  // namespace

TEST_CASE("float GRU matches a float64 PyTorch-equation GRU on edge shapes") {
  const Case cases[] = {
      {{5, 8, 1, 1}, 7, 3, false},  {{5, 8, 2, 1}, 6, 2, false},  {{4, 6, 1, 2}, 5, 3, false},
      {{4, 6, 2, 2}, 5, 2, true},   {{3, 1, 1, 1}, 9, 4, true},   {{7, 31, 1, 1}, 4, 3, false},
      {{7, 33, 2, 2}, 3, 5, true},  {{2, 32, 3, 1}, 1, 1, false}, {{6, 5, 1, 2}, 1, 7, true},
      {{1, 1, 2, 2}, 8, 1, true},
  };
  unsigned seed = 100;
  for (const Case& c : cases) check_against_reference(c, seed += 10);
}

TEST_CASE("the linear_before_reset = 0 float GRU matches a float64 Keras reset_after=False GRU on edge shapes") {
  const Case cases[] = {
      {{5, 8, 1, 1}, 7, 3, false}, {{4, 6, 2, 2}, 5, 2, true}, {{3, 1, 1, 1}, 9, 4, true},
      {{7, 33, 2, 2}, 3, 5, true}, {{2, 32, 3, 1}, 1, 1, false}, {{1, 1, 2, 2}, 8, 1, true},
  };
  unsigned seed = 300;
  for (const Case& c : cases) check_against_reference(c, seed += 10, /*linear_before_reset=*/false);
  // The two cells differ on these weights (the comparison above could tell them apart).
  const Case c = cases[1];
  const auto sd = qgru_test::random_pytorch_gru(c.shape, 777);
  const auto x = qgru_test::random_values(static_cast<size_t>(c.T * c.N * c.shape.C), 778);
  const auto keras = qgru_test::reference_pytorch_gru(sd, c.shape, x, c.T, c.N, {}, false);
  const auto pytorch = qgru_test::reference_pytorch_gru(sd, c.shape, x, c.T, c.N, {}, true);
  CHECK(qgru_test::max_abs_diff(keras.output, pytorch.output) > 1e-3);
}

TEST_CASE("a batch row computes bit for bit what the same row computes in any other place of the batch") {
  // The linear layers run four batch rows at a time where the CPU has AVX2 and the rows left one at a time: row 4
  // of a batch of 5 takes the one-row path in every step's R·h, row 0 the four-row one. Each is the same chain of
  // double products and sums in the same order, so a copy of row 0
  // placed at row 4 gives bit-identical outputs and final states, for both cells, through two layers (H = 29:
  // 3H = 87 outputs, ten blocks of 8 and a tail of 7; K = 37, 29 and 58). (A product of two floats is exact in
  // double, so fused multiply-adds would give the same sums; a sum in another order differs in its last bits,
  // which the rounding to float hides almost always. What fails this is a wrong row, weight or term.)
  const GruShape shape{37, 29, 2, 2};
  const int T = 3, N = 5, C = shape.C, H = shape.H, LD = shape.L * shape.D;
  for (bool linear_before_reset : {true, false}) {
    CAPTURE(linear_before_reset);
    const auto sd = qgru_test::random_pytorch_gru(shape, 31);
    auto model = qgru::float_gru_from_tensors(sd, qgru::WeightLayout::Auto, "memory");
    model.linear_before_reset = linear_before_reset;
    auto x = qgru_test::random_values(static_cast<size_t>(T * N * C), 32);
    auto h0 = qgru_test::random_values(static_cast<size_t>(LD * N * H), 33, 0.5f);
    for (int t = 0; t < T; ++t) {
      for (int c = 0; c < C; ++c) x[static_cast<size_t>((t * N + 4) * C + c)] = x[static_cast<size_t>((t * N) * C + c)];
    }
    for (int cell = 0; cell < LD; ++cell) {
      for (int j = 0; j < H; ++j) h0[static_cast<size_t>((cell * N + 4) * H + j)] = h0[static_cast<size_t>((cell * N) * H + j)];
    }
    const auto result = qgru::run_float_gru(model, x.data(), T, N, h0.data());
    const int F = shape.D * H;
    for (int t = 0; t < T; ++t) {
      for (int f = 0; f < F; ++f) {
        REQUIRE(result.output[static_cast<size_t>((t * N + 4) * F + f)] == result.output[static_cast<size_t>((t * N) * F + f)]);
      }
    }
    for (int cell = 0; cell < LD; ++cell) {
      for (int j = 0; j < H; ++j) {
        REQUIRE(result.h_n[static_cast<size_t>((cell * N + 4) * H + j)] == result.h_n[static_cast<size_t>((cell * N) * H + j)]);
      }
    }
  }
}

TEST_CASE("reverse direction equals the forward cell on the time-reversed sequence") {
  const GruShape shape{3, 5, 1, 2};
  const int T = 6, N = 2;
  const auto sd = qgru_test::random_pytorch_gru(shape, 7);
  const auto bidirectional = qgru::float_gru_from_tensors(sd, qgru::WeightLayout::PyTorch, "memory");
  qgru::FloatGruModel backward_only = bidirectional;
  backward_only.num_directions = 1;
  backward_only.cells = {bidirectional.cell(0, 1)};
  const auto x = qgru_test::random_values(static_cast<size_t>(T * N * shape.C), 8);
  std::vector<float> x_reversed(x.size());
  const size_t step = static_cast<size_t>(N * shape.C);
  for (int t = 0; t < T; ++t) {
    std::copy(x.begin() + static_cast<std::ptrdiff_t>(t * step), x.begin() + static_cast<std::ptrdiff_t>((t + 1) * step),
              x_reversed.begin() + static_cast<std::ptrdiff_t>((T - 1 - t) * step));
  }
  const auto both = qgru::run_float_gru(bidirectional, x.data(), T, N, nullptr);
  const auto single = qgru::run_float_gru(backward_only, x_reversed.data(), T, N, nullptr);
  const int H = shape.H;
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < N; ++n) {
      for (int j = 0; j < H; ++j) {
        const float from_both = both.output[static_cast<size_t>((t * N + n) * 2 * H + H + j)];
        const float from_single = single.output[static_cast<size_t>(((T - 1 - t) * N + n) * H + j)];
        REQUIRE(from_both == from_single);  // same arithmetic in the same order: bit-identical
      }
    }
  }
  for (size_t i = 0; i < single.h_n.size(); ++i) REQUIRE(both.h_n[single.h_n.size() + i] == single.h_n[i]);
}

namespace {

// Recomputes every step from its view (float64, from the view's own inputs) and records the visiting order.
struct CheckingObserver : qgru::FloatGruObserver {
  const qgru::FloatGruModel* model = nullptr;
  std::vector<std::tuple<int, int, int>> visits;
  std::vector<float> last_h_new;  // of (layer 0, direction 0, t = T-1)
  double worst = 0.0;

  void on_step(const qgru::FloatStepView& v) override {
    visits.emplace_back(v.layer, v.direction, v.t);
    const auto& cell = model->cell(v.layer, v.direction);
    REQUIRE(v.input_size == cell.input_size);
    REQUIRE(v.hidden_size == cell.hidden_size);
    const int H = v.hidden_size, C = v.input_size;
    auto sigmoid = [](double a) { return 1.0 / (1.0 + std::exp(-a)); };
    auto note = [&](double expected, float got) { worst = std::max(worst, std::fabs(expected - got)); };
    for (int n = 0; n < v.batch; ++n) {
      for (int g = 0; g < 3 * H; ++g) {
        double ih = cell.bw[g], hh = cell.br[g];
        for (int c = 0; c < C; ++c) ih += static_cast<double>(cell.W[g * C + c]) * v.x[n * C + c];
        for (int k = 0; k < H; ++k) hh += static_cast<double>(cell.R[g * H + k]) * v.h_prev[n * H + k];
        note(ih, v.weight_ih_linear[n * 3 * H + g]);
        note(hh, v.weight_hh_linear[n * 3 * H + g]);
      }
      for (int j = 0; j < H; ++j) {
        const float* ih = v.weight_ih_linear + n * 3 * H;
        const float* hh = v.weight_hh_linear + n * 3 * H;
        const int i = n * H + j;
        note(static_cast<double>(ih[j]) + hh[j], v.update_gate_input[i]);
        note(sigmoid(v.update_gate_input[i]), v.update_gate_output[i]);
        note(static_cast<double>(ih[H + j]) + hh[H + j], v.reset_gate_input[i]);
        note(sigmoid(v.reset_gate_input[i]), v.reset_gate_output[i]);
        note(static_cast<double>(ih[2 * H + j]) + static_cast<double>(v.reset_gate_output[i]) * hh[2 * H + j],
             v.new_gate_input[i]);
        note(std::tanh(static_cast<double>(v.new_gate_input[i])), v.new_gate_output[i]);
        const double z = v.update_gate_output[i];
        note(z * v.h_prev[i] + (1.0 - z) * v.new_gate_output[i], v.h_new[i]);
      }
    }
  }
};

}  // namespace

TEST_CASE("observer sees every (layer, direction, t) once with views that recompute the step") {
  const GruShape shape{4, 7, 2, 2};
  const int T = 5, N = 3;
  const auto sd = qgru_test::random_pytorch_gru(shape, 21);
  const auto model = qgru::float_gru_from_tensors(sd, qgru::WeightLayout::Auto, "memory");
  const auto x = qgru_test::random_values(static_cast<size_t>(T * N * shape.C), 22);
  const auto h0 = qgru_test::random_values(static_cast<size_t>(shape.L * shape.D * N * shape.H), 23, 0.3f);
  CheckingObserver observer;
  observer.model = &model;
  const auto result = qgru::run_float_gru(model, x.data(), T, N, h0.data(), &observer);
  // Each value is one float rounding of a float64 expression of the view's floats: within a few ulp.
  CHECK(observer.worst <= 1e-6);
  std::vector<std::tuple<int, int, int>> expected;
  for (int layer = 0; layer < shape.L; ++layer) {
    for (int d = 0; d < shape.D; ++d) {
      for (int step = 0; step < T; ++step) expected.emplace_back(layer, d, d == 0 ? step : T - 1 - step);
    }
  }
  CHECK(observer.visits == expected);
  // The observed run is the unobserved run.
  const auto plain = qgru::run_float_gru(model, x.data(), T, N, h0.data());
  CHECK(plain.output == result.output);
  CHECK(plain.h_n == result.h_n);
}

TEST_CASE("observer's first step of each cell starts from h0 and sees the layer's own input") {
  const GruShape shape{2, 3, 2, 1};
  const int T = 2, N = 1;
  const auto sd = qgru_test::random_pytorch_gru(shape, 31);
  const auto model = qgru::float_gru_from_tensors(sd, qgru::WeightLayout::Auto, "memory");
  const auto x = qgru_test::random_values(static_cast<size_t>(T * N * shape.C), 32);
  const auto h0 = qgru_test::random_values(static_cast<size_t>(shape.L * N * shape.H), 33);
  struct Recorder : qgru::FloatGruObserver {
    std::vector<std::vector<float>> h_prev, x;
    void on_step(const qgru::FloatStepView& v) override {
      h_prev.emplace_back(v.h_prev, v.h_prev + v.batch * v.hidden_size);
      x.emplace_back(v.x, v.x + v.batch * v.input_size);
    }
  } recorder;
  const auto result = qgru::run_float_gru(model, x.data(), T, N, h0.data(), &recorder);
  REQUIRE(recorder.h_prev.size() == 4);
  CHECK(recorder.h_prev[0] == std::vector<float>(h0.begin(), h0.begin() + 3));
  CHECK(recorder.h_prev[2] == std::vector<float>(h0.begin() + 3, h0.end()));
  CHECK(recorder.x[0] == std::vector<float>(x.begin(), x.begin() + 2));
  // Layer 1 at t = 1 reads layer 0's output at t = 1, which the final layer-0 state equals.
  CHECK(recorder.x[3] == std::vector<float>(result.h_n.begin(), result.h_n.begin() + 3));
}

TEST_CASE("run_float_gru refuses empty sequences and inconsistent models") {
  const auto sd = qgru_test::random_pytorch_gru({2, 3, 1, 1}, 41);
  auto model = qgru::float_gru_from_tensors(sd, qgru::WeightLayout::Auto, "memory");
  const std::vector<float> x(6, 0.5f);
  CHECK_THROWS_AS(qgru::run_float_gru(model, x.data(), 0, 1, nullptr), qgru::Error);
  CHECK_THROWS_AS(qgru::run_float_gru(model, x.data(), 1, 0, nullptr), qgru::Error);
  model.cells[0].R.pop_back();
  CHECK_THROWS_WITH_AS(qgru::run_float_gru(model, x.data(), 1, 1, nullptr),
                       "float GRU model: cell (layer 0, direction 0) does not have the sizes of C = 2, H = 3",
                       qgru::Error);
}

TEST_CASE("swap_first_two_axes moves [N, T, C] to [T, N, C] and back") {
  std::vector<float> ntc(2 * 3 * 4);
  for (size_t i = 0; i < ntc.size(); ++i) ntc[i] = static_cast<float>(i);
  const auto tnc = qgru::swap_first_two_axes(ntc, 2, 3, 4);
  for (int n = 0; n < 2; ++n) {
    for (int t = 0; t < 3; ++t) {
      for (int c = 0; c < 4; ++c) REQUIRE(tnc[(t * 2 + n) * 4 + c] == ntc[(n * 3 + t) * 4 + c]);
    }
  }
  CHECK(qgru::swap_first_two_axes(tnc, 3, 2, 4) == ntc);
  CHECK_THROWS_AS(qgru::swap_first_two_axes(ntc, 5, 3, 4), qgru::Error);
}

TEST_CASE("huge pre-activations saturate the gates instead of producing NaN") {
  // H = 1, C = 1: W = 1e30 (every gate), no bias. x = +1: z = r = 1, n = 1 -> h' = h. x = -1: z = 0, n = -1.
  qgru::FloatGruModel model;
  model.input_size = 1;
  model.hidden_size = 1;
  model.num_layers = 1;
  qgru::GruCellWeights cell;
  cell.input_size = 1;
  cell.hidden_size = 1;
  cell.W = {1e30f, 1e30f, 1e30f};
  cell.R = {0.5f, 0.5f, 0.5f};
  cell.bw = {0, 0, 0};
  cell.br = {0, 0, 0};
  model.cells = {cell};
  const std::vector<float> x{-1.0f, 1.0f, 1.0f};
  const float h0 = 0.25f;
  const auto result = qgru::run_float_gru(model, x.data(), 3, 1, &h0);
  // t = 0: z = σ(-1e30 + 0.125) = 0, n = tanh(-1e30 + r * 0.125) = -1 -> h = -1. Then z = 1 keeps h.
  CHECK(result.output == std::vector<float>{-1.0f, -1.0f, -1.0f});
  CHECK(result.h_n == std::vector<float>{-1.0f});
}

TEST_CASE("the reset_hidden element is f(f(sigmoid(f(ih_r + hh_r))) * h) in float64, and the cell element's own gate") {
  // The linear_before_reset = 0 cell's r ⊙ h, which the CPU executor and the CUDA float kernel both compute through
  // float_gru_reset_hidden: against the rounding contract spelled out in float64 here, over inputs that cross
  // zero, saturate the gate and hit h = 0 and |h| = 1.
  const float values[] = {-40.0f, -3.5f, -1.0f, -0.3f, -1e-6f, 0.0f, 2e-7f, 0.25f, 1.0f, 4.75f, 30.0f};
  const float states[] = {-1.0f, -0.6f, 0.0f, 1e-5f, 0.5f, 1.0f};
  for (const float ih_r : values)
    for (const float hh_r : values)
      for (const float h : states) {
        const float gate_input = static_cast<float>(static_cast<double>(ih_r) + static_cast<double>(hh_r));
        const float gate = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(gate_input))));
        const float expected = static_cast<float>(static_cast<double>(gate) * static_cast<double>(h));
        CAPTURE(ih_r);
        CAPTURE(hh_r);
        CAPTURE(h);
        CHECK(qgru::float_gru_reset_hidden(ih_r, hh_r, h) == expected);
        const qgru::FloatGruElement e = qgru::float_gru_cell_element(0.0f, ih_r, 0.0f, 0.0f, hh_r, 0.0f, h, false);
        CHECK(qgru::float_gru_reset_gate_output(ih_r, hh_r) == e.reset_gate_output);
      }
}
