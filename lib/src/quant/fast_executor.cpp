// The fast CPU executor (contract and overflow proof in qgru/quant/fast_executor.h): prepacking, the
// support check, threads and the time loop. The arithmetic per element is the reference's sequence of
// QGRU_HD functions (fused_cell_element below); the GEMMs are fast_kernels_avx2.cpp.
#include "qgru/quant/fast_executor.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fast_kernels.h"
#include "qgru/base/error.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/fixed/rounding.h"

namespace qgru {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int pad16(int k) { return (k + 15) / 16 * 16; }

// One weight matrix ([rows, K] codes) prepacked for the kernels, with its proof for one operand space.
struct PackedMatrix {
  int rows = 0, K = 0, Kp = 0;
  bool int8 = true;
  std::vector<int8_t> q8;    // [rows, Kp] when int8
  std::vector<int16_t> q16;  // [rows, Kp] otherwise
  int chunk_vecs = 1;        // madd results per int32 lane before widening
  bool out_int32 = true;     // the whole sum fits int32

  // Pack `codes` and prove the GEMM against operands with |code| <= operand_max_abs. Returns "" when
  // supported, else why not.
  std::string pack(const std::vector<int32_t>& codes, int rows_, int K_, int64_t operand_max_abs) {
    rows = rows_;
    K = K_;
    Kp = pad16(K);
    int64_t wmax = 0;
    for (int32_t q : codes) wmax = std::max<int64_t>(wmax, q < 0 ? -static_cast<int64_t>(q) : q);
    int8 = true;
    for (int32_t q : codes) int8 = int8 && q >= -128 && q <= 127;
    if (wmax > 32767) return "a weight code of magnitude " + std::to_string(wmax) + " does not fit int16";
    const int64_t lane = 2 * wmax * operand_max_abs;  // one madd lane: two products
    if (lane > kInt32Max) {
      return "one madd pair 2*" + std::to_string(wmax) + "*" + std::to_string(operand_max_abs) + " overflows int32";
    }
    chunk_vecs = lane == 0 ? std::numeric_limits<int>::max() : static_cast<int>(std::min<int64_t>(kInt32Max / lane, std::numeric_limits<int>::max()));
    out_int32 = static_cast<int64_t>(Kp) * wmax * operand_max_abs <= kInt32Max;
    if (int8) {
      q8.assign(static_cast<size_t>(rows) * Kp, 0);
    } else {
      q16.assign(static_cast<size_t>(rows) * Kp, 0);
    }
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < K; ++k) {
        const int32_t q = codes[static_cast<size_t>(r) * K + k];
        if (int8) {
          q8[static_cast<size_t>(r) * Kp + k] = static_cast<int8_t>(q);
        } else {
          q16[static_cast<size_t>(r) * Kp + k] = static_cast<int16_t>(q);
        }
      }
    }
    return "";
  }

  // C[m, c] for channels [c0, c0 + nc), rows of A [M, Kp] with stride lda.
  template <class OT>
  void gemm(const int16_t* A, size_t lda, int M, int c0, int nc, OT* C, size_t ldc) const {
    if (int8) {
      fast::gemm_avx2(A, lda, M, q8.data() + static_cast<size_t>(c0) * Kp, static_cast<size_t>(Kp), nc, Kp,
                      chunk_vecs, C, ldc);
    } else {
      fast::gemm_avx2(A, lda, M, q16.data() + static_cast<size_t>(c0) * Kp, static_cast<size_t>(Kp), nc, Kp,
                      chunk_vecs, C, ldc);
    }
  }
};

int64_t max_abs_code(const TensorQuant& q) {
  return std::max<int64_t>(-static_cast<int64_t>(q.qmin()), q.qmax());
}

bool fits_int16(const TensorQuant& q) { return q.qmin() >= -32768 && q.qmax() <= 32767; }

// A reusable spinning barrier (yields while waiting: the machine may be oversubscribed).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    const int generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == generation) {
      if (++spins > 64) std::this_thread::yield();
    }
  }

 private:
  const int count_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

// Run fn(i) for i in [0, parts) on parts threads (the caller's thread is part 0).
template <class Fn>
void parallel_for(int parts, Fn fn) {
  if (parts <= 1) {
    fn(0);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(parts - 1));
  for (int i = 1; i < parts; ++i) threads.emplace_back([&fn, i] { fn(i); });
  fn(0);
  for (auto& t : threads) t.join();
}

}  // namespace


bool cpu_has_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return fast::avx2_kernels_built() && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

