// The fast CPU executor (contract and overflow proof in qgru/runtime/fast_executor.h): prepacking, the
// support check, threads and the time loop. The arithmetic per element is the reference's sequence of
// QGRU_HD functions (fused_cell_element below); the kernels are the fast/ folder's gemm_* and cell_* files.
#include "qgru/runtime/fast_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "fast_kernels.h"
#include "schedule_choice.h"
#include "worker_team.h"
#include "qgru/base/error.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/fixed/rounding.h"
#include "qgru/io/sequence_io.h"
#include "qgru/runtime/quantize_input.h"
#include "qgru/runtime/stream_step.h"

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
  int64_t acc_max_abs = 0;   // Kp · max|W| · max|operand|: a bound of every accumulator
  // The avx512-vnni level (fast_kernels.h): weights in blocks of 16 rows x 4 k, operands as u8 codes + a_bias.
  bool vnni = false;
  bool vnni16 = false;                // 16-bit operand codes: the two-plane VNNI GEMM (gemm_planes)
  int32_t a_bias = 0;                 // 128 (codes in [-128, 127]; the high plane of vnni16) or 0 (codes in [0, 255])
  std::vector<int8_t> packed_vnni;    // [vnni_padded_rows(rows), Kp] in the VNNI layout
  std::vector<int32_t> bias_rowsum;   // [vnni_padded_rows(rows)] a_bias * Σ_k W[c, k]; |.| <= 128·128·Kp <= 2^30
  // The avx2 level: int8 weights whose every sum fits int32 in the same layout (packed_vnni, no bias), read by
  // fast::gemm_avx2_packed against int16 operand codes.
  bool avx2_packed = false;
  bool avx2_s8 = false;  // and operand codes in [-128, 127], weights in [-127, 127]: fast::gemm_avx2_packed_s8_part

  void pack_avx2(const TensorQuant& operand) {
    if (!int8 || !out_int32) return;
    packed_vnni.assign(static_cast<size_t>(fast::vnni_padded_rows(rows)) * Kp, 0);
    fast::pack_vnni_u8s8(q8.data(), rows, Kp, packed_vnni.data());
    avx2_packed = true;
    avx2_s8 = operand.qmin() >= -128 && operand.qmax() <= 127 &&
              std::none_of(q8.begin(), q8.end(), [](int8_t w) { return w == -128; });
  }
  // gemm for avx2_packed over the operand elements [k0, k1) only, stored or added (fast::gemm_avx2_packed_part);
  // C points at channel 0 of row 0.
  void gemm_part(const int16_t* A, size_t lda, int M, int c0, int c1, int32_t* C, size_t ldc, int k0, int k1,
                 bool accumulate) const {
    if (avx2_s8) {
      fast::gemm_avx2_packed_s8_part(A, lda, M, packed_vnni.data(), Kp, c0, c1, C, ldc, k0, k1, accumulate);
      return;
    }
    fast::gemm_avx2_packed_part(A, lda, M, packed_vnni.data(), Kp, c0, c1, C, ldc, k0, k1, accumulate);
  }

  // Prepare the VNNI layout when the weights are 8-bit and K <= kVnniMaxK: for 8-bit operand codes (range
  // [q_min, q_max] within [-128, 127] or [0, 255]) the u8 x s8 GEMM (vnni), for other operand codes within
  // int16 the two-plane GEMM (vnni16, fast::gemm_vnni_s16s8); otherwise leave both false (the AVX2 kernel runs).
  void pack_vnni(const TensorQuant& operand) {
    if (!int8 || Kp > fast::kVnniMaxK) return;
    bool planes = false;
    if (operand.qmin() >= -128 && operand.qmax() <= 127) {
      a_bias = 128;
    } else if (operand.qmin() >= 0 && operand.qmax() <= 255) {
      a_bias = 0;
    } else if (operand.qmin() >= -32768 && operand.qmax() <= 32767) {
      a_bias = 128;  // the high plane's bias (the low plane has none)
      planes = true;
    } else {
      return;
    }
    const int rows_padded = fast::vnni_padded_rows(rows);
    packed_vnni.assign(static_cast<size_t>(rows_padded) * Kp, 0);
    fast::pack_vnni_u8s8(q8.data(), rows, Kp, packed_vnni.data());
    bias_rowsum.assign(static_cast<size_t>(rows_padded), 0);
    for (int r = 0; r < rows; ++r) {
      int32_t sum = 0;  // |Σ_k W[r, k]| <= 128·Kp <= 2^23
      for (int k = 0; k < Kp; ++k) sum += q8[static_cast<size_t>(r) * Kp + k];
      bias_rowsum[static_cast<size_t>(r)] = a_bias * sum;
    }
    vnni = !planes;
    vnni16 = planes;
  }

  // The two-plane GEMM (vnni16): C[m, c] for channels [c0, c1) of operand rows given as planes lo, hi
  // ([M, lda] u8 each, fast::int16_to_planes); C points at channel 0 of row 0.
  template <class OT>
  void gemm_planes(const uint8_t* lo, const uint8_t* hi, size_t lda, int M, int c0, int c1, OT* C, size_t ldc) const {
    fast::gemm_vnni_s16s8(lo, hi, lda, M, packed_vnni.data(), Kp, bias_rowsum.data(), c0, c1, C, ldc);
  }

  // The VNNI GEMM: C[m, c] for channels [c0, c1), operand rows A [M, Kp] u8 (codes + a_bias) with stride
  // lda; C points at channel 0 of row 0.
  void gemm_u8(const uint8_t* A, size_t lda, int M, int c0, int c1, int32_t* C, size_t ldc) const {
    fast::gemm_vnni_u8s8(A, lda, M, packed_vnni.data(), Kp, bias_rowsum.data(), c0, c1, C, ldc);
  }

  // gemm_u8 for one operand row (M = 1): channels [c0, c1) of C, the weight groups visited in descending
  // order when `descending` (fast::gemv_vnni_u8s8: the same sums in the same int32 lanes).
  void gemv_u8(const uint8_t* a, int c0, int c1, int32_t* C, bool descending) const {
    fast::gemv_vnni_u8s8(a, packed_vnni.data(), Kp, bias_rowsum.data(), c0, c1, C, descending);
  }
  // gemv_u8 over the operand elements [k0, k1) only, stored or added (fast::gemv_vnni_u8s8_part).
  void gemv_u8_part(const uint8_t* a, int c0, int c1, int32_t* C, int k0, int k1, bool accumulate) const {
    fast::gemv_vnni_u8s8_part(a, packed_vnni.data(), Kp, bias_rowsum.data(), c0, c1, C, false, k0, k1, accumulate);
  }

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
    acc_max_abs = static_cast<int64_t>(Kp) * wmax * operand_max_abs;
    out_int32 = acc_max_abs <= kInt32Max;
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
    if constexpr (std::is_same_v<OT, int32_t>) {
      if (avx2_packed) {  // C points at channel c0; gemm_part takes channel 0 of the same rows
        gemm_part(A, lda, M, c0, c0 + nc, C - c0, ldc, 0, Kp, false);
        return;
      }
    }
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

// A heap array of integers aligned to a cache line (64 bytes): threads writing neighbouring parts of it
// share no line when their boundaries lie at multiples of 64 bytes from the start.
template <class T>
class LineArray {
  static_assert(std::is_trivially_copyable_v<T>, "integers only");

 public:
  LineArray() = default;
  explicit LineArray(size_t n) : n_(n), p_(static_cast<T*>(::operator new(bytes(n), std::align_val_t{64}))) {}
  LineArray(size_t n, T fill) : LineArray(n) { std::fill_n(p_.get(), n, fill); }
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }

 private:
  static size_t bytes(size_t n) { return std::max<size_t>(64, (n * sizeof(T) + 63) / 64 * 64); }
  struct Free {
    void operator()(T* q) const { ::operator delete(q, std::align_val_t{64}); }
  };
  size_t n_ = 0;
  std::unique_ptr<T[], Free> p_;
};

// Runs fn(i) for i in [0, parts) (the caller's thread is part 0): on the run's persistent team when it has
// one (worker_team.h), else on threads started for the call.
struct Parallel {
  fast::WorkerTeam* team = nullptr;
  template <class Fn>
  void operator()(int parts, Fn& fn) const {
    if (parts <= 1) {
      fn(0);
      return;
    }
    if (team && parts <= team->size()) {
      team->run(parts, std::function<void(int)>(std::ref(fn)));
      return;
    }
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(parts - 1));
    for (int i = 1; i < parts; ++i) threads.emplace_back([&fn, i] { fn(i); });
    fn(0);
    for (auto& t : threads) t.join();
  }
};

}  // namespace


bool cpu_has_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return fast::avx2_kernels_built() && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc's feature bits include the OS's consent (XCR0) to save the zmm and mask registers.
  return fast::avx512_kernels_built() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
#else
  return false;
#endif
}

