#pragma once
// The fast executor's plan (private to lib/src/runtime/fast/): made once from a model by fast_path_support
// (qgru/runtime/fast_executor.h), it holds what the time loops read and nothing they must decide again:
// - the level (FastIsa) and why the fast path refuses the model when it does;
// - per weight matrix (PackedMatrix) the packed weights, their overflow proof and the kernels that read them as
//   function pointers: the GEMM into int32 or int64 sums, the one-row GEMV, the GEMV over a part of k (the split
//   recurrence), and the conversion of int16 operand codes into the form those kernels read (OperandForm);
// - per cell (PackedCell) the prepared constants (folded offsets, tables, the int32 cell's plan) and its kernel
//   table (CellKernels): the cell step of one batch row, its form on x terms, the x terms themselves and the
//   batch-1 small recurrence.
// Every choice among the kernels of fast_kernels.h happens here, once, from the level and the per-matrix and
// per-cell proofs; the executor's per-call code calls through the tables and tests no flag. The plan keeps
// pointers into the model's cells (GruCellQuantParams::view()): the model must outlive it and stay unchanged.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "fast_kernels.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/runtime/fast_executor.h"

namespace qgru::fast {

// The rows of a GEMM operand (x or h codes, rows lda apart, zero-padded to Kp) in the forms the kernels read;
// each kernel reads the fields its matrix's OperandForm names.
struct Operand {
  const int16_t* i16 = nullptr;  // int16 codes (Int16)
  const uint8_t* u8 = nullptr;   // codes + a_bias (U8), or the low plane (Planes)
  const uint8_t* hi = nullptr;   // the high plane (Planes)
  // The same rows from row `row` on (rows `lda` elements apart).
  Operand from_row(size_t row, size_t lda) const {
    const size_t at = row * lda;
    return {i16 ? i16 + at : nullptr, u8 ? u8 + at : nullptr, hi ? hi + at : nullptr};
  }
};

// What a matrix's kernels read: int16 codes (the avx2 level, 16-bit weights), u8 codes + a_bias (the VNNI GEMM of
// 8-bit operand codes), or two u8 planes (the VNNI GEMM of 16-bit operand codes, fast::int16_to_planes).
enum class OperandForm { Int16, U8, Planes };

struct PackedMatrix;
// C[m, c] for the operand rows m < rows and channels [c0, c1); C points at channel 0 of row 0, rows ldc apart.
template <class OT>
using GemmFn = void (*)(const PackedMatrix& M, const Operand& a, size_t lda, int rows, int c0, int c1, OT* C, size_t ldc);
// The same for one operand row (int32 sums); the VNNI level visits the weight groups in descending order when
// `descending` (the same sums), the others ignore it.
using GemvFn = void (*)(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, bool descending);
// One operand row over the operand elements [k0, k1) only, stored or (accumulate) added: parts covering [0, Kp)
// once give the GEMV's sums (the contracts of gemv_vnni_u8s8_part and gemm_avx2_packed_part).
using GemvPartFn = void (*)(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, int k0, int k1,
                            bool accumulate);
// The operand form of `count` int16 codes a16 into a (and b for the planes); nothing for Int16.
using OperandFn = void (*)(const PackedMatrix& M, const int16_t* a16, size_t count, uint8_t* a, uint8_t* b);

// One weight matrix ([rows, K] codes) prepacked for the kernels, with its proof for one operand space and the
// kernels chosen for it.
struct PackedMatrix {
  int rows = 0, K = 0, Kp = 0;
  bool int8 = true;
  std::vector<int8_t> q8;    // [rows, Kp] when int8
  std::vector<int16_t> q16;  // [rows, Kp] otherwise
  int chunk_vecs = 1;        // madd results per int32 lane before widening
  bool out_int32 = true;     // the whole sum fits int32: the kernels write int32 sums (else int64)
  int64_t acc_max_abs = 0;   // Kp · max|W| · max|operand|: a bound of every accumulator
  // The VNNI layout (fast_kernels.h; the avx512-vnni level's U8 and Planes forms, and the avx2 level's packed
  // GEMMs, which read it without a bias).
  int32_t a_bias = 0;                 // 128 (codes in [-128, 127]; the high plane) or 0 (codes in [0, 255])
  std::vector<int8_t> packed_vnni;    // [vnni_padded_rows(rows), Kp]
  std::vector<int32_t> bias_rowsum;   // [vnni_padded_rows(rows)] a_bias * Σ_k W[c, k]; |.| <= 128·128·Kp <= 2^30
  // The kernels (make_fast_plan). gemm32 is set when out_int32, else gemm64; gemv with gemm32; gemv_part only for
  // the int8 GEMMs whose sums provably fit int32 on both levels (U8, and the avx2 packed layout).
  OperandForm form = OperandForm::Int16;
  // The int8 GEMMs on the VNNI layout with int32 sums (U8, and the avx2 level's packed GEMMs): as efficient per MAC
  // on one step's rows as on all steps', so B-1 may run inside the time loop at larger batches.
  bool int8_packed = false;
  GemmFn<int32_t> gemm32 = nullptr;
  GemmFn<int64_t> gemm64 = nullptr;
  GemvFn gemv = nullptr;
  GemvPartFn gemv_part = nullptr;
  OperandFn to_operand = nullptr;
  // The number of u8 operand buffers the form needs (U8: 1, Planes: 2, Int16: 0).
  int operand_buffers() const { return form == OperandForm::U8 ? 1 : form == OperandForm::Planes ? 2 : 0; }
  template <class OT>
  GemmFn<OT> gemm() const {
    if constexpr (std::is_same_v<OT, int32_t>) {
      return gemm32;
    } else {
      return gemm64;
    }
  }
};

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
  void fill(const GruCellParamsView& v);
};