namespace {

// The support check and the packing share one routine; `out` may be null (check only).
FastPathSupport check_and_pack(const QuantizedGru& model, const FastExecutorOptions& options,
                               std::vector<std::pair<PackedMatrix, PackedMatrix>>* out) {
  FastPathSupport s;
  if (!options.allow_simd || !cpu_has_avx2()) {
    s.reason = options.allow_simd ? "this CPU has no AVX2" : "SIMD disabled by the caller";
    return s;
  }
  if (model.cells.empty() || model.cells.size() != static_cast<size_t>(model.num_layers) * model.num_directions) {
    s.reason = "the model's cell list does not match its layers x directions";
    return s;
  }
  for (const GruCellQuantParams& p : model.cells) {
    const std::string where = "cell (layer " + std::to_string(p.layer) + ", direction " + std::to_string(p.direction) + ")";
    const TensorQuant& x = p.q(GruTensor::x);
    const TensorQuant& h = p.q(GruTensor::h);
    if (!fits_int16(x) || !fits_int16(h)) {
      s.reason = where + ": x or h codes do not fit int16 (" + describe_quant(x) + ", " + describe_quant(h) + ")";
      return s;
    }
    PackedMatrix W, R;
    std::string why = W.pack(p.q_W, 3 * p.hidden_size, p.input_size, max_abs_code(x));
    if (why.empty()) why = R.pack(p.q_R, 3 * p.hidden_size, p.hidden_size, max_abs_code(h));
    if (!why.empty()) {
      s.reason = where + ": " + why;
      return s;
    }
    if (out) out->emplace_back(std::move(W), std::move(R));
  }
  s.supported = true;
  s.isa = "avx2";
  return s;
}

// Per-channel constants of B-1 / B-2 folded once per cell (Step A and the bias at GEMM scale):
//   offset_x[c] = rshift_round(q_bw[c], shift_bw_to_gemm_x[c]) - W_sum[c] * zp_x     (scale S_W[c]*S_x)
//   offset_h[c] = rshift_round(q_br[c], shift_br_to_gemm_h[c]) - R_sum[c] * zp_h     (scale S_R[c]*S_h)
// compute_weight_ih_linear(p, c, g) requantizes (g - W_sum[c]*zp_x) + rshift_round(q_bw[c], ...); the
// same int64 terms added in another order give the same int64 (no intermediate overflows: the overflow
// proof bounds |gemm| + |W_sum*zp| + |bias| far below 2^62), so requantize(g + offset_x[c], ...) is the
// same code. fast_executor_test checks it end to end: every code against the reference executor (which
// calls gru_cell_element) on every preset, edge shapes and edge codes.
struct FoldedOffsets {
  std::vector<int64_t> x, h;  // [3H]
  void fill(const GruCellParamsView& v) {
    const int G = 3 * v.hidden_size;
    x.resize(static_cast<size_t>(G));
    h.resize(static_cast<size_t>(G));
    for (int c = 0; c < G; ++c) {
      x[static_cast<size_t>(c)] = rshift_round(v.q_bw[c], v.shift_bw_to_gemm_x[c]) - v.W_sum[c] * static_cast<int64_t>(v.zp_x);
      h[static_cast<size_t>(c)] = rshift_round(v.q_br[c], v.shift_br_to_gemm_h[c]) - v.R_sum[c] * static_cast<int64_t>(v.h.zp);
    }
  }
};

// A piecewise-linear activation tabulated over its whole input code range (at most 2^16 + 1 codes):
// entry q - q_in_min = evaluate_activation(pwl view, q), so evaluate_activation on the Table view returns
// the very same code for every (saturated) input, without the segment search and the int64 line.
struct TabulatedActivations {
  std::vector<int32_t> tables[3];
  // Replace the Pwl activations of `v` by tables (views into this object).
  void apply(GruCellParamsView& v) {
    ActivationView* gates[3] = {&v.update_gate, &v.reset_gate, &v.new_gate};
    for (int g = 0; g < 3; ++g) {
      ActivationView& a = *gates[g];
      const int64_t count = static_cast<int64_t>(a.q_in_max) - a.q_in_min + 1;
      if (a.impl != ActivationImpl::Pwl || count <= 0 || count > (int64_t{1} << 17)) continue;
      std::vector<int32_t>& t = tables[g];
      t.resize(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) t[static_cast<size_t>(i)] = evaluate_activation(a, static_cast<int32_t>(a.q_in_min + i));
      a.impl = ActivationImpl::Table;
      a.table = t.data();
    }
  }
};

// gru_cell_element (qgru/fixed/gru_cell.h) with B-1/B-2's constants folded (FoldedOffsets), no trace:
// the same QGRU_HD functions for C-1 .. C-4, in the same order.
template <class GX, class GH>
inline int32_t fused_cell_element(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h,
                                  int32_t j, const GX* gx, const GH* gh, int32_t q_h_old) {
  const int32_t H = p.hidden_size;
  int32_t q_ih[3];
  int32_t q_hh[3];
  for (int32_t g = 0; g < 3; ++g) {
    const int32_t c = g * H + j;
    q_ih[g] = requantize(static_cast<int64_t>(gx[c]) + offset_x[c], p.shift_gemm_x_to_weight_ih_linear[c],
                         p.weight_ih_linear.zp, p.weight_ih_linear.q_min, p.weight_ih_linear.q_max);
    q_hh[g] = requantize(static_cast<int64_t>(gh[c]) + offset_h[c], p.shift_gemm_h_to_weight_hh_linear[c],
                         p.weight_hh_linear.zp, p.weight_hh_linear.q_min, p.weight_hh_linear.q_max);
  }
  const int32_t q_update_gate_input = compute_sigmoid_gate_input(
      p, q_ih[0], q_hh[0], p.shift_weight_ih_linear_to_update_gate_input,
      p.shift_weight_hh_linear_to_update_gate_input, p.update_gate_input);
  const int32_t q_update_gate_output = evaluate_activation(p.update_gate, q_update_gate_input);
  const int32_t q_reset_gate_input = compute_sigmoid_gate_input(
      p, q_ih[1], q_hh[1], p.shift_weight_ih_linear_to_reset_gate_input,
      p.shift_weight_hh_linear_to_reset_gate_input, p.reset_gate_input);
  const int32_t q_reset_gate_output = evaluate_activation(p.reset_gate, q_reset_gate_input);
  const int32_t q_new_gate_input = compute_new_gate_input(p, q_ih[2], q_reset_gate_output, q_hh[2]);
  const int32_t q_new_gate_output = evaluate_activation(p.new_gate, q_new_gate_input);
  return compute_hidden_state(p, q_update_gate_output, q_new_gate_output, q_h_old, nullptr);
}

// Everything the time loop of one cell needs, prepared once at load.
struct PackedCell {
  PackedMatrix W;  // [3H, C] against x codes
  PackedMatrix R;  // [3H, H] against h codes
  GruCellParamsView view{};  // the cell's view, Pwl activations replaced by their tables
  FoldedOffsets folded;
  TabulatedActivations tabulated;
};

// Step-loop of one cell on the fast path. x16: [T*N, Kx] int16 codes (padded with zeros) in the cell's x
// space. h16_init: [N, H] initial codes. out: [T, N, out_stride], this direction at column out_offset.
// h_final: [N, H] codes after the last step.
template <class GX, class GH>
void run_cell_fast(const GruCellQuantParams& p, const PackedCell& pc, const int16_t* x16,
                   int T, int N, const std::vector<int32_t>& h_init, int32_t* out, int out_stride, int out_offset,
                   int32_t* h_final, int threads, int min_units_per_thread) {
  const int H = p.hidden_size;
  const int G = 3 * H;
  const PackedMatrix& W = pc.W;
  const PackedMatrix& R = pc.R;
  const int Kh = R.Kp;
  const GruCellParamsView& view = pc.view;
  const FoldedOffsets& folded = pc.folded;

  // B-1 for all steps: one GEMM, threads over rows.
  const int M = T * N;
  std::vector<GX> gemm_x(static_cast<size_t>(M) * G);
  const double macs_x = static_cast<double>(M) * G * W.Kp;
  const int parts_x = macs_x >= 2e6 ? std::min(threads, std::max(1, M)) : 1;
  parallel_for(parts_x, [&](int part) {
    const int m0 = static_cast<int>(static_cast<int64_t>(M) * part / parts_x);
    const int m1 = static_cast<int>(static_cast<int64_t>(M) * (part + 1) / parts_x);
    W.gemm(x16 + static_cast<size_t>(m0) * W.Kp, static_cast<size_t>(W.Kp), m1 - m0, 0, G,
           gemm_x.data() + static_cast<size_t>(m0) * G, static_cast<size_t>(G));
  });

  // The recurrence: h double-buffered as int16 [N, Kh] (padding stays zero), gemm_h [N, 3H].
  std::vector<int16_t> hbuf[2] = {std::vector<int16_t>(static_cast<size_t>(N) * Kh, 0),
                                  std::vector<int16_t>(static_cast<size_t>(N) * Kh, 0)};
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < H; ++j) {
      hbuf[0][static_cast<size_t>(n) * Kh + j] = static_cast<int16_t>(h_init[static_cast<size_t>(n) * H + j]);
    }
  }
  std::vector<GH> gemm_h(static_cast<size_t>(N) * G);

  // Partition: over batch rows when there are enough, else over hidden units (one barrier per step).
  const bool by_batch = N >= threads;
  int parts = 1;
  if (threads > 1 && T > 0) {
    if (by_batch) {
      parts = threads;
    } else if (H / threads >= min_units_per_thread) {
      parts = threads;
    }
  }
  Barrier barrier(parts);
  parallel_for(parts, [&](int part) {
    int n0 = 0, n1 = N, j0 = 0, j1 = H;
    if (parts > 1 && by_batch) {
      n0 = static_cast<int>(static_cast<int64_t>(N) * part / parts);
      n1 = static_cast<int>(static_cast<int64_t>(N) * (part + 1) / parts);
    } else if (parts > 1) {
      j0 = static_cast<int>(static_cast<int64_t>(H) * part / parts);
      j1 = static_cast<int>(static_cast<int64_t>(H) * (part + 1) / parts);
    }
    const bool sync = parts > 1 && !by_batch;
    int cur = 0;
    for (int step = 0; step < T; ++step) {
      const int t = p.direction == 0 ? step : T - 1 - step;
      const int16_t* h_cur = hbuf[cur].data();
      int16_t* h_next = hbuf[cur ^ 1].data();
      // B-2 for this thread's rows and units: gates z, r, n.
      if (j0 == 0 && j1 == H) {
        R.gemm(h_cur + static_cast<size_t>(n0) * Kh, static_cast<size_t>(Kh), n1 - n0, 0, G,
               gemm_h.data() + static_cast<size_t>(n0) * G, static_cast<size_t>(G));
      } else {
        for (int g = 0; g < 3; ++g) {
          R.gemm(h_cur + static_cast<size_t>(n0) * Kh, static_cast<size_t>(Kh), n1 - n0, g * H + j0, j1 - j0,
                 gemm_h.data() + static_cast<size_t>(n0) * G + g * H + j0, static_cast<size_t>(G));
        }
      }
      // The cell per element: gru_cell_element with B-1/B-2's constants folded (fused_cell_element).
      for (int n = n0; n < n1; ++n) {
        const GX* gx = gemm_x.data() + (static_cast<size_t>(t) * N + n) * G;
        const GH* gh = gemm_h.data() + static_cast<size_t>(n) * G;
        const int16_t* hc = h_cur + static_cast<size_t>(n) * Kh;
        int16_t* hn = h_next + static_cast<size_t>(n) * Kh;
        int32_t* dst = out + (static_cast<size_t>(t) * N + n) * out_stride + out_offset;
        for (int j = j0; j < j1; ++j) {
          const int32_t q_h_new = fused_cell_element(view, folded.x.data(), folded.h.data(), j, gx, gh, hc[j]);
          hn[j] = static_cast<int16_t>(q_h_new);  // h's code range fits int16 (checked at pack time)
          dst[j] = q_h_new;
        }
      }
      cur ^= 1;
      if (sync) barrier.wait();
    }
  });
  const int last = T % 2;  // every step flips the buffer
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < H; ++j) {
      h_final[static_cast<size_t>(n) * H + j] = hbuf[last][static_cast<size_t>(n) * Kh + j];
    }
  }
}

}  // namespace