namespace {

// The level a run uses: options.isa, or QGRU_FAST_ISA when Auto, or the best the CPU has. Returns "" and the
// level, or why none applies ("reference" forced, or a level this CPU lacks).
std::string choose_isa(const FastExecutorOptions& options, FastIsa* isa) {
  FastIsa want = options.isa;
  if (want == FastIsa::Auto) {
    const char* env = std::getenv("QGRU_FAST_ISA");
    const std::string e = env ? env : "";
    if (e == "avx2") {
      want = FastIsa::Avx2;
    } else if (e == "avx512-vnni") {
      want = FastIsa::Avx512Vnni;
    } else if (e == "reference") {
      return "QGRU_FAST_ISA=reference";
    } else if (!e.empty()) {
      return "QGRU_FAST_ISA=" + e + " is not one of avx2, avx512-vnni, reference";
    }
  }
  if (want == FastIsa::Auto) want = cpu_has_avx512_vnni() ? FastIsa::Avx512Vnni : FastIsa::Avx2;
  if (!cpu_has_avx2()) return "this CPU has no AVX2";
  if (want == FastIsa::Avx512Vnni && !cpu_has_avx512_vnni()) return "this CPU has no AVX-512 VNNI (avx512f/bw/dq/vl/vnni/vbmi)";
  *isa = want;
  return "";
}

// The support check and the packing share one routine; `out` may be null (check only).
FastPathSupport check_and_pack(const QuantizedGru& model, const FastExecutorOptions& options,
                               std::vector<std::pair<PackedMatrix, PackedMatrix>>* out, FastIsa* isa_out = nullptr) {
  FastPathSupport s;
  FastIsa isa = FastIsa::Avx2;
  if (!options.allow_simd) {
    s.reason = "SIMD disabled by the caller";
    return s;
  }
  s.reason = choose_isa(options, &isa);
  if (!s.reason.empty()) return s;
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
    if (out && isa == FastIsa::Avx512Vnni) {
      W.pack_vnni(x);
      R.pack_vnni(h);
    }
    if (out && isa == FastIsa::Avx2) {
      W.pack_avx2(x);
      R.pack_avx2(h);
    }
    if (out) out->emplace_back(std::move(W), std::move(R));
  }
  s.supported = true;
  s.isa = isa == FastIsa::Avx512Vnni ? "avx512-vnni" : "avx2";
  if (isa_out) *isa_out = isa;
  return s;
}

// Per-channel constants of B-1 / B-2 folded once per cell (Step A and the bias at GEMM scale):
//   offset_x[c] = bias_in_gemm_x(c) - W_sum[c] * zp_x     (scale S_W[c]*S_x; rshift_round(q_bw[c], shift_bw_to_gemm_x[c])
//   offset_h[c] = bias_in_gemm_h(c) - R_sum[c] * zp_h     (scale S_R[c]*S_h;  with the multiplier in a multiplier model)
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
      x[static_cast<size_t>(c)] = bias_in_gemm_x(v, c) - v.W_sum[c] * static_cast<int64_t>(v.zp_x);
      h[static_cast<size_t>(c)] = bias_in_gemm_h(v, c) - v.R_sum[c] * static_cast<int64_t>(v.h.zp);
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
// C-1 .. C-4 are gru_cell_gates itself.
template <class GX, class GH>
inline int32_t fused_cell_element(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h,
                                  int32_t j, const GX* gx, const GH* gh, int32_t q_h_old) {
  const int32_t H = p.hidden_size;
  int32_t q_ih[3];
  int32_t q_hh[3];
  for (int32_t g = 0; g < 3; ++g) {
    const int32_t c = g * H + j;
    q_ih[g] = requantize_gemm_x(p, c, static_cast<int64_t>(gx[c]) + offset_x[c]);
    q_hh[g] = requantize_gemm_h(p, c, static_cast<int64_t>(gh[c]) + offset_h[c]);
  }
  return gru_cell_gates(p, q_ih, q_hh, q_h_old, nullptr);
}

// The linear_before_reset = 0 cell's C-3 sum (compute_new_gate_input_reset_before) in the other cell's product
// form, so that cell_row's kernels of every level run that cell's second half: rshift_round(1 · v, s) is
// rshift_round(v, s) for every shift s, so a reset gate whose every code is zp_r + 1 (r - zp_r = 1) with
// shift_reset_mul_hh_to_new_gate_input = shift_weight_hh_linear_to_new_gate_input gives compute_new_gate_input
// the sum's codes; C-1 and C-4 do not read r. The real reset gate stays in PackedCell::reset_view (C-2 and C-2a
// run before the second GEMM, reset_before_step). apply() leaves the view alone and returns false when
// zp_r + 1 is no reset gate code or the gate is not a table.
struct ResetBeforeForm {
  std::vector<int32_t> unit_reset_table;  // [reset_gate_input codes] every entry zp_r + 1
  bool apply(GruCellParamsView& v) {
    ActivationView& r = v.reset_gate;
    const int64_t unit = static_cast<int64_t>(v.zp_reset_gate_output) + 1;
    if (!v.reset_before_linear || r.impl != ActivationImpl::Table || unit > r.q_out_max) return false;
    unit_reset_table.assign(static_cast<size_t>(static_cast<int64_t>(r.q_in_max) - r.q_in_min + 1), static_cast<int32_t>(unit));
    r.table = unit_reset_table.data();
    v.shift_reset_mul_hh_to_new_gate_input = v.shift_weight_hh_linear_to_new_gate_input;
    v.multiplier_reset_mul_hh_to_new_gate_input = v.multiplier_weight_hh_linear_to_new_gate_input;  // rescale(1 · v) too
    v.reset_before_linear = false;
    return true;
  }
};

// Everything the time loop of one cell needs, prepared once at load.
struct PackedCell {
  PackedMatrix W;  // [3H, C] against x codes
  PackedMatrix R;  // [3H, H] against h codes
  GruCellParamsView view{};  // the cell's view, Pwl activations replaced by their tables
  FoldedOffsets folded;
  TabulatedActivations tabulated;
  bool vector_cell = false;  // the avx512-vnni level's cell kernel (every activation a table)
  bool avx2 = false;         // the avx2 level: cell32 runs fast::cell_rows_avx2_i32 (and x_terms_avx2_i32)
  bool cell64_avx2 = false;  // the avx2 level outside the int32 proof: fast::cell_rows_avx2 (int64 lanes)
  fast::CellByteTables byte_tables{};  // for vector_cell
  bool cell32 = false;       // vector_cell on int32 lanes (fast::cell_fits_int32 proved it; int32 accumulators)
  fast::Cell32Plan plan32;  // for cell32: the folded offsets as int32 (|.| <= 2^30 by that proof), split shifts, merged clamps
  // The linear_before_reset = 0 cell: `view` in the product form when reset_form applied (else the cell's own view,
  // run element by element), reset_view the cell's own (its reset gate for C-2 and C-2a).
  GruCellParamsView reset_view{};
  ResetBeforeForm reset_form;
};

// The last layer's float output, written by the time loop row by row while the codes are in cache, with
// dequantize_result_fast's arithmetic (exact: quant_executor.cpp): y[row·stride + offset + j] = float(code - zp)·scale.
struct FloatOutput {
  float* y = nullptr;  // null: dequantize_result_fast writes the output after the run
  float scale = 0.0f;
  int32_t zp = 0;
  void rows_of(const int32_t* codes, float* dst, int j0, int j1) const {
    for (int j = j0; j < j1; ++j) dst[j] = static_cast<float>(codes[j] - zp) * scale;
  }
};

// cell_row's other kernels (codes only).
template <class GX, class GH>
void cell_row_codes(const PackedCell& pc, bool x_terms, const GX* gx, const GH* gh, const int16_t* hc, int j0, int j1,
                    int16_t* hn, uint8_t* hn_u8, int32_t* dst) {
  const GruCellParamsView& view = pc.view;
  const int32_t a_bias = pc.R.a_bias;
  if constexpr (std::is_same_v<GX, int32_t> && std::is_same_v<GH, int32_t>) {
    if (x_terms && pc.avx2) return fast::cell_rows_avx2_i32_xterms(view, pc.plan32, gx, gh, hc, j0, j1, hn, hn_u8, a_bias, dst);
    if (pc.cell32 && pc.avx2) return fast::cell_rows_avx2_i32(view, pc.plan32, gx, gh, hc, j0, j1, hn, hn_u8, a_bias, dst);
  }
  const int64_t* offset_x = pc.folded.x.data();
  const int64_t* offset_h = pc.folded.h.data();
  if (pc.cell64_avx2) return fast::cell_rows_avx2(view, offset_x, offset_h, gx, gh, hc, j0, j1, hn, hn_u8, a_bias, dst);
  if (pc.vector_cell) {
    return fast::cell_rows_avx512(view, pc.byte_tables, offset_x, offset_h, gx, gh, hc, j0, j1, hn, hn_u8, a_bias, dst);
  }
  for (int j = j0; j < j1; ++j) {
    const int32_t q_h_new = fused_cell_element(view, offset_x, offset_h, j, gx, gh, hc[j]);
    hn[j] = static_cast<int16_t>(q_h_new);  // h's code range fits int16 (checked at pack time)
    dst[j] = q_h_new;
    if (hn_u8) hn_u8[j] = static_cast<uint8_t>(q_h_new + a_bias);  // h codes + a_bias lie in [0, 255]
  }
}