// A piecewise-linear activation tabulated over its whole input code range (at most 2^16 + 1 codes):
// entry q - q_in_min = evaluate_activation(pwl view, q), so evaluate_activation on the Table view returns
// the very same code for every (saturated) input, without the segment search and the int64 line.
struct TabulatedActivations {
  std::vector<int32_t> tables[3];
  // Replace the Pwl activations of `v` by tables (views into this object).
  void apply(GruCellParamsView& v);
};

// The linear_before_reset = 0 cell's C-3 sum (compute_new_gate_input_reset_before) in the other cell's product
// form, so that the cell kernels of every level run that cell's second half: rshift_round(1 · v, s) is
// rshift_round(v, s) for every shift s, so a reset gate whose every code is zp_r + 1 (r - zp_r = 1) with
// shift_reset_mul_hh_to_new_gate_input = shift_weight_hh_linear_to_new_gate_input gives compute_new_gate_input
// the sum's codes; C-1 and C-4 do not read r. The real reset gate stays in PackedCell::reset_view (C-2 and C-2a
// run before the second GEMM, reset_before_step). apply() leaves the view alone and returns false when
// zp_r + 1 is no reset gate code or the gate is not a table.
struct ResetBeforeForm {
  std::vector<int32_t> unit_reset_table;  // [reset_gate_input codes] every entry zp_r + 1
  bool apply(GruCellParamsView& v);
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

struct PackedCell;
// The cell step of one batch row for the units [j0, j1): gx is B-1's accumulator row (int32 or int64 as W's
// sums), or for cell_xterms the x terms made of it; gh is B-2's row; hc the row's h codes before the step. Writes
// the new codes to hn and dst ([j0, j1)), and as codes + R.a_bias to hn_u8 when it is not null. y (may be null):
// the row's float output at unit 0, out_f's values of the new codes (the avx512-vnni int32 kernels write them
// beside the codes, fast::FloatCopy: the same arithmetic; the others from dst after the step).
using CellRowFn = void (*)(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1,
                           int16_t* hn, uint8_t* hn_u8, int32_t* dst, const FloatOutput& out_f, float* y);
// x_terms_avx2_i32 / x_terms_avx512_i32's contract.
using XTermsFn = void (*)(const GruCellParamsView& p, const Cell32Plan& plan, int32_t* gx, size_t ldg, int rows, int j0,
                          int j1);
// recurrence_small_avx512_i32's contract.
using SmallRecurrenceFn = void (*)(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                                   const int8_t* R_packed, const int32_t* R_bias_rowsum, int32_t a_bias,
                                   const int32_t* x_terms, int T, bool reverse, const std::atomic<int>* steps_ready,
                                   const int16_t* h16_in, int16_t* h16_out, int32_t* out, size_t out_stride);

// C-2 and C-2a of the linear_before_reset = 0 cell for one batch row and the units [j0, j1) (reset_hidden_avx512's
// contract, fast_kernels.h, on PackedCell::reset_view): gx, gh the row's B-1 and B-2 sums (int32 or int64 as the
// matrices' proofs say; only the reset channels H + j are read), hc the row's h codes; writes q_reset_hidden[j].
using ResetHiddenFn = void (*)(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1,
                               int16_t* q_reset_hidden);

// A cell's kernel table, chosen once by make_fast_plan from the level and the cell's proofs.
struct CellKernels {
  const char* name = "";                      // the cell kernel, for tests and messages
  CellRowFn cell = nullptr;                   // on B-1's sums
  CellRowFn cell_xterms = nullptr;            // on the x terms (int32 cells only, with x_terms)
  XTermsFn x_terms = nullptr;                 // the int32 cell's x side out of the time loop (null: none)
  SmallRecurrenceFn small_recurrence = nullptr;  // batch 1, one thread, H in {16, 32, 48, 64} (null: none)
  // The linear_before_reset = 0 cell only (null otherwise): its C-2 / C-2a kernel, and its name for tests and messages.
  ResetHiddenFn reset_hidden = nullptr;
  const char* reset_hidden_name = "";
};

// Everything the time loop of one cell needs, prepared once at load.
struct PackedCell {
  PackedMatrix W;  // [3H, C] against x codes
  PackedMatrix R;  // [3H, H] against h codes
  GruCellParamsView view{};  // the cell's view, Pwl activations replaced by their tables
  FoldedOffsets folded;
  TabulatedActivations tabulated;
  CellByteTables byte_tables{};  // for the avx512-vnni level's cell kernels
  Cell32Plan plan32;  // for the int32 cells: the folded offsets as int32 (|.| <= 2^30 by cell_fits_int32), split shifts
  // The linear_before_reset = 0 cell: `view` in the product form when reset_form applied (else the cell's own view,
  // run element by element), reset_view the cell's own (its reset gate for C-2 and C-2a).
  GruCellParamsView reset_view{};
  CellByteTables reset_byte_tables{};  // of reset_view (its real reset gate), for the avx512-vnni level's reset_hidden
  ResetBeforeForm reset_form;
  CellKernels kernels;
};

}  // namespace qgru::fast

namespace qgru {

// The plan of one model for one level (fast_path_support makes it; FastQuantGru runs it).
struct FastPlan {
  FastIsa isa = FastIsa::Avx2;
  std::vector<fast::PackedCell> cells;  // model.cells' order
  // Every layer-0 cell reads x as the same VNNI operand rows (codes + layer0_a_bias), so run() and run_codes() may
  // make them in one pass from the floats or codes.
  bool layer0_u8_rows = false;
  int32_t layer0_a_bias = 0;
};

// The level a run uses and the plan, or why the fast path refuses (support.plan is then null).
FastPathSupport make_fast_plan(const QuantizedGru& model, const FastExecutorOptions& options);

}  // namespace qgru