struct FastQuantGru::Packed {
  std::vector<PackedCell> cells;
};

FastPathSupport fast_path_support(const QuantizedGru& model, const FastExecutorOptions& options) {
  return check_and_pack(model, options, nullptr);
}

FastQuantGru::FastQuantGru(const QuantizedGru& model, const FastExecutorOptions& options)
    : model_(model), options_(options), packed_(std::make_unique<Packed>()) {
  if (options_.threads <= 0) options_.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::pair<PackedMatrix, PackedMatrix>> mats;
  support_ = check_and_pack(model, options_, &mats);
  if (support_.supported) {
    packed_->cells.reserve(mats.size());
    for (size_t i = 0; i < mats.size(); ++i) {
      packed_->cells.emplace_back();
      PackedCell& pc = packed_->cells.back();
      pc.W = std::move(mats[i].first);
      pc.R = std::move(mats[i].second);
      pc.view = model.cells[i].view();
      pc.folded.fill(pc.view);
      pc.tabulated.apply(pc.view);
    }
  }
}

FastQuantGru::~FastQuantGru() = default;

QuantGruResult FastQuantGru::run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                                       QuantGruObserver* observer) const {
  if (!support_.supported || observer) return run_quantized_gru_codes(model_, q_x, T, N, q_h0, observer);
  if (T < 0 || N < 0) throw Error("run_quantized_gru: negative shape T=" + std::to_string(T) + " N=" + std::to_string(N));
  const QuantizedGru& model = model_;
  const int D = model.num_directions;
  const int H = model.hidden_size;
  const int L = model.num_layers;
  check_input_codes(model, q_x, T, N);

  QuantGruResult result;
  result.T = T;
  result.N = N;
  result.h_n_codes.resize(static_cast<size_t>(L) * D * N * H);
  const size_t rows = static_cast<size_t>(T) * N;
  // Layer 0's x as padded int16 codes (x's code range fits int16: checked at pack time).
  int C = model.input_size;
  int Kx = pad16(C);
  std::vector<int16_t> x16(rows * Kx, 0);
  for (size_t r = 0; r < rows; ++r) {
    for (int k = 0; k < C; ++k) x16[r * Kx + k] = static_cast<int16_t>(q_x[r * C + k]);
  }
  std::vector<int32_t> layer_output(rows * D * H);
  for (int l = 0; l < L; ++l) {
    for (int d = 0; d < D; ++d) {
      const GruCellQuantParams& p = model.cell(l, d);
      const PackedCell& pc = packed_->cells[static_cast<size_t>(l * D + d)];
      const size_t h_offset = (static_cast<size_t>(l) * D + d) * N * H;
      std::vector<int32_t> q_h = initial_h_codes(model, q_h0, l, d, N);
      int32_t* h_final = result.h_n_codes.data() + h_offset;
      const int th = options_.threads;
      const int mu = options_.min_units_per_thread;
      if (pc.W.out_int32 && pc.R.out_int32) {
        run_cell_fast<int32_t, int32_t>(p, pc, x16.data(), T, N, q_h, layer_output.data(), D * H, d * H, h_final, th, mu);
      } else if (pc.W.out_int32) {
        run_cell_fast<int32_t, int64_t>(p, pc, x16.data(), T, N, q_h, layer_output.data(), D * H, d * H, h_final, th, mu);
      } else if (pc.R.out_int32) {
        run_cell_fast<int64_t, int32_t>(p, pc, x16.data(), T, N, q_h, layer_output.data(), D * H, d * H, h_final, th, mu);
      } else {
        run_cell_fast<int64_t, int64_t>(p, pc, x16.data(), T, N, q_h, layer_output.data(), D * H, d * H, h_final, th, mu);
      }
    }
    if (l + 1 < L) {
      // Requantize each direction's h codes into layer l+1's x space, exactly as the reference does.
      C = D * H;
      Kx = pad16(C);
      x16.assign(rows * Kx, 0);
      for (size_t r = 0; r < rows; ++r) {
        for (int k = 0; k < C; ++k) {
          x16[r * Kx + k] = static_cast<int16_t>(requantize_h_to_next_x(model, l, k / H, layer_output[r * C + k]));
        }
      }
    }
  }

  result.output_codes = std::move(layer_output);
  dequantize_result(model, result);
  return result;
}

QuantGruResult FastQuantGru::run(const float* x, int T, int N, const float* h0, QuantGruObserver* observer) const {
  if (!support_.supported || observer) return run_quantized_gru(model_, x, T, N, h0, observer);
  const QuantizedGru& model = model_;
  const std::vector<int32_t> q_x = quantize_values(model.input_quant(), x, static_cast<size_t>(T) * N * model.input_size);
  const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0, N);
  return run_codes(q_x.data(), T, N, q_h0.empty() ? nullptr : q_h0.data(), nullptr);
}

QuantGruResult run_quantized_gru_fast(const QuantizedGru& model, const float* x, int T, int N, const float* h0,
                                      QuantGruObserver* observer) {
  if (observer) return run_quantized_gru(model, x, T, N, h0, observer);
  return FastQuantGru(model).run(x, T, N, h0, nullptr);
}

QuantGruResult run_quantized_gru_fast_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                            const int32_t* q_h0, QuantGruObserver* observer) {
  if (observer) return run_quantized_gru_codes(model, q_x, T, N, q_h0, observer);
  return FastQuantGru(model).run_codes(q_x, T, N, q_h0, nullptr);
}

}  // namespace qgru