// The cell step of one batch row for the units [j0, j1) by the kernel the cell's level and proofs chose
// (PackedCell): gx is B-1's accumulator row, or with x_terms the x terms x_terms_*_i32 made of it (int32
// cells only); gh is B-2's row; hc the row's h codes before the step. Writes the new codes to hn and dst
// ([j0, j1)), and as codes + R.a_bias to hn_u8 when it is not null. y (may be null): the row's float output at unit
// 0, FloatOutput's values of the new codes, written by the avx512-vnni int32 kernels beside the codes (FloatCopy:
// the same arithmetic), else from dst after the step.
template <class GX, class GH>
void cell_row(const PackedCell& pc, bool x_terms, const GX* gx, const GH* gh, const int16_t* hc, int j0, int j1,
              int16_t* hn, uint8_t* hn_u8, int32_t* dst, const FloatOutput& out_f = FloatOutput{}, float* y = nullptr) {
  if constexpr (std::is_same_v<GX, int32_t> && std::is_same_v<GH, int32_t>) {
    const GruCellParamsView& view = pc.view;
    const int32_t a_bias = pc.R.a_bias;
    const fast::FloatCopy copy{y, out_f.scale, out_f.zp};
    if (x_terms && !pc.avx2) {
      return fast::cell_rows_avx512_i32_xterms(view, pc.byte_tables, pc.plan32, gx, gh, hc, j0, j1, hn, hn_u8, a_bias, dst, copy);
    }
    if (pc.cell32 && !pc.avx2) {
      return fast::cell_rows_avx512_i32(view, pc.byte_tables, pc.plan32, gx, gh, hc, j0, j1, hn, hn_u8, a_bias, dst, copy);
    }
  }
  cell_row_codes(pc, x_terms, gx, gh, hc, j0, j1, hn, hn_u8, dst);
  if (y) out_f.rows_of(dst, y, j0, j1);
}

// ---- The linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a): a time loop of its own ----------------------------
// Per step and batch row: B-1, B-2 on R's z and r rows against h, C-2 and C-2a of every unit (q_reset_hidden: codes
// in h's space, so R's packing, operand form and proof, made for h, hold for them), the second GEMM R_n against
// them into gemm_h's n channels, then cell_row on the cell's view in the product form (ResetBeforeForm), so the
// level's vector cell kernel runs the second half. Threads: batch rows split over the parts, each with its own
// scratch; every part runs the whole time loop on its rows.

// C[n, c] for the channels [c0, c1) of M (C points at channel 0 of row 0, rows ldc apart) from the int16 operand rows
// a16 [N, M.Kp], by M's kernel: the VNNI GEMM on u8 codes + a_bias, the two-plane GEMM, or the AVX2 GEMMs (what
// run_cell_fast and FastStepper use for M). a, b: [N, M.Kp] u8 scratch.
template <class OT>
void packed_gemm_rows(const PackedMatrix& M, const int16_t* a16, int N, uint8_t* a, uint8_t* b, int c0, int c1, OT* C,
                      size_t ldc) {
  const size_t count = static_cast<size_t>(N) * M.Kp;
  if (M.vnni16) {
    fast::int16_to_planes(a16, count, a, b);
    M.gemm_planes(a, b, static_cast<size_t>(M.Kp), N, c0, c1, C, ldc);
    return;
  }
  if constexpr (std::is_same_v<OT, int32_t>) {
    if (M.vnni) {
      fast::int16_to_u8_biased(a16, count, M.a_bias, a);  // codes + a_bias in [0, 255] (pack_vnni)
      if (N == 1) {
        M.gemv_u8(a, c0, c1, C, false);
      } else {
        M.gemm_u8(a, static_cast<size_t>(M.Kp), N, c0, c1, C, ldc);
      }
      return;
    }
  }
  M.gemm(a16, static_cast<size_t>(M.Kp), N, c0, c1 - c0, C + c0, ldc);
}

// Working memory of one part's rows (at most `rows`) for reset_before_step.
struct ResetBeforeScratch {
  LineArray<uint8_t> a, b;      // [rows, max(Kx, Kh)] u8 operand forms
  LineArray<int16_t> rh16;      // [rows, Kh] q_reset_hidden as int16 (padding columns stay zero)
  ResetBeforeScratch(int rows, int Kx, int Kh)
      : a(static_cast<size_t>(rows) * std::max(Kx, Kh), 0), b(a.size(), 0), rh16(static_cast<size_t>(rows) * Kh, 0) {}
};

// One step of the linear_before_reset = 0 cell for N rows: x16 [N, W.Kp] and h16 [N, Kh] the rows' codes (int16,
// zero padding); gx, gh [N, 3H] accumulators (scratch); h_new16 [N, Kh] and dst (row i at dst + i·dst_stride, H
// codes) receive the new codes, and with out_f.y the floats y (laid out as dst) their dequantized values. Rows n_first + i with t past their length (lengths, or null) keep their state and
// write zp_h to dst.
template <class GX, class GH>
void reset_before_step(const PackedCell& pc, const int16_t* x16, const int16_t* h16, int N, GX* gx, GH* gh,
                       ResetBeforeScratch& s, int16_t* h_new16, int32_t* dst, size_t dst_stride, const int32_t* lengths,
                       int t, int n_first, const FloatOutput& out_f, float* y) {
  const GruCellParamsView& view = pc.reset_view;  // the cell's own reset gate (pc.view may be the product form)
  const int H = view.hidden_size;
  const int G = 3 * H;
  const int Kh = pc.R.Kp;
  packed_gemm_rows(pc.W, x16, N, s.a.data(), s.b.data(), 0, G, gx, static_cast<size_t>(G));          // B-1
  packed_gemm_rows(pc.R, h16, N, s.a.data(), s.b.data(), 0, 2 * H, gh, static_cast<size_t>(G));      // B-2, z and r
  const int64_t* offset_x = pc.folded.x.data();
  const int64_t* offset_h = pc.folded.h.data();
  for (int i = 0; i < N; ++i) {  // C-2, C-2a of every unit (B-1/B-2 of the r channel with the folded offsets)
    const GX* gxr = gx + static_cast<size_t>(i) * G;
    const GH* ghr = gh + static_cast<size_t>(i) * G;
    const int16_t* hc = h16 + static_cast<size_t>(i) * Kh;
    int16_t* rh = s.rh16.data() + static_cast<size_t>(i) * Kh;
    for (int j = 0; j < H; ++j) {
      const int32_t c = H + j;
      const int32_t q_ih_r = requantize_gemm_x(view, c, static_cast<int64_t>(gxr[c]) + offset_x[c]);
      const int32_t q_hh_r = requantize_gemm_h(view, c, static_cast<int64_t>(ghr[c]) + offset_h[c]);
      rh[j] = static_cast<int16_t>(gru_cell_reset_hidden_gates(view, q_ih_r, q_hh_r, hc[j]));  // h's codes fit int16
    }
  }
  packed_gemm_rows(pc.R, s.rh16.data(), N, s.a.data(), s.b.data(), 2 * H, G, gh, static_cast<size_t>(G));  // R_n (r ⊙ h)
  for (int i = 0; i < N; ++i) {
    const int16_t* hc = h16 + static_cast<size_t>(i) * Kh;
    int16_t* hn = h_new16 + static_cast<size_t>(i) * Kh;
    int32_t* d = dst + static_cast<size_t>(i) * dst_stride;
    if (!row_is_valid(lengths, t, n_first + i)) {  // padding: the state stays, the output is zp_h
      std::copy(hc, hc + H, hn);
      std::fill(d, d + H, view.h.zp);
    } else {
      cell_row(pc, false, gx + static_cast<size_t>(i) * G, gh + static_cast<size_t>(i) * G, hc, 0, H, hn, nullptr, d);
    }
    if (out_f.y) out_f.rows_of(d, y + static_cast<size_t>(i) * dst_stride, 0, H);
  }
}

// run_cell_fast's contract for the linear_before_reset = 0 cell: x16 [T*N, W.Kp] (int16 codes only: run() gives such a
// layer 0 no u8 operand rows), out [T, N, out_stride] at column out_offset (and out_f's floats), h_final [N, H].
template <class GX, class GH>
void run_cell_fast_reset_before(const GruCellQuantParams& p, const PackedCell& pc, const int16_t* x16, int T, int N,
                                const std::vector<int32_t>& h_init, int32_t* out, int out_stride, int out_offset,
                                const FloatOutput& out_f, int32_t* h_final, const Parallel& parallel, int threads,
                                const int32_t* lengths) {
  const int H = p.hidden_size;
  const int G = 3 * H;
  const int Kx = pc.W.Kp, Kh = pc.R.Kp;
  const int parts = threads > 1 && N >= threads && T > 0 ? threads : 1;
  auto part_rows = [&](int part) { return static_cast<int>(static_cast<int64_t>(N) * part / parts); };
  auto loop = [&](int part) {
    const int n0 = part_rows(part), n1 = part_rows(part + 1), rows = n1 - n0;
    ResetBeforeScratch scratch(rows, Kx, Kh);
    LineArray<GX> gx(static_cast<size_t>(rows) * G, 0);
    LineArray<GH> gh(static_cast<size_t>(rows) * G, 0);
    LineArray<int16_t> h[2] = {LineArray<int16_t>(static_cast<size_t>(rows) * Kh, 0), LineArray<int16_t>(static_cast<size_t>(rows) * Kh, 0)};
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < H; ++j) {
        h[0][static_cast<size_t>(i) * Kh + j] = static_cast<int16_t>(h_init[static_cast<size_t>(n0 + i) * H + j]);
      }
    }
    int cur = 0;
    for (int step = 0; step < T; ++step) {
      const int t = p.direction == 0 ? step : T - 1 - step;
      const size_t at = (static_cast<size_t>(t) * N + n0) * out_stride + out_offset;
      reset_before_step(pc, x16 + (static_cast<size_t>(t) * N + n0) * Kx, h[cur].data(), rows, gx.data(), gh.data(), scratch,
                        h[cur ^ 1].data(), out + at, static_cast<size_t>(out_stride), lengths, t, n0, out_f,
                        out_f.y ? out_f.y + at : nullptr);
      cur ^= 1;
    }
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < H; ++j) {
        h_final[static_cast<size_t>(n0 + i) * H + j] = h[cur][static_cast<size_t>(i) * Kh + j];
      }
    }
  };
  parallel(parts, loop);
}

