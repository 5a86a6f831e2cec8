// The CUDA float GRU's flow (cuda/src/float_gru_cuda.cu) on the host: its GEMM descriptors run by a plain GEMM
// that checks every access against the buffer it reads or writes, and its kernels' element functions, in the order
// FloatGruCuda::run issues them, against the CPU float executor (run_float_gru), for both cells, with and without
// h0 and sequence lengths. The R·h buffer is poisoned with NaN before every step, so a channel no GEMM wrote shows.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "qgru/kernels/float_gru_flow.h"
#include "qgru/model/float_gru.h"
#include "quant_test_support.h"

namespace k = qgru::kernels;

namespace {

// C[c_offset + i + ldc·j] = Σ_q A[a_offset + q + lda·i] · B[q + ldb·j], summed in double and rounded to float once
// (cuBLAS sums in float; the comparison's tolerance covers the difference), each access inside its buffer.
void run_gemm(const k::FloatGemm& g, const std::vector<float>& A, const float* B, size_t b_size, float* C,
              size_t c_size) {
  REQUIRE(g.m >= 1);
  REQUIRE(g.n >= 1);
  REQUIRE(g.k >= 1);
  REQUIRE(g.k <= g.lda);  // one weight row per i, no overlap
  REQUIRE(g.k <= g.ldb);
  REQUIRE(g.c_offset + g.m <= g.ldc);  // the columns written stay inside one output row
  REQUIRE(static_cast<size_t>(g.a_offset + g.lda * (g.m - 1) + g.k) <= A.size());
  REQUIRE(static_cast<size_t>(g.ldb * (g.n - 1) + g.k) <= b_size);
  REQUIRE(static_cast<size_t>(g.c_offset + g.ldc * (g.n - 1) + g.m) <= c_size);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      double sum = 0.0;
      for (int64_t q = 0; q < g.k; ++q) {
        sum += static_cast<double>(A[static_cast<size_t>(g.a_offset + q + g.lda * i)]) *
               static_cast<double>(B[static_cast<size_t>(q + g.ldb * j)]);
      }
      C[static_cast<size_t>(g.c_offset + i + g.ldc * j)] = static_cast<float>(sum);
    }
}

// FloatGruCuda::run's sequence on the host: per layer and direction the input GEMM over every step, then per step
// the hidden GEMM, (linear_before_reset = 0) the reset element over [N, H] and the reset GEMM, and the step element.
qgru::FloatGruResult run_flow(const qgru::FloatGruModel& model, const std::vector<float>& x, int T, int N,
                              const float* h0, const int32_t* lengths) {
  const int64_t H = model.hidden_size, D = model.num_directions, L = model.num_layers;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  qgru::FloatGruResult result;
  result.T = T;
  result.N = N;
  result.h_n.assign(static_cast<size_t>(L * D * N * H), nan);
  std::vector<float> layer_in = x, layer_out;
  std::vector<float> hh(static_cast<size_t>(N * 3 * H)), h(static_cast<size_t>(N * H)), reset_hidden(h.size());
  for (int64_t l = 0; l < L; ++l) {
    layer_out.assign(static_cast<size_t>(T * N * D * H), nan);
    for (int64_t dir = 0; dir < D; ++dir) {
      const int64_t cell_index = l * D + dir;
      const qgru::GruCellWeights& cell = model.cells[static_cast<size_t>(cell_index)];
      std::vector<float> ih(static_cast<size_t>(T * N * 3 * H), nan);
      run_gemm(k::float_gru_input_gemm(H, cell.input_size, static_cast<int64_t>(T) * N), cell.W, layer_in.data(),
               layer_in.size(), ih.data(), ih.size());
      for (size_t i = 0; i < h.size(); ++i) h[i] = h0 != nullptr ? h0[static_cast<size_t>(cell_index * N * H) + i] : 0.0f;
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = dir == 0 ? s : T - 1 - s;
        const float* ih_t = ih.data() + t * N * 3 * H;
        std::fill(hh.begin(), hh.end(), nan);
        run_gemm(k::float_gru_hidden_gemm(H, N, model.linear_before_reset), cell.R, h.data(), h.size(), hh.data(),
                 hh.size());
        if (!model.linear_before_reset) {
          std::fill(reset_hidden.begin(), reset_hidden.end(), nan);
          for (int64_t idx = 0; idx < N * H; ++idx) {
            k::float_gru_reset_hidden_at(idx, H, ih_t, hh.data(), cell.bw.data(), cell.br.data(), h.data(),
                                         reset_hidden.data());
          }
          run_gemm(k::float_gru_reset_gemm(H, N), cell.R, reset_hidden.data(), reset_hidden.size(), hh.data(), hh.size());
        }
        for (int64_t idx = 0; idx < N * H; ++idx) {
          k::float_gru_step_at(idx, H, ih_t, hh.data(), cell.bw.data(), cell.br.data(), h.data(),
                               layer_out.data() + t * N * D * H, D * H, dir * H, model.linear_before_reset, lengths, t);
        }
      }
      std::copy(h.begin(), h.end(), result.h_n.begin() + cell_index * N * H);
    }
    layer_in.swap(layer_out);
  }
  result.output = layer_in;
  return result;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= worst)) worst = d;  // NaN wins
  }
  return worst;
}

}  // namespace

