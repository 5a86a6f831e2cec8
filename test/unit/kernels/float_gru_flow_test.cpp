// The CUDA float GRU's flow (cuda/src/float_gru_cuda.cu) on the host: kernels::float_gru_flow, the sequence
// FloatGruCuda::run issues, with host operations in place of cuBLAS and the kernels (a plain GEMM that checks every
// access against the buffer it reads or writes, the kernels' element functions), against the CPU float executor
// (run_float_gru), for both cells, with and without h0 and sequence lengths. Every buffer starts as NaN and R·h and
// r ⊙ h are poisoned again after each step, so a channel no operation wrote shows.
#include <doctest/doctest.h>

#include <algorithm>
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

// FloatGruCuda::run on the host: kernels::float_gru_flow (the .cu's own sequence) with host operations. Every
// buffer is its own vector, poisoned with NaN (R·h and r ⊙ h again after each step), and every operand must lie
// inside one of them.
struct HostOps {
  const qgru::FloatGruModel& model;
  const float* h0;
  const int32_t* lengths;
  int64_t N, H;
  // The call's buffers, for the bounds of each operand: layer_in, layer_out, ih, hh, h, reset_hidden.
  std::vector<std::vector<float>*> buffers;
  std::vector<float> h_n;

  // The buffer `p` points into and how many floats it has from p on.
  size_t extent(const float* p) const {
    for (const std::vector<float>* b : buffers) {
      if (p >= b->data() && p < b->data() + b->size()) return static_cast<size_t>(b->data() + b->size() - p);
    }
    FAIL("an operand outside every buffer of the call");
    return 0;
  }
  void gemm(int64_t cell, k::FloatGruWeights which, const k::FloatGemm& g, const float* B, float* C) {
    const qgru::GruCellWeights& w = model.cells[static_cast<size_t>(cell)];
    run_gemm(g, which == k::FloatGruWeights::W ? w.W : w.R, B, extent(B), C, extent(C));
  }
  void load_state(int64_t cell, float* h) {
    for (int64_t i = 0; i < N * H; ++i) h[i] = h0 != nullptr ? h0[cell * N * H + i] : 0.0f;
  }
  void reset_hidden(const float* ih_t, const float* hh, const float* h, float* out, int64_t cell) {
    const qgru::GruCellWeights& w = model.cells[static_cast<size_t>(cell)];
    REQUIRE(extent(out) >= static_cast<size_t>(N * H));
    for (int64_t idx = 0; idx < N * H; ++idx) k::float_gru_reset_hidden_at(idx, H, ih_t, hh, w.bw.data(), w.br.data(), h, out);
  }
  void step(const float* ih_t, const float* hh, float* h, float* out_t, int64_t out_stride, int64_t out_offset, int64_t t,
            int64_t cell) {
    const qgru::GruCellWeights& w = model.cells[static_cast<size_t>(cell)];
    REQUIRE(extent(ih_t) >= static_cast<size_t>(N * 3 * H));
    REQUIRE(extent(out_t) >= static_cast<size_t>((N - 1) * out_stride + out_offset + H));
    for (int64_t idx = 0; idx < N * H; ++idx) {
      k::float_gru_step_at(idx, H, ih_t, hh, w.bw.data(), w.br.data(), h, out_t, out_stride, out_offset,
                           model.linear_before_reset, lengths, t);
    }
    // The step's R·h and r ⊙ h are spent: NaN again, so a channel the next step's GEMMs leave unwritten shows.
    for (std::vector<float>* spent : {buffers[3], buffers[5]}) std::fill(spent->begin(), spent->end(), std::nanf(""));
  }
  void save_state(int64_t cell, const float* h) { std::copy(h, h + N * H, h_n.begin() + cell * N * H); }
};

qgru::FloatGruResult run_flow(const qgru::FloatGruModel& model, const std::vector<float>& x, int T, int N,
                              const float* h0, const int32_t* lengths) {
  const int64_t H = model.hidden_size, D = model.num_directions, L = model.num_layers, C = model.input_size;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t width = static_cast<size_t>(std::max<int64_t>(C, D * H));
  std::vector<float> layer_in(static_cast<size_t>(T) * N * width, nan), layer_out(layer_in.size(), nan);
  std::copy(x.begin(), x.end(), layer_in.begin());
  std::vector<float> ih(static_cast<size_t>(T * N * 3 * H), nan), hh(static_cast<size_t>(N * 3 * H), nan);
  std::vector<float> h(static_cast<size_t>(N * H), nan), reset_hidden(h.size(), nan);
  HostOps ops{model, h0, lengths, N, H, {&layer_in, &layer_out, &ih, &hh, &h, &reset_hidden},
              std::vector<float>(static_cast<size_t>(L * D * N * H), nan)};
  const k::FloatGruFlowBuffers buffers{layer_in.data(), layer_out.data(), ih.data(), hh.data(), h.data(),
                                       reset_hidden.data()};
  const float* output = k::float_gru_flow(C, H, L, D, T, N, model.linear_before_reset, buffers, ops);
  qgru::FloatGruResult result;
  result.T = T;
  result.N = N;
  result.output.assign(output, output + static_cast<size_t>(T * N * D * H));
  result.h_n = ops.h_n;
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