// Step-loop of one cell on the fast path. x16: [T*N, Kx] int16 codes (padded with zeros) in the cell's x
// space. h16_init: [N, H] initial codes. out: [T, N, out_stride], this direction at column out_offset.
// h_final: [N, H] codes after the last step.
template <class GX, class GH>
void run_cell_fast(const GruCellQuantParams& p, const PackedCell& pc, const int16_t* x16, const uint8_t* x_u8,
                   int T, int N, const std::vector<int32_t>& h_init, int32_t* out, int out_stride, int out_offset,
                   const FloatOutput& out_f, int32_t* h_final, const Parallel& parallel, int threads,
                   int min_units_per_thread, int64_t min_pipelined_b1_macs, const int32_t* lengths) {
  const int H = p.hidden_size;
  const int G = 3 * H;
  const PackedMatrix& W = pc.W;
  const PackedMatrix& R = pc.R;
  const int Kh = R.Kp;
  const GruCellParamsView& view = pc.view;

  // B-1 for all steps before the time loop, computed by the thread that reads it in the loop (its batch
  // rows or its units' channels): reading another core's freshly written gemm_x costs a cross-core transfer
  // per cache line, which made splitting one thread's B-1 over two cores slower than not splitting it (at
  // H = 256, T = 100, N = 1: 0.52 to 0.64 ms against 0.37 ms). With VNNI and a batch of kB1PerStepBatch rows
  // or more, B-1 runs inside the time loop instead, one [N, C] x [C, 3H] GEMM per step: it is as efficient
  // per MAC as the all-steps GEMM and keeps gemm_x ([N, 3H]) in L2 for the cell, where the all-steps array
  // ([T·N, 3H] int32, e.g. 19 MiB at H = 256, T = 100, N = 64) makes a round trip through memory.
  constexpr int kB1PerStepBatch = 8;
  const bool b1_per_step = (W.vnni || W.avx2_packed) && std::is_same_v<GX, int32_t> && N >= kB1PerStepBatch;
  const int M = T * N;
  // [M, 3H] (per step: [N, 3H]), every element written by B-1 before it is read (left uninitialised: no
  // memset of up to tens of MiB per run)
  LineArray<GX> gemm_x_owner(static_cast<size_t>(b1_per_step ? N : M) * G);
  GX* const gemm_x = gemm_x_owner.data();
  const double macs_x = static_cast<double>(M) * G * W.Kp;
  // Without the persistent team (another run holds it) threads are started for the call: the split over units
  // then pays from about 512 units per thread (measured before the team existed), and B-1 is not pipelined.
  constexpr int kMinUnitsStartedThreads = 512;
  // Partition of the recurrence: over batch rows when there are enough, else over hidden units (one barrier
  // per step; each thread then also computes B-1 for its own units' channels, so that every thread finds
  // its gemm_x columns in its own core's cache).
  const bool by_batch = N >= threads;
  int parts = 1;
  if (threads > 1 && T > 0) {
    if (by_batch) {
      parts = threads;
    } else if (H / threads >= (parallel.team ? min_units_per_thread : std::max(min_units_per_thread, kMinUnitsStartedThreads))) {
      parts = threads;
    }
  }
  const bool by_units = parts > 1 && !by_batch;
  // The VNNI level: x codes + a_bias as u8 [M, Kp] (padding meets zero weights), given (x_u8) or made here.
  std::unique_ptr<uint8_t[]> xu8_owner;
  const uint8_t* xu8 = x_u8;
  if (W.vnni && !xu8) {
    const size_t count = static_cast<size_t>(M) * W.Kp;
    xu8_owner.reset(new uint8_t[count]);
    fast::int16_to_u8_biased(x16, count, W.a_bias, xu8_owner.get());  // codes + a_bias in [0, 255] (pack_vnni)
    xu8 = xu8_owner.get();
  }
  std::unique_ptr<uint8_t[]> x_lo, x_hi;  // vnni16: x's codes as two u8 planes [M, Kp] (fast::int16_to_planes)
  if (W.vnni16) {
    const size_t count = static_cast<size_t>(M) * W.Kp;
    x_lo.reset(new uint8_t[count]);
    x_hi.reset(new uint8_t[count]);
    fast::int16_to_planes(x16, count, x_lo.get(), x_hi.get());
  }
  // B-1 of the rows [m0, m1) of x (rows t·N + n).
  auto b1_rows = [&](int m0, int m1) {
    if (W.vnni16) {
      W.gemm_planes(x_lo.get() + static_cast<size_t>(m0) * W.Kp, x_hi.get() + static_cast<size_t>(m0) * W.Kp,
                    static_cast<size_t>(W.Kp), m1 - m0, 0, G, gemm_x + static_cast<size_t>(m0) * G, static_cast<size_t>(G));
      return;
    }
    if constexpr (std::is_same_v<GX, int32_t>) {
      if (W.vnni) {
        W.gemm_u8(xu8 + static_cast<size_t>(m0) * W.Kp, static_cast<size_t>(W.Kp), m1 - m0, 0, G,
                  gemm_x + static_cast<size_t>(m0) * G, static_cast<size_t>(G));
        return;
      }
    }
    W.gemm(x16 + static_cast<size_t>(m0) * W.Kp, static_cast<size_t>(W.Kp), m1 - m0, 0, G,
           gemm_x + static_cast<size_t>(m0) * G, static_cast<size_t>(G));
  };
  // B-1 of all rows for the units [j0, j1) of each gate (channels g·H + j).
  auto b1_units = [&](int j0, int j1) {
    for (int g = 0; g < 3; ++g) {
      if (W.vnni16) {
        W.gemm_planes(x_lo.get(), x_hi.get(), static_cast<size_t>(W.Kp), M, g * H + j0, g * H + j1, gemm_x, static_cast<size_t>(G));
        continue;
      }
      if constexpr (std::is_same_v<GX, int32_t>) {
        if (W.vnni) {
          W.gemm_u8(xu8, static_cast<size_t>(W.Kp), M, g * H + j0, g * H + j1, gemm_x, static_cast<size_t>(G));
          continue;
        }
      }
      W.gemm(x16, static_cast<size_t>(W.Kp), M, g * H + j0, j1 - j0, gemm_x + g * H + j0, static_cast<size_t>(G));
    }
  };
  // Pipelined B-1: when the recurrence runs on one thread (N below the thread count and H too small to
  // split) and B-1 has enough MACs, a second thread of the team computes B-1 (and the int32 cell's x terms)
  // a few steps at a time in the recurrence's step order and publishes how many steps are ready (release);
  // the recurrence waits (acquire) only when it catches up, and prefetches the next step's rows when they
  // are ready (they were written by the other core). Each core keeps its own matrix in its own L2.
  const bool b1_pipelined = parallel.team && !b1_per_step && threads > 1 && N < threads && !by_units &&
                            T > 1 && macs_x >= static_cast<double>(min_pipelined_b1_macs);
  constexpr int kPipelineSteps = 4;  // steps per published chunk (a 4-row VNNI strip: as efficient per MAC)
  std::atomic<int> b1_steps_ready{0};
  // The recurrence: h double-buffered as int16 [N, Kh] (padding stays zero), gemm_h [N, 3H].
  LineArray<int16_t> hbuf[2] = {LineArray<int16_t>(static_cast<size_t>(N) * Kh, 0),
                                LineArray<int16_t>(static_cast<size_t>(N) * Kh, 0)};
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < H; ++j) {
      hbuf[0][static_cast<size_t>(n) * Kh + j] = static_cast<int16_t>(h_init[static_cast<size_t>(n) * H + j]);
    }
  }
  // The VNNI level: h also as u8 codes + a_bias [N, Kh], written by the cell beside the int16 codes.
  LineArray<uint8_t> hu8[2];
  if (R.vnni) {
    for (auto& b : hu8) b = LineArray<uint8_t>(static_cast<size_t>(N) * Kh, static_cast<uint8_t>(R.a_bias));
    for (size_t i = 0; i < hbuf[0].size(); ++i) hu8[0][i] = static_cast<uint8_t>(hbuf[0][i] + R.a_bias);
  }
  LineArray<GH> gemm_h(static_cast<size_t>(N) * G, 0);

  // Split over units: part p owns the units [unit_bound(p), unit_bound(p + 1)), multiples of 16 (whole
  // vectors of the cell, whole k4 blocks of the GEMV; of 64 when the parts are large enough) except the last
  // bound H. After its cell of step s, a
  // part publishes steps_done[p] = s + 1 (release: its h codes of step s are written); before reading the
  // other parts' h codes of step s it waits until their counters reach s + 1 (acquire). A part that is one
  // step ahead writes only its own units of the buffer the others may still read their own units from, so
  // the double buffer needs no second wait.
  const int unit_align = H / parts >= 64 ? 64 : 16;  // 64: the u8 h codes of two parts share no cache line
  auto unit_bound = [&](int part) {
    return part >= parts ? H : static_cast<int>(static_cast<int64_t>(H) * part / parts / unit_align * unit_align);
  };
  struct alignas(64) StepCounter {
    std::atomic<int> steps_done{0};
  };
  std::unique_ptr<StepCounter[]> counters(new StepCounter[static_cast<size_t>(parts)]);
  auto wait_for_others = [&](int part, int steps) {
    for (int q = 0; q < parts; ++q) {
      if (q == part) continue;
      const std::atomic<int>& c = counters[static_cast<size_t>(q)].steps_done;
      fast::spin_until([&] { return c.load(std::memory_order_acquire) >= steps; });
    }
  };
  // The int32 cell reads the gates' x terms computed with B-1, out of the time loop (not when B-1 runs inside it).
  const bool x_terms = pc.cell32 && std::is_same_v<GX, int32_t> && std::is_same_v<GH, int32_t> && !b1_per_step;
  auto x_terms_rows = [&](int m0, int m1, int ja, int jb) {
    if constexpr (std::is_same_v<GX, int32_t>) {
      if (pc.avx2) {
        fast::x_terms_avx2_i32(view, pc.plan32, gemm_x + static_cast<size_t>(m0) * G, static_cast<size_t>(G), m1 - m0, ja, jb);
      } else {
        fast::x_terms_avx512_i32(view, pc.plan32, gemm_x + static_cast<size_t>(m0) * G, static_cast<size_t>(G), m1 - m0, ja, jb);
      }
    }
  };
  // (not with padding steps: the kernel runs every one of the T steps)
  const bool small_loop = x_terms && R.vnni && N == 1 && parts == 1 && fast::small_recurrence_applies(H, Kh) &&
                          (!lengths || lengths[0] == T);
  auto b1_producer = [&] {
    for (int s0 = 0; s0 < T; s0 += kPipelineSteps) {
      const int s1 = std::min(T, s0 + kPipelineSteps);
      const int t0 = p.direction == 0 ? s0 : T - s1;  // steps [s0, s1) are rows [t0, t0 + s1 - s0)
      b1_rows(t0 * N, (t0 + s1 - s0) * N);
      if (x_terms) x_terms_rows(t0 * N, (t0 + s1 - s0) * N, 0, H);
      b1_steps_ready.store(s1, std::memory_order_release);
    }
  };
  auto recurrence = [&](int part) {
    int n0 = 0, n1 = N, j0 = 0, j1 = H;
    if (parts > 1 && by_batch) {
      n0 = static_cast<int>(static_cast<int64_t>(N) * part / parts);
      n1 = static_cast<int>(static_cast<int64_t>(N) * (part + 1) / parts);
    } else if (parts > 1) {
      j0 = unit_bound(part);
      j1 = unit_bound(part + 1);
    }
    const bool sync = by_units;
    // This part's own elements of h in the GEMV's k (the padding of the last part's row with it).
    const int k_own0 = j0, k_own1 = part + 1 == parts ? Kh : j1;
    // B-1 of all steps for what this thread reads (before its step 0), then, for the int32 cell, the x side of
    // the gates (x_terms_avx512_i32) for the same rows and units, out of the time loop.
    if (!b1_per_step && !b1_pipelined) {
      if (by_units) {
        b1_units(j0, j1);
        if (x_terms) x_terms_rows(0, M, j0, j1);
      } else if (parts > 1) {
        for (int t = 0; t < T; ++t) {  // this thread's batch rows of step t
          b1_rows(t * N + n0, t * N + n1);
          if (x_terms) x_terms_rows(t * N + n0, t * N + n1, 0, H);
        }
      } else {
        b1_rows(0, M);
        if (x_terms) x_terms_rows(0, M, 0, H);
      }
    }
    // Batch 1, one thread, H in {16, 32, 48, 64}: the whole time loop in one kernel that keeps h and the
    // gate accumulators in registers (fast::recurrence_small_avx512_i32: the same codes as the loop below).
    if constexpr (std::is_same_v<GX, int32_t> && std::is_same_v<GH, int32_t>) {
      if (small_loop) {
        fast::recurrence_small_avx512_i32(view, pc.byte_tables, pc.plan32, R.packed_vnni.data(), R.bias_rowsum.data(),
                                          R.a_bias, gemm_x, T, p.direction != 0, b1_pipelined ? &b1_steps_ready : nullptr,
                                          hbuf[0].data(), hbuf[T % 2].data(), out + out_offset, static_cast<size_t>(out_stride));
        if (out_f.y) {
          for (int t = 0; t < T; ++t) {
            const size_t at = static_cast<size_t>(t) * out_stride + out_offset;
            out_f.rows_of(out + at, out_f.y + at, 0, H);
          }
        }
        return;
      }
    }
    // vnni16: this thread's rows of h as two u8 planes, refreshed before each step's GEMV
    std::vector<uint8_t> h_lo(R.vnni16 ? static_cast<size_t>(n1 - n0) * Kh : 0), h_hi(h_lo.size());
    int cur = 0;
    for (int step = 0; step < T; ++step) {
      const int t = p.direction == 0 ? step : T - 1 - step;
      const int16_t* h_cur = hbuf[cur].data();
      int16_t* h_next = hbuf[cur ^ 1].data();
      // B-1 of this step when it runs in the loop: this thread's rows and units.
      if constexpr (std::is_same_v<GX, int32_t>) {
        if (b1_per_step) {
          const size_t row0 = static_cast<size_t>(t) * N + n0;
          int32_t* gx0 = gemm_x + static_cast<size_t>(n0) * G;
          auto b1_channels = [&](int c0, int c1) {  // the VNNI GEMM on u8 codes, or the avx2 one on int16 codes
            if (W.vnni) {
              W.gemm_u8(xu8 + row0 * W.Kp, static_cast<size_t>(W.Kp), n1 - n0, c0, c1, gx0, static_cast<size_t>(G));
            } else {
              W.gemm(x16 + row0 * W.Kp, static_cast<size_t>(W.Kp), n1 - n0, c0, c1 - c0, gx0 + c0, static_cast<size_t>(G));
            }
          };
          if (j0 == 0 && j1 == H) {
            b1_channels(0, G);
          } else {
            for (int g = 0; g < 3; ++g) b1_channels(g * H + j0, g * H + j1);
          }
        }
      }
      // B-2 for this thread's rows and units: gates z, r, n.
      bool b2_done = false;
      // h_cur complete: the other parts' codes of the previous step (the split GEMV below waits itself)
      const bool split_gemv = (R.vnni || R.avx2_packed) && n1 - n0 == 1 && sync && std::is_same_v<GH, int32_t>;
      if (sync && step > 0 && !split_gemv) wait_for_others(part, step);
      if constexpr (std::is_same_v<GH, int32_t>) {
        int32_t* gh0 = gemm_h.data() + static_cast<size_t>(n0) * G;
        if (split_gemv) {
          // Batch 1 split over units: first the products with this part's own h codes (written by this
          // thread), then, after waiting for the other parts' step, the products with theirs.
          auto gemv_part = [&](int g, int k0, int k1, bool accumulate) {  // gate g's units of this part, k in [k0, k1)
            if (R.vnni) {
              R.gemv_u8_part(hu8[cur].data() + static_cast<size_t>(n0) * Kh, g * H + j0, g * H + j1, gh0, k0, k1, accumulate);
            } else {
              R.gemm_part(h_cur + static_cast<size_t>(n0) * Kh, static_cast<size_t>(Kh), 1, g * H + j0, g * H + j1, gh0,
                          static_cast<size_t>(G), k0, k1, accumulate);
            }
          };
          for (int g = 0; g < 3; ++g) gemv_part(g, k_own0, k_own1, false);
          if (step > 0) wait_for_others(part, step);
          for (int g = 0; g < 3; ++g) {
            if (k_own0 > 0) gemv_part(g, 0, k_own0, true);
            if (k_own1 < Kh) gemv_part(g, k_own1, Kh, true);
          }
          b2_done = true;
        } else if (R.vnni) {
          const uint8_t* hu = hu8[cur].data() + static_cast<size_t>(n0) * Kh;
          if (n1 - n0 == 1) {
            // Batch 1: a GEMV whose weight order alternates from step to step, so that each step starts on
            // the rows of R the previous one read last (still in L1, or in L2 when R does not fit L2:
            // BM_vnni_gemm/M:1/rows:3072/K:1024 with alternate:1).
            const bool descending = (step & 1) != 0;
            if (j0 == 0 && j1 == H) {
              R.gemv_u8(hu, 0, G, gh0, descending);
            } else {
              for (int g = 0; g < 3; ++g) R.gemv_u8(hu, g * H + j0, g * H + j1, gh0, descending);
            }
          } else if (j0 == 0 && j1 == H) {
            R.gemm_u8(hu, static_cast<size_t>(Kh), n1 - n0, 0, G, gh0, static_cast<size_t>(G));
          } else {
            for (int g = 0; g < 3; ++g) R.gemm_u8(hu, static_cast<size_t>(Kh), n1 - n0, g * H + j0, g * H + j1, gh0, static_cast<size_t>(G));
          }
          b2_done = true;
        }
      }
      if (!b2_done && R.vnni16) {
        fast::int16_to_planes(h_cur + static_cast<size_t>(n0) * Kh, h_lo.size(), h_lo.data(), h_hi.data());
        GH* gh0 = gemm_h.data() + static_cast<size_t>(n0) * G;
        if (j0 == 0 && j1 == H) {
          R.gemm_planes(h_lo.data(), h_hi.data(), static_cast<size_t>(Kh), n1 - n0, 0, G, gh0, static_cast<size_t>(G));
        } else {
          for (int g = 0; g < 3; ++g) R.gemm_planes(h_lo.data(), h_hi.data(), static_cast<size_t>(Kh), n1 - n0, g * H + j0, g * H + j1, gh0, static_cast<size_t>(G));
        }
        b2_done = true;
      }
      if (b2_done) {
        // the VNNI kernel wrote gemm_h
      } else if (j0 == 0 && j1 == H) {
        R.gemm(h_cur + static_cast<size_t>(n0) * Kh, static_cast<size_t>(Kh), n1 - n0, 0, G,
               gemm_h.data() + static_cast<size_t>(n0) * G, static_cast<size_t>(G));
      } else {
        for (int g = 0; g < 3; ++g) {
          R.gemm(h_cur + static_cast<size_t>(n0) * Kh, static_cast<size_t>(Kh), n1 - n0, g * H + j0, j1 - j0,
                 gemm_h.data() + static_cast<size_t>(n0) * G + g * H + j0, static_cast<size_t>(G));
        }
      }
      if (b1_pipelined) {  // this step's B-1 rows: wait for the B-1 thread only when it is behind
        fast::spin_until([&] { return b1_steps_ready.load(std::memory_order_acquire) > step; });
        if (step + 1 < T && b1_steps_ready.load(std::memory_order_acquire) > step + 1) {
          const int t_next = p.direction == 0 ? step + 1 : T - 2 - step;
          const char* next = reinterpret_cast<const char*>(gemm_x + static_cast<size_t>(t_next) * N * G);
          const size_t bytes = static_cast<size_t>(N) * G * sizeof(GX);
          for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(next + b);
        }
      }
      // The cell per element: gru_cell_element with B-1/B-2's constants folded (fused_cell_element).
      for (int n = n0; n < n1; ++n) {
        const GX* gx = gemm_x + ((b1_per_step ? 0 : static_cast<size_t>(t) * N) + n) * G;
        const GH* gh = gemm_h.data() + static_cast<size_t>(n) * G;
        const int16_t* hc = h_cur + static_cast<size_t>(n) * Kh;
        int16_t* hn = h_next + static_cast<size_t>(n) * Kh;
        const size_t at = (static_cast<size_t>(t) * N + n) * out_stride + out_offset;  // the row's output, codes and floats
        int32_t* dst = out + at;
        float* y = out_f.y ? out_f.y + at : nullptr;
        uint8_t* hn_u8 = R.vnni ? hu8[cur ^ 1].data() + static_cast<size_t>(n) * Kh : nullptr;
        if (!row_is_valid(lengths, t, n)) {  // padding: the state stays, the output is zp_h (the code of 0.0)
          for (int j = j0; j < j1; ++j) {
            hn[j] = hc[j];
            dst[j] = view.h.zp;
            if (hn_u8) hn_u8[j] = static_cast<uint8_t>(hc[j] + R.a_bias);
          }
          if (y) out_f.rows_of(dst, y, j0, j1);
        } else {
          cell_row(pc, x_terms, gx, gh, hc, j0, j1, hn, hn_u8, dst, out_f, y);
        }
      }
      cur ^= 1;
      if (sync) counters[static_cast<size_t>(part)].steps_done.store(step + 1, std::memory_order_release);
    }
  };
  if (b1_pipelined) {
    auto producer_and_recurrence = [&](int part) {
      if (part == 1) {
        b1_producer();
      } else {
        recurrence(0);
      }
    };
    parallel(2, producer_and_recurrence);
  } else {
    parallel(parts, recurrence);
  }
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
  // The persistent threads of runs with more than one thread (worker_team.h), started by the first such run.
  // One run at a time uses them; a run that finds them busy (another thread's run) starts its own threads.
  std::mutex team_mutex;
  std::unique_ptr<fast::WorkerTeam> team;
  // Batch 1 on the team: how to use the threads, chosen by measured wall time per N < threads and set of
  // allowed schedules (FastExecutorOptions::adaptive_split); guarded by team_mutex.
  std::map<int, fast::ScheduleChoice> schedules;
};