TEST_CASE("the CUDA float GRU's flow (GEMM descriptors and elements) computes run_float_gru's GRU, both cells") {
  struct Shape {
    int C, H, T, N;
  };
  for (const Shape s : {Shape{5, 7, 6, 3}, Shape{3, 1, 4, 2}, Shape{2, 16, 5, 1}}) {
    for (const bool linear_before_reset : {true, false}) {
      for (int variant = 0; variant < 3; ++variant) {  // 0: plain; 1: h0; 2: h0 and lengths (T, 0, 1, ...)
        CAPTURE(s.C);
        CAPTURE(s.H);
        CAPTURE(linear_before_reset);
        CAPTURE(variant);
        const int L = 2, D = 2;
        qgru::FloatGruModel model = qgru::test::random_float_gru(s.C, s.H, L, D, 70u + static_cast<uint32_t>(s.H));
        model.linear_before_reset = linear_before_reset;
        const std::vector<float> x = qgru::test::random_input(static_cast<size_t>(s.T * s.N * s.C), 71u);
        std::vector<float> h0;
        if (variant >= 1) h0 = qgru::test::random_input(static_cast<size_t>(L * D * s.N * s.H), 72u, 0.5f);
        std::vector<int32_t> lengths;
        if (variant == 2) {
          for (int n = 0; n < s.N; ++n) lengths.push_back(n == 0 ? s.T : (n - 1) % (s.T + 1));
        }
        const float* h0_data = h0.empty() ? nullptr : h0.data();
        const int32_t* lengths_data = lengths.empty() ? nullptr : lengths.data();
        const qgru::FloatGruResult cpu = qgru::run_float_gru(model, x.data(), s.T, s.N, h0_data, nullptr, lengths_data);
        const qgru::FloatGruResult flow = run_flow(model, x, s.T, s.N, h0_data, lengths_data);
        // The GEMMs round their sums to float before the bias is added, where the CPU rounds once: a few float ulps.
        CHECK(max_abs_diff(flow.output, cpu.output) <= 1e-5);
        CHECK(max_abs_diff(flow.h_n, cpu.h_n) <= 1e-5);
      }
    }
  }
}

TEST_CASE("the float flow's GEMMs: the hidden GEMM leaves the n channels to the reset GEMM exactly when lbr = 0") {
  const int64_t H = 9, N = 4;
  const k::FloatGemm all = k::float_gru_hidden_gemm(H, N, true), zr = k::float_gru_hidden_gemm(H, N, false);
  const k::FloatGemm reset = k::float_gru_reset_gemm(H, N);
  CHECK(all.m == 3 * H);
  CHECK(zr.m == 2 * H);
  // Together the two GEMMs of the lbr = 0 cell write every channel of an R·h row once: [0, 2H) and [2H, 3H).
  CHECK(reset.c_offset == zr.c_offset + zr.m);
  CHECK(reset.c_offset + reset.m == all.ldc);
  CHECK(zr.ldc == reset.ldc);
  // ... from R's rows [0, 2H) and [2H, 3H).
  CHECK(reset.a_offset == zr.m * zr.lda);
  CHECK(reset.a_offset + reset.m * reset.lda == 3 * H * H);
}
