// The float GRU reference executor (haste's formulation, qgru/gru_tensors.h, and the linear_before_reset = false
// cell of FloatGruModel).
//
// Numerics: every dot product and bias sum is accumulated in double and rounded to float once; each later
// quantity is computed in double from the float values stored before it (the ones an observer sees), so a
// step can be recomputed exactly from its FloatStepView. Layer l + 1 reads layer l's output
// [T, N, D*H] ([forward, backward] concatenated, as PyTorch).
//
// Speed: W x + bw for all T*N rows of a cell is computed before its time loop (W and R are transposed once
// per cell so that the inner loops run over contiguous outputs); the time loop does R h + br and the
// elementwise gate math on buffers allocated once per call: nothing is allocated inside it. Where the CPU has
// AVX2, the linear layers take four rows at a time (linear_block4_avx2: each weight vector converted once for
// four rows; the same sums bit for bit). The test reference (test/unit/support/pytorch_reference.h) is the
// plain scalar form of the same equations.
#include <algorithm>
#include <cmath>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "qgru/model/float_gru.h"
#include "qgru/model/float_gru_cell.h"

namespace qgru {
namespace {

// out[row, g] = sum_k in[row, k] * Mt[k, g] + bias[g] for rows in [0, rows), accumulated in double in the
// order k = 0 .. K-1 (each output its own sum, every product and sum rounded as written: no FMA, no
// reordering), then rounded to float once. in [rows, K]; Mt [K, G] is the weight matrix transposed so that a
// block of 8 outputs reads contiguous weights and keeps its sums in registers over the whole k loop.
// The SSE2 block computes exactly what the scalar loop computes, two lanes at a time.
constexpr size_t kBlock = 8;

void linear_block(const float* in_row, const float* Mt_g0, size_t G, size_t K, double* sum) {
#if defined(__SSE2__)
  __m128d s0 = _mm_setzero_pd(), s1 = _mm_setzero_pd(), s2 = _mm_setzero_pd(), s3 = _mm_setzero_pd();
  for (size_t k = 0; k < K; ++k) {
    const __m128d a = _mm_set1_pd(static_cast<double>(in_row[k]));
    const float* M_k = Mt_g0 + k * G;
    const __m128 lo = _mm_loadu_ps(M_k), hi = _mm_loadu_ps(M_k + 4);
    s0 = _mm_add_pd(s0, _mm_mul_pd(a, _mm_cvtps_pd(lo)));
    s1 = _mm_add_pd(s1, _mm_mul_pd(a, _mm_cvtps_pd(_mm_movehl_ps(lo, lo))));
    s2 = _mm_add_pd(s2, _mm_mul_pd(a, _mm_cvtps_pd(hi)));
    s3 = _mm_add_pd(s3, _mm_mul_pd(a, _mm_cvtps_pd(_mm_movehl_ps(hi, hi))));
  }
  _mm_storeu_pd(sum, s0);
  _mm_storeu_pd(sum + 2, s1);
  _mm_storeu_pd(sum + 4, s2);
  _mm_storeu_pd(sum + 6, s3);
#else
  std::fill(sum, sum + kBlock, 0.0);
  for (size_t k = 0; k < K; ++k) {
    const double a = static_cast<double>(in_row[k]);
    for (size_t i = 0; i < kBlock; ++i) sum[i] += a * static_cast<double>(Mt_g0[k * G + i]);  // sum += a * M_k
  }
#endif
}

// One block's outputs from its double sums: out_row[g0 + i] = float(sum[i] + bias[g0 + i]) (one rounding to float).
void store_block(const double* sum, const std::vector<float>& bias, size_t g0, float* out_row) {
  for (size_t i = 0; i < kBlock; ++i) out_row[g0 + i] = static_cast<float>(sum[i] + static_cast<double>(bias[g0 + i]));
}

// The outputs g in [G_begin, G) of one row (those after the last whole block), one sum at a time.
void linear_tail(const float* in_row, const std::vector<float>& Mt, const std::vector<float>& bias, size_t K,
                 size_t G_begin, float* out_row) {
  const size_t G = bias.size();
  for (size_t g = G_begin; g < G; ++g) {
    double tail = 0.0;
    for (size_t k = 0; k < K; ++k) tail += static_cast<double>(in_row[k]) * static_cast<double>(Mt[k * G + g]);
    out_row[g] = static_cast<float>(tail + static_cast<double>(bias[g]));
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QGRU_FLOAT_GRU_AVX2 1
// linear_block for four rows at once, four doubles per register: sum[r][i] = Σ_k in[r·K + k]·Mt_g0[k·G + i],
// each output its own chain of products and sums in the order k = 0 .. K-1, as linear_block computes it (the
// target enables AVX2 alone, not FMA, so no multiply and add are fused). Each converted weight vector serves four
// rows: eight multiplies and eight adds per k against two conversions, where the one-row block does two of each.
__attribute__((target("avx2"))) void linear_block4_avx2(const float* in, size_t K, const float* Mt_g0, size_t G,
                                                          double (*sum)[kBlock]) {
  __m256d s[4][2];
  for (auto& row : s) row[0] = row[1] = _mm256_setzero_pd();
  for (size_t k = 0; k < K; ++k) {
    const float* M_k = Mt_g0 + k * G;
    const __m256d m0 = _mm256_cvtps_pd(_mm_loadu_ps(M_k)), m1 = _mm256_cvtps_pd(_mm_loadu_ps(M_k + 4));
    for (size_t r = 0; r < 4; ++r) {
      const __m256d a = _mm256_set1_pd(static_cast<double>(in[r * K + k]));
      s[r][0] = _mm256_add_pd(s[r][0], _mm256_mul_pd(a, m0));
      s[r][1] = _mm256_add_pd(s[r][1], _mm256_mul_pd(a, m1));
    }
  }
  for (size_t r = 0; r < 4; ++r) {
    _mm256_storeu_pd(sum[r], s[r][0]);
    _mm256_storeu_pd(sum[r] + 4, s[r][1]);
  }
}

bool cpu_has_avx2_for_float_gru() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

void linear_rows(const float* in, size_t rows, const std::vector<float>& Mt, const std::vector<float>& bias,
                 size_t K, float* out) {
  const size_t G = bias.size();
  const size_t G_blocked = G - G % kBlock;
  size_t row = 0;
#if defined(QGRU_FLOAT_GRU_AVX2)
  if (cpu_has_avx2_for_float_gru() && G_blocked > 0) {
    // Four rows at a time through the AVX2 block (the same sums as below, bit for bit), then the rows left.
    for (; row + 4 <= rows; row += 4) {
      double sum[4][kBlock];
      for (size_t g0 = 0; g0 < G_blocked; g0 += kBlock) {
        linear_block4_avx2(in + row * K, K, Mt.data() + g0, G, sum);
        for (size_t r = 0; r < 4; ++r) store_block(sum[r], bias, g0, out + (row + r) * G);
      }
      for (size_t r = 0; r < 4; ++r) linear_tail(in + (row + r) * K, Mt, bias, K, G_blocked, out + (row + r) * G);
    }
  }
#endif
  for (; row < rows; ++row) {
    const float* in_row = in + row * K;
    float* out_row = out + row * G;
    double sum[kBlock];
    for (size_t g0 = 0; g0 < G_blocked; g0 += kBlock) {
      linear_block(in_row, Mt.data() + g0, G, K, sum);
      store_block(sum, bias, g0, out_row);
    }
    linear_tail(in_row, Mt, bias, K, G_blocked, out_row);
  }
}

// [G, K] -> [K, G].
std::vector<float> transposed(const std::vector<float>& M, size_t G, size_t K) {
  std::vector<float> Mt(M.size());
  for (size_t g = 0; g < G; ++g) {
    for (size_t k = 0; k < K; ++k) Mt[k * G + g] = M[g * K + k];
  }
  return Mt;
}

// Per-step buffers of one cell, [N, H] each except the recurrent linear [N, 3H].
struct StepBuffers {
  std::vector<float> h_prev, h_new, weight_hh_linear;
  std::vector<float> update_gate_input, update_gate_output, reset_gate_input, reset_gate_output;
  std::vector<float> new_gate_input, new_gate_output;

  StepBuffers(size_t N, size_t H)
      : h_prev(N * H), h_new(N * H), weight_hh_linear(N * 3 * H), update_gate_input(N * H),
        update_gate_output(N * H), reset_gate_input(N * H), reset_gate_output(N * H), new_gate_input(N * H),
        new_gate_output(N * H) {}
};

// The new gate's recurrent weights of a linear_before_reset = false cell: R_n transposed [H, H] and br_n [H].
struct ResetBeforeLinear {
  std::vector<float> Rn_t, br_n;
  std::vector<float> reset_hidden, hh_n;  // [N, H] buffers: r ⊙ h_prev and R_n (r ⊙ h_prev) + br_n
};

// One time step of one cell for the whole batch: reads b.h_prev and the step's weight_ih_linear [N, 3H],
// writes every other buffer of b (h_new last). Rt is the cell's R transposed, [H, 3H]. `rbl` is null for
// the linear_before_reset cell; otherwise weight_hh_linear's n channels become R_n (r ⊙ h) + br_n: r of
// every unit first (the element function run once for it), then that product, then the element again.
void cell_step(const GruCellWeights& cell, const std::vector<float>& Rt, const float* weight_ih_linear, size_t N,
               StepBuffers& b, ResetBeforeLinear* rbl) {
  const size_t H = static_cast<size_t>(cell.hidden_size);
  linear_rows(b.h_prev.data(), N, Rt, cell.br, H, b.weight_hh_linear.data());
  if (rbl != nullptr) {
    for (size_t n = 0; n < N; ++n) {
      const float* ih = weight_ih_linear + n * 3 * H;
      const float* hh = b.weight_hh_linear.data() + n * 3 * H;
      for (size_t j = 0; j < H; ++j) {
        const size_t i = n * H + j;
        // The shared element (qgru/model/float_gru_cell.h), also the CUDA float executor's.
        rbl->reset_hidden[i] = float_gru_reset_hidden(ih[H + j], hh[H + j], b.h_prev[i]);
      }
    }
    linear_rows(rbl->reset_hidden.data(), N, rbl->Rn_t, rbl->br_n, H, rbl->hh_n.data());
    for (size_t n = 0; n < N; ++n) {
      std::copy_n(rbl->hh_n.begin() + static_cast<std::ptrdiff_t>(n * H), H,
                  b.weight_hh_linear.begin() + static_cast<std::ptrdiff_t>(n * 3 * H + 2 * H));
    }
  }
  for (size_t n = 0; n < N; ++n) {
    const float* ih = weight_ih_linear + n * 3 * H;
    const float* hh = b.weight_hh_linear.data() + n * 3 * H;
    for (size_t j = 0; j < H; ++j) {
      const size_t i = n * H + j;
      // The shared element (qgru/model/float_gru_cell.h), also the CUDA float executor's kernel body.
      const FloatGruElement e = float_gru_cell_element(ih[j], ih[H + j], ih[2 * H + j], hh[j], hh[H + j], hh[2 * H + j],
                                                       b.h_prev[i], rbl == nullptr);
      b.update_gate_input[i] = e.update_gate_input;
      b.update_gate_output[i] = e.update_gate_output;
      b.reset_gate_input[i] = e.reset_gate_input;
      b.reset_gate_output[i] = e.reset_gate_output;
      b.new_gate_input[i] = e.new_gate_input;
      b.new_gate_output[i] = e.new_gate_output;
      b.h_new[i] = e.h_new;
    }
  }
}

void check_model(const FloatGruModel& model) {
  const auto fail = [](const std::string& what) { throw Error("float GRU model: " + what); };
  if (model.input_size < 1 || model.hidden_size < 1 || model.num_layers < 1) {
    fail("C, H and layers must be positive, got C = " + std::to_string(model.input_size) +
         ", H = " + std::to_string(model.hidden_size) + ", layers = " + std::to_string(model.num_layers));
  }
  if (model.num_directions != 1 && model.num_directions != 2) {
    fail("directions must be 1 or 2, got " + std::to_string(model.num_directions));
  }
  if (model.cells.size() != static_cast<size_t>(model.num_layers * model.num_directions)) {
    fail("expected " + std::to_string(model.num_layers * model.num_directions) + " cells, got " +
         std::to_string(model.cells.size()));
  }
  const size_t H = static_cast<size_t>(model.hidden_size);
  for (int layer = 0; layer < model.num_layers; ++layer) {
    const int C = layer == 0 ? model.input_size : model.num_directions * model.hidden_size;
    for (int direction = 0; direction < model.num_directions; ++direction) {
      const GruCellWeights& cell = model.cell(layer, direction);
      if (cell.input_size != C || cell.hidden_size != model.hidden_size ||
          cell.W.size() != 3 * H * static_cast<size_t>(C) || cell.R.size() != 3 * H * H ||
          cell.bw.size() != 3 * H || cell.br.size() != 3 * H) {
        fail("cell (layer " + std::to_string(layer) + ", direction " + std::to_string(direction) +
             ") does not have the sizes of C = " + std::to_string(C) + ", H = " + std::to_string(H));
      }
    }
  }
}

}  // namespace

FloatGruResult run_float_gru(const FloatGruModel& model, const float* x, int T, int N, const float* h0,
                             FloatGruObserver* observer, const int32_t* lengths) {
  check_model(model);
  if (T < 1 || N < 1) {
    throw Error("float GRU: sequence length and batch must be positive, got T = " + std::to_string(T) +
                ", N = " + std::to_string(N));
  }
  check_sequence_lengths(lengths, T, N);
  const int L = model.num_layers;
  const int D = model.num_directions;
  const size_t H = static_cast<size_t>(model.hidden_size);
  const size_t Nz = static_cast<size_t>(N);
  const size_t Tz = static_cast<size_t>(T);

  FloatGruResult result;
  result.T = T;
  result.N = N;
  result.h_n.assign(static_cast<size_t>(L * D) * Nz * H, 0.0f);

  std::vector<float> layer_input;  // layer l >= 1 reads layer l - 1's output
  std::vector<float> layer_output(Tz * Nz * static_cast<size_t>(D) * H);
  std::vector<float> weight_ih_linear(Tz * Nz * 3 * H);
  StepBuffers buffers(Nz, H);

  for (int layer = 0; layer < L; ++layer) {
    const float* in = layer == 0 ? x : layer_input.data();
    const size_t C = static_cast<size_t>(layer == 0 ? model.input_size : D * model.hidden_size);
    for (int direction = 0; direction < D; ++direction) {
      const GruCellWeights& cell = model.cell(layer, direction);
      const size_t cell_index = static_cast<size_t>(layer * D + direction);
      // W x + bw for every (t, n) at once: [T*N, 3H].
      linear_rows(in, Tz * Nz, transposed(cell.W, 3 * H, C), cell.bw, C, weight_ih_linear.data());
      const std::vector<float> Rt = transposed(cell.R, 3 * H, H);
      ResetBeforeLinear rbl;
      if (!model.linear_before_reset) {
        rbl.Rn_t = transposed(std::vector<float>(cell.R.begin() + static_cast<std::ptrdiff_t>(2 * H * H), cell.R.end()), H, H);
        rbl.br_n.assign(cell.br.begin() + static_cast<std::ptrdiff_t>(2 * H), cell.br.end());
        rbl.reset_hidden.resize(Nz * H);
        rbl.hh_n.resize(Nz * H);
      }
      if (h0 != nullptr) {
        std::copy(h0 + cell_index * Nz * H, h0 + (cell_index + 1) * Nz * H, buffers.h_prev.begin());
      } else {
        std::fill(buffers.h_prev.begin(), buffers.h_prev.end(), 0.0f);
      }
      for (int step = 0; step < T; ++step) {
        const int t = direction == 0 ? step : T - 1 - step;
        const size_t tz = static_cast<size_t>(t);
        const float* ih_t = weight_ih_linear.data() + tz * Nz * 3 * H;
        cell_step(cell, Rt, ih_t, Nz, buffers, model.linear_before_reset ? nullptr : &rbl);
        if (lengths != nullptr) {  // padding: the state stays (h_new = h_prev), the output is 0 (below)
          for (size_t n = 0; n < Nz; ++n) {
            if (row_is_valid(lengths, t, static_cast<int>(n))) continue;
            std::copy_n(buffers.h_prev.begin() + static_cast<std::ptrdiff_t>(n * H), H,
                        buffers.h_new.begin() + static_cast<std::ptrdiff_t>(n * H));
          }
        }
        if (observer != nullptr) {
          FloatStepView view;
          view.layer = layer;
          view.direction = direction;
          view.t = t;
          view.batch = N;
          view.input_size = cell.input_size;
          view.hidden_size = cell.hidden_size;
          view.x = in + tz * Nz * C;
          view.h_prev = buffers.h_prev.data();
          view.weight_ih_linear = ih_t;
          view.weight_hh_linear = buffers.weight_hh_linear.data();
          view.update_gate_input = buffers.update_gate_input.data();
          view.update_gate_output = buffers.update_gate_output.data();
          view.reset_gate_input = buffers.reset_gate_input.data();
          view.reset_gate_output = buffers.reset_gate_output.data();
          view.new_gate_input = buffers.new_gate_input.data();
          view.new_gate_output = buffers.new_gate_output.data();
          view.h_new = buffers.h_new.data();
          view.lengths = lengths;
          observer->on_step(view);
        }
        // Output [t, n, direction * H + j] (0 past the row's length).
        for (size_t n = 0; n < Nz; ++n) {
          const auto dst = layer_output.begin() + static_cast<std::ptrdiff_t>((tz * Nz + n) * D * H + direction * H);
          if (!row_is_valid(lengths, t, static_cast<int>(n))) {
            std::fill_n(dst, H, 0.0f);
            continue;
          }
          std::copy(buffers.h_new.begin() + static_cast<std::ptrdiff_t>(n * H),
                    buffers.h_new.begin() + static_cast<std::ptrdiff_t>((n + 1) * H), dst);
        }
        std::swap(buffers.h_prev, buffers.h_new);
      }
      std::copy(buffers.h_prev.begin(), buffers.h_prev.end(),
                result.h_n.begin() + static_cast<std::ptrdiff_t>(cell_index * Nz * H));
    }
    std::swap(layer_input, layer_output);
    if (layer + 1 < L) layer_output.resize(layer_input.size());
  }
  result.output = std::move(layer_input);
  return result;
}

}  // namespace qgru