FastPathSupport fast_path_support(const QuantizedGru& model, const FastExecutorOptions& options) {
  return check_and_pack(model, options, nullptr);
}

FastQuantGru::FastQuantGru(const QuantizedGru& model, const FastExecutorOptions& options)
    : model_(model), options_(options), packed_(std::make_unique<Packed>()) {
  if (options_.threads <= 0) options_.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::pair<PackedMatrix, PackedMatrix>> mats;
  FastIsa isa = FastIsa::Avx2;
  support_ = check_and_pack(model, options_, &mats, &isa);
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
      pc.reset_view = pc.view;
      pc.reset_form.apply(pc.view);  // the linear_before_reset = 0 cell's second half for the kernels below
      const GruCellParamsView& v = pc.view;
      const bool all_tables = v.update_gate.impl == ActivationImpl::Table && v.reset_gate.impl == ActivationImpl::Table &&
                              v.new_gate.impl == ActivationImpl::Table;
      pc.vector_cell = isa == FastIsa::Avx512Vnni && all_tables;
      pc.avx2 = isa == FastIsa::Avx2;
      fast::prepare_byte_tables(v, &pc.byte_tables);
      pc.cell32 = (pc.vector_cell || (pc.avx2 && all_tables)) && pc.W.out_int32 && pc.R.out_int32 &&
                  fast::cell_fits_int32(v, pc.W.acc_max_abs, pc.R.acc_max_abs, pc.folded.x.data(), pc.folded.h.data());
      if (pc.cell32) {
        fast::prepare_cell32_plan(v, pc.folded.x.data(), pc.folded.h.data(), &pc.plan32);  // narrowing proved exact above
      }
      pc.cell64_avx2 = pc.avx2 && !pc.cell32 && fast::cell_avx2_i64_applies(v);
      // Not in the product form, or multiplier rescales (the vector kernels shift only): cell_row's element by
      // element branch, gru_cell_gates itself (docs/BENCHMARKS.md has its cost).
      if (v.reset_before_linear || v.multiplier_scales) pc.vector_cell = pc.cell32 = pc.cell64_avx2 = false;
      // The avx512-vnni int32 cell's per-channel additions (the offset, and in the floor form half) folded into
      // the u8 VNNI GEMMs' bias row sums, so that each linear of the cell does two operations and a load fewer
      // (Cell32Plan::sums_folded_x, _h). Only where nothing else reads those sums: not for the
      // linear_before_reset = 0 cell, whose C-2 reads B-2's raw sums (reset_before_step).
      if (pc.cell32 && pc.vector_cell && model.cells[i].linear_before_reset) {
        auto fold = [&](PackedMatrix& M, bool x_side) {
          if (!M.vnni) return false;
          for (size_t c = 0; c < static_cast<size_t>(M.rows); ++c) {
            // bias' = bias - fold in u32 (the GEMM's lanes wrap as well; the sum it ends with fits int32)
            const uint32_t folded = static_cast<uint32_t>(M.bias_rowsum[c]) - static_cast<uint32_t>(fast::cell32_sum_fold(pc.plan32, x_side, c));
            M.bias_rowsum[c] = static_cast<int32_t>(folded);  // the low 32 bits (GCC, Clang; C++20 requires it)
          }
          return true;
        };
        pc.plan32.sums_folded_x = fold(pc.W, true);
        pc.plan32.sums_folded_h = fold(pc.R, false);
      }
    }
  }
}

FastQuantGru::~FastQuantGru() = default;

bool FastQuantGru::layer0_reads_u8_rows() const {
  for (int d = 0; d < model_.num_directions; ++d) {
    const PackedMatrix& W = packed_->cells[static_cast<size_t>(d)].W;
    // (the linear_before_reset = 0 cell's time loop reads int16 x codes)
    if (!W.vnni || !W.out_int32 || W.a_bias != packed_->cells[0].W.a_bias || !model_.cell(0, d).linear_before_reset) {
      return false;
    }
  }
  return true;
}

QuantGruResult FastQuantGru::run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                                       QuantGruObserver* observer, const int32_t* lengths) const {
  if (!support_.supported || observer) return run_quantized_gru_codes(model_, q_x, T, N, q_h0, observer, lengths);
  if (T > 0 && N > 0 && layer0_reads_u8_rows()) {
    // Layer 0's operand rows straight from the codes, checked in the same pass (one pass where the int16 codes
    // and then the bytes take two); a code out of range gets the reference's message.
    Layer0Operands from_codes;
    from_codes.q_x = q_x;
    return run_prepared(nullptr, &from_codes, T, N, q_h0, lengths);
  }
  return run_prepared(q_x, nullptr, T, N, q_h0, lengths);
}

QuantGruResult FastQuantGru::run_prepared(const int32_t* q_x, const Layer0Operands* u8_rows, int T, int N, const int32_t* q_h0,
                                          const int32_t* lengths) const {
  if (T < 0 || N < 0) throw Error("run_quantized_gru: negative shape T=" + std::to_string(T) + " N=" + std::to_string(N));
  const QuantizedGru& model = model_;
  const int D = model.num_directions;
  const int H = model.hidden_size;
  const int L = model.num_layers;
  QuantGruResult result;
  result.T = T;
  result.N = N;
  result.h_n_codes.resize(static_cast<size_t>(L) * D * N * H);
  const size_t rows = static_cast<size_t>(T) * N;
  // Layer 0's x as padded int16 codes (x's code range fits int16: checked at pack time).
  int C = model.input_size;
  int Kx = pad16(C);
  // check_input_codes's test fused with the conversion (one AVX2 pass; check_input_codes then throws its
  // message). Every element of x16 is written (codes, then zero padding): no zero fill first. Not needed when
  // layer 0 reads the u8 operand rows (made below).
  LineArray<int16_t> x16;
  if (!u8_rows) {
    x16 = LineArray<int16_t>(rows * Kx);
    const TensorQuant& xq = model.input_quant();
    if (!fast::codes_to_int16_checked(q_x, rows, C, Kx, xq.qmin(), xq.qmax(), x16.data())) check_input_codes(model, q_x, T, N);
  }
  Parallel parallel;
  std::unique_lock<std::mutex> team_lock(packed_->team_mutex, std::defer_lock);
  if (options_.threads > 1 && team_lock.try_lock()) {
    if (!packed_->team) packed_->team = std::make_unique<fast::WorkerTeam>(options_.threads - 1);
    parallel.team = packed_->team.get();
  }
  // The last layer's float output is written by its time loop (FloatOutput) where dequantize_result_fast's float
  // arithmetic is exact.
  const bool float_output = float_dequantize_exact(model);
  const size_t output_count = rows * D * H;
  std::vector<int32_t> layer_output;
  // Layer 0's operand rows (u8_rows) and the sizing of the output vectors (their zero fill: 2 x 6.5 MB at
  // H = 256, T = 100, N = 64), the serial part of a run before its time loop: at a batch of at least the thread
  // count, split over the team (each thread its share of the rows; one vector each).
  LineArray<uint8_t> x_u8_owner;
  const uint8_t* x_u8 = nullptr;
  {
    const int prep_parts = u8_rows && parallel.team && N >= options_.threads ? options_.threads : 1;
    std::vector<char> codes_ok(static_cast<size_t>(prep_parts), 1);
    if (u8_rows) x_u8_owner = LineArray<uint8_t>(rows * packed_->cells[0].W.Kp);  // every byte written (codes, then padding)
    auto prepare = [&](int part) {
      if (u8_rows) {
        const PackedMatrix& W = packed_->cells[0].W;
        const TensorQuant& xq = model.input_quant();
        const size_t r0 = rows * static_cast<size_t>(part) / static_cast<size_t>(prep_parts);
        const size_t r1 = rows * static_cast<size_t>(part + 1) / static_cast<size_t>(prep_parts);
        uint8_t* dst = x_u8_owner.data() + r0 * W.Kp;
        if (u8_rows->x) {
          fast::quantize_f32_to_u8_rows_avx2(u8_rows->x + r0 * C, r1 - r0, C, W.Kp, xq.shift, xq.zp, xq.qmin(), xq.qmax(),
                                             W.a_bias, dst);
        } else {
          codes_ok[static_cast<size_t>(part)] = fast::codes_to_u8_rows_checked(u8_rows->q_x + r0 * C, r1 - r0, C, W.Kp, xq.qmin(),
                                                                              xq.qmax(), W.a_bias, dst);
        }
      }
      if (part == 0) layer_output.resize(output_count);
      if (part + 1 == prep_parts && float_output) result.output.resize(output_count);
    };
    parallel(prep_parts, prepare);
    if (std::find(codes_ok.begin(), codes_ok.end(), 0) != codes_ok.end()) check_input_codes(model, u8_rows->q_x, T, N);
    if (u8_rows) x_u8 = x_u8_owner.data();
  }
  check_sequence_lengths(lengths, T, N);
  // Batch 1 (N below the thread count) on the team: the recurrence on one thread alone, on one thread with
  // B-1 pipelined on another, or split over units, as this object's earlier runs measured (schedule_choice.h).
  int min_units_per_thread = options_.min_units_per_thread;
  int64_t min_pipelined_b1_macs = options_.min_pipelined_b1_macs;
  fast::ScheduleChoice* choice = nullptr;
  int schedule_kind = 0;  // of the run, when chosen: 0 one thread, 1 pipelined B-1, 2 split over units
  int schedule_index = 0;
  bool cold_team = false;  // the run's schedule uses the team and a helper had to be woken
  std::chrono::steady_clock::time_point run_start;
  if (options_.adaptive_split && parallel.team && N < options_.threads && T > 1) {
    // The kinds the fixed bounds allow for this run (layer 0's B-1 size decides the pipeline's).
    int kinds[3] = {0, 0, 0};
    int count = 0;
    kinds[count++] = 0;
    const double macs_b1 = static_cast<double>(T) * N * 3.0 * H * model.input_size;
    if (macs_b1 >= static_cast<double>(options_.min_pipelined_b1_macs)) kinds[count++] = 1;
    if (H / options_.threads >= options_.min_units_per_thread) kinds[count++] = 2;
    if (count > 1) {
      int kind_set = 0;
      for (int k = 0; k < count; ++k) kind_set |= 1 << kinds[k];
      const int key = N * 8 + kind_set;
      auto it = packed_->schedules.find(key);
      if (it == packed_->schedules.end()) {
        // schedule 0 (kind 0) runs on the caller's thread alone: its preempted runs are clipped, the others' not
        it = packed_->schedules.emplace(key, fast::ScheduleChoice(count, count - 1, 1u)).first;
      }
      choice = &it->second;
      schedule_index = choice->next();
      schedule_kind = kinds[schedule_index];
      if (schedule_kind < 2) min_units_per_thread = std::numeric_limits<int>::max();
      if (schedule_kind == 0) {
        min_pipelined_b1_macs = std::numeric_limits<int64_t>::max();
        // No helper needed: one still spinning after an earlier run goes to sleep now, so that this thread
        // keeps its CPU when another process wants the other one (the schedule_choice.h contention case).
        parallel.team->park();
      }
      cold_team = schedule_kind > 0 && parallel.team->any_asleep();
      run_start = std::chrono::steady_clock::now();
    }
  }
  for (int l = 0; l < L; ++l) {
    for (int d = 0; d < D; ++d) {
      const GruCellQuantParams& p = model.cell(l, d);
      const PackedCell& pc = packed_->cells[static_cast<size_t>(l * D + d)];
      const size_t h_offset = (static_cast<size_t>(l) * D + d) * N * H;
      std::vector<int32_t> q_h = initial_h_codes(model, q_h0, l, d, N);
      int32_t* h_final = result.h_n_codes.data() + h_offset;
      const int th = options_.threads;
      const int mu = min_units_per_thread;
      const Parallel& par = parallel;
      const int64_t mp = min_pipelined_b1_macs;
      const uint8_t* xu = l == 0 ? x_u8 : nullptr;
      FloatOutput out_f;
      if (float_output && l + 1 == L) {
        const TensorQuant& hq = p.q(GruTensor::h);
        out_f = FloatOutput{result.output.data(), static_cast<float>(hq.scale()), hq.zp};  // scale: a power of two
      }
      int32_t* out = layer_output.data();
      if (!p.linear_before_reset) {  // its own time loop (run_cell_fast_reset_before), on x16
        if (pc.W.out_int32 && pc.R.out_int32) {
          run_cell_fast_reset_before<int32_t, int32_t>(p, pc, x16.data(), T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, lengths);
        } else if (pc.W.out_int32) {
          run_cell_fast_reset_before<int32_t, int64_t>(p, pc, x16.data(), T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, lengths);
        } else if (pc.R.out_int32) {
          run_cell_fast_reset_before<int64_t, int32_t>(p, pc, x16.data(), T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, lengths);
        } else {
          run_cell_fast_reset_before<int64_t, int64_t>(p, pc, x16.data(), T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, lengths);
        }
      } else if (pc.W.out_int32 && pc.R.out_int32) {
        run_cell_fast<int32_t, int32_t>(p, pc, x16.data(), xu, T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, mu, mp, lengths);
      } else if (pc.W.out_int32) {
        run_cell_fast<int32_t, int64_t>(p, pc, x16.data(), xu, T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, mu, mp, lengths);
      } else if (pc.R.out_int32) {
        run_cell_fast<int64_t, int32_t>(p, pc, x16.data(), xu, T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, mu, mp, lengths);
      } else {
        run_cell_fast<int64_t, int64_t>(p, pc, x16.data(), xu, T, N, q_h, out, D * H, d * H, out_f, h_final, par, th, mu, mp, lengths);
      }
    }
    if (l + 1 < L) {
      // Requantize each direction's h codes into layer l+1's x space, exactly as the reference does.
      C = D * H;
      Kx = pad16(C);
      x16 = LineArray<int16_t>(rows * Kx, 0);
      for (size_t r = 0; r < rows; ++r) {
        for (int k = 0; k < C; ++k) {
          x16[r * Kx + k] = static_cast<int16_t>(requantize_h_to_next_x(model, l, k / H, layer_output[r * C + k]));
        }
      }
    }
  }

  if (choice) {
    const double micros = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - run_start).count();
    if (cold_team) {
      choice->record_cold(schedule_index, micros / T, T);
    } else {
      choice->record(schedule_index, micros / T, T);
    }
  }
  result.output_codes = std::move(layer_output);
  dequantize_result_fast(model, result, float_output);
  return result;
}

QuantGruResult FastQuantGru::run(const float* x, int T, int N, const float* h0, QuantGruObserver* observer,
                                 const int32_t* lengths) const {
  if (!support_.supported || observer) return run_quantized_gru(model_, x, T, N, h0, observer, lengths);
  const QuantizedGru& model = model_;
  const TensorQuant& xq = model.input_quant();
  const size_t x_count = static_cast<size_t>(T) * N * model.input_size;
  // Every layer-0 cell reads x as VNNI operand bytes: quantize straight into them (one pass instead of float ->
  // int32 codes -> int16 -> u8; the codes are in x's range by construction).
  const bool vectorized = xq.power_of_two() && xq.shift >= -60 && xq.shift <= 60 && T >= 0 && N >= 0;  // a real scale: the reference's quantize
  if (vectorized && layer0_reads_u8_rows()) {
    const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0, N);
    Layer0Operands from_floats;
    from_floats.x = x;
    return run_prepared(nullptr, &from_floats, T, N, q_h0.empty() ? nullptr : q_h0.data(), lengths);
  }
  LineArray<int32_t> q_vec;  // every element written by the quantization
  std::vector<int32_t> q_ref;
  const int32_t* q_x = nullptr;
  if (T >= 0 && N >= 0) {
    q_vec = LineArray<int32_t>(x_count);
    quantize_fast(xq, x, x_count, q_vec.data());
    q_x = q_vec.data();
  } else {  // run_codes refuses the shape
    q_x = q_ref.data();
  }
  const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0, N);
  return run_codes(q_x, T, N, q_h0.empty() ? nullptr : q_h0.data(), nullptr, lengths);
}

QuantGruResult run_quantized_gru_fast(const QuantizedGru& model, const float* x, int T, int N, const float* h0,
                                      QuantGruObserver* observer, const int32_t* lengths) {
  if (observer) return run_quantized_gru(model, x, T, N, h0, observer, lengths);
  return FastQuantGru(model).run(x, T, N, h0, nullptr, lengths);
}

QuantGruResult run_quantized_gru_fast_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                            const int32_t* q_h0, QuantGruObserver* observer, const int32_t* lengths) {
  if (observer) return run_quantized_gru_codes(model, q_x, T, N, q_h0, observer, lengths);
  return FastQuantGru(model).run_codes(q_x, T, N, q_h0, nullptr, lengths);
}

namespace {

// FastQuantGru::make_stepper's cell: one step of run_cell_fast's loop for the whole batch on one thread. The
// state arrives as int32 codes (the caller's), is converted to the operand forms of the cell's GEMMs (int16,
// u8 + a_bias, or two u8 planes) and the cell writes the new codes straight back into it.
class FastStepper : public GruCellStepper {
 public:
  FastStepper(const QuantizedGru& model, const std::vector<PackedCell>& cells, int N) : model_(model), cells_(cells), N_(N) {
    if (N < 0) throw Error("stepper: negative batch " + std::to_string(N));
    size_t kx = 0, kh = 0;
    for (const PackedCell& pc : cells) {
      kx = std::max(kx, static_cast<size_t>(pc.W.Kp));
      kh = std::max(kh, static_cast<size_t>(pc.R.Kp));
    }
    const size_t n = static_cast<size_t>(N);
    const size_t G = 3 * static_cast<size_t>(model.hidden_size);
    x16_ = LineArray<int16_t>(n * kx, 0);  // padding columns stay zero (codes_to_int16_checked rewrites them as 0)
    x_a_ = LineArray<uint8_t>(n * kx, 0);
    x_b_ = LineArray<uint8_t>(n * kx, 0);
    h16_ = LineArray<int16_t>(n * kh, 0);
    h_new16_ = LineArray<int16_t>(n * kh, 0);
    h_a_ = LineArray<uint8_t>(n * kh, 0);
    h_b_ = LineArray<uint8_t>(n * kh, 0);
    h_new_u8_ = LineArray<uint8_t>(n * kh, 0);
    gx32_ = LineArray<int32_t>(n * G, 0);
    gh32_ = LineArray<int32_t>(n * G, 0);
    gx64_ = LineArray<int64_t>(n * G, 0);
    gh64_ = LineArray<int64_t>(n * G, 0);
    if (!model.linear_before_reset()) reset_before_ = std::make_unique<ResetBeforeScratch>(N, static_cast<int>(kx), static_cast<int>(kh));
  }
  int batch() const override { return N_; }
  void step_cell(int layer, const int32_t* q_x, int32_t* q_h) override {
    const size_t index = static_cast<size_t>(layer) * model_.num_directions;
    const PackedCell& pc = cells_[index];
    const GruCellQuantParams& p = model_.cells[index];
    if (pc.W.out_int32 && pc.R.out_int32) {
      step<int32_t, int32_t>(p, pc, q_x, q_h, gx32_.data(), gh32_.data());
    } else if (pc.W.out_int32) {
      step<int32_t, int64_t>(p, pc, q_x, q_h, gx32_.data(), gh64_.data());
    } else if (pc.R.out_int32) {
      step<int64_t, int32_t>(p, pc, q_x, q_h, gx64_.data(), gh32_.data());
    } else {
      step<int64_t, int64_t>(p, pc, q_x, q_h, gx64_.data(), gh64_.data());
    }
  }

 private:
  // acc [N, 3H] = operand codes [N, K] (int32, within the operand's range) times M's rows, by the kernel
  // run_cell_fast uses for M (VNNI on u8 codes + a_bias, two u8 planes, or the AVX2 GEMMs on int16 codes).
  template <class OT>
  void gemm(const PackedMatrix& M, const TensorQuant& operand, const int32_t* codes, int K, int16_t* a16, uint8_t* a,
            uint8_t* b, OT* acc) {
    fast::codes_to_int16_checked(codes, static_cast<size_t>(N_), K, M.Kp, operand.qmin(), operand.qmax(), a16);
    packed_gemm_rows(M, a16, N_, a, b, 0, M.rows, acc, static_cast<size_t>(M.rows));
  }

  template <class GX, class GH>
  void step(const GruCellQuantParams& p, const PackedCell& pc, const int32_t* q_x, int32_t* q_h, GX* gx, GH* gh) {
    const int H = p.hidden_size;
    const size_t G = 3 * static_cast<size_t>(H);
    const size_t Kh = static_cast<size_t>(pc.R.Kp);
    if (!p.linear_before_reset) {  // the whole-sequence loop's step (reset_before_step), the new codes into q_h
      const TensorQuant& x = p.q(GruTensor::x);
      const TensorQuant& h = p.q(GruTensor::h);
      fast::codes_to_int16_checked(q_x, static_cast<size_t>(N_), p.input_size, pc.W.Kp, x.qmin(), x.qmax(), x16_.data());
      fast::codes_to_int16_checked(q_h, static_cast<size_t>(N_), H, pc.R.Kp, h.qmin(), h.qmax(), h16_.data());
      reset_before_step(pc, x16_.data(), h16_.data(), N_, gx, gh, *reset_before_, h_new16_.data(), q_h,
                        static_cast<size_t>(H), nullptr, 0, 0, FloatOutput{}, nullptr);  // codes only
      return;
    }
    gemm(pc.W, p.q(GruTensor::x), q_x, p.input_size, x16_.data(), x_a_.data(), x_b_.data(), gx);  // B-1
    gemm(pc.R, p.q(GruTensor::h), q_h, H, h16_.data(), h_a_.data(), h_b_.data(), gh);          // B-2
    for (int n = 0; n < N_; ++n) {
      const size_t row = static_cast<size_t>(n);
      uint8_t* hn_u8 = pc.R.vnni ? h_new_u8_.data() + row * Kh : nullptr;
      cell_row(pc, false, gx + row * G, gh + row * G, h16_.data() + row * Kh, 0, H, h_new16_.data() + row * Kh, hn_u8,
               q_h + row * static_cast<size_t>(H));
    }
  }

  const QuantizedGru& model_;
  const std::vector<PackedCell>& cells_;
  int N_;
  LineArray<int16_t> x16_, h16_, h_new16_;         // [N, Kp] int16 codes (x, h before and after the step)
  LineArray<uint8_t> x_a_, x_b_, h_a_, h_b_;       // [N, Kp] u8 codes + a_bias, or the low and high planes
  LineArray<uint8_t> h_new_u8_;                    // [N, Kp] the cell's u8 copy of the new h (VNNI R)
  LineArray<int32_t> gx32_, gh32_;                 // [N, 3H] accumulators, int32 where the proof allows
  LineArray<int64_t> gx64_, gh64_;                 // [N, 3H] else int64
  std::unique_ptr<ResetBeforeScratch> reset_before_;  // the linear_before_reset = 0 cell's (reset_before_step)
};

}  // namespace

std::unique_ptr<GruCellStepper> FastQuantGru::make_stepper(int N) const {
  if (!support_.supported) return nullptr;
  return std::make_unique<FastStepper>(model_, packed_->cells, N);
}


}  // namespace qgru
