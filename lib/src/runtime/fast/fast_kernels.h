#pragma once
// Private to the fast executor (qgru/runtime/fast_executor.h): the integer GEMM kernels.
//
// gemm(A, lda, M, B, ldb, Nc, Kp, chunk_vecs, C, ldc):
//   C[m * ldc + c] = Σ_{k < Kp} A[m * lda + k] * B[c * ldb + k]      for m < M, c < Nc
// A: [M, lda] int16 codes (x or h), B: [Nc, ldb] int8 or int16 weight codes (rows of W or R), both
// zero-padded so that Kp (a multiple of 16) elements per row may be read. C: int32 or int64; C's rows may
// be strided (ldc >= Nc); nothing outside the M x Nc block is written.
// Exactness: products via _mm256_madd_epi16; the caller guarantees that one madd lane (two products)
// fits int32 and that `chunk_vecs` 16-element vectors of madd results fit one int32 lane; the kernel
// widens each lane to int64 after every chunk, so the int64 total is the exact integer sum. Storing into
// an int32 C is valid only when the caller proved the whole sum fits int32.
//
// The AVX-512 level (gemm_avx512_vnni.cpp, cell_avx512_i64.cpp, cell_avx512_i32.cpp; AVX512F/BW/DQ/VL/VBMI + AVX512-VNNI):
//
// gemm_vnni_u8s8(A, lda, M, Bp, Kp, bias_rowsum, c0, c1, C, ldc):
//   C[m * ldc + c] = Σ_{k < Kp} (A[m * lda + k] - a_bias) * W[c, k]      for m < M, c0 <= c < c1
// A: [M, lda] uint8, the signed activation codes plus a_bias (128 for codes in [-128, 127], 0 for codes in
// [0, 255]), zero padding beyond K allowed (it meets zero weights). Bp: the int8 weights W [rows, Kp]
// prepacked by pack_vnni_u8s8 (groups of 64 rows, for each k4 the 64 rows' 4 consecutive k, one row per
// int32 lane: Bp[((g * Kp/4 + k4) * 64 + r) * 4 + i] = W[64 g + r, 4 k4 + i], so that a group is one
// sequential stream and a zmm load holds 16 rows; rows padded to vnni_padded_rows(rows) with zero weights).
// bias_rowsum[c] = a_bias * Σ_k W[c, k] (int32, padded like the rows). C points at channel 0 of
// row 0; only the channels [c0, c1) of the M rows are written (c0 need not be a multiple of 16).
// Exactness: vpdpbusd adds four products u·w (u in [0, 255], w in [-128, 127], |u·w| <= 32640) into an
// int32 lane without saturation; the caller guarantees Kp <= kVnniMaxK = 65536, so every partial sum
// |Σ u·w| <= 65536·32640 < 2^31 and the lane holds the exact integer. Σ (x + a_bias)·w - a_bias·Σ w is
// then Σ x·w exactly: |a_bias·Σ w| <= 128·128·65536 = 2^30 and |Σ x·w| <= 65536·255·128 < 2^31, int32
// throughout (and the int32 subtraction is exact whenever its result fits, as it does).
//
// cell_rows_avx512(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst):
//   for j in [j0, j1): q_h_new[j] = fused cell element (the reference's gru_cell_element with B-1/B-2's
//   constants folded: offset_x[c] = rshift_round(q_bw[c], shift_bw_to_gemm_x[c]) - W_sum[c]·zp_x, offset_h
//   likewise), written to h_new16[j] (int16), dst[j] (int32) and, when h_new_u8 is not null, to
//   h_new_u8[j] = q_h_new + h_bias (uint8; the caller guarantees h's code range plus h_bias lies in [0, 255]).
// gx, gh: the raw GEMM accumulators of this batch row, [3H] (channel c = g·H + j), int32 or int64. h_old:
// [H] int16 codes of the state before the step. Every activation of p must be a table (impl Table).
// Arithmetic: eight int64 lanes, the same integer operations as gru_cell_element in the same order:
// rshift_round as (|v| + 2^(s-1)) >> s with the sign put back (= rshift_round's
// floor(|v| / 2^s) + [fraction >= half]; |v| <= 2^62 by the artifact's overflow proof, so |v| + 2^61
// cannot wrap uint64), or v·2^-s for s <= 0; saturation by 64-bit min/max; the three products by
// vpmullq (the exact int64 product whenever it fits int64, which the overflow proof guarantees); tables
// read at the saturated index (always inside the table): by vpermt2b from four registers when the table
// has at most 256 entries that fit a byte (u8 or i8), else by 32-bit gathers.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qgru/fixed/gru_cell.h"

namespace qgru::fast {

// The longest K the VNNI kernel accepts (see the exactness note above).
constexpr int kVnniMaxK = 65536;

// True when the AVX-512 kernels were compiled in (x86-64 with GCC or Clang).
bool avx512_kernels_built();

// The packed row count: rows rounded up to a multiple of 64.
inline int vnni_padded_rows(int rows) { return (rows + 63) / 64 * 64; }

// Pack W [rows, Kp] int8 (row stride Kp, Kp a multiple of 4) into the VNNI layout above: writes
// vnni_padded_rows(rows) · Kp bytes.
void pack_vnni_u8s8(const int8_t* W, int rows, int Kp, int8_t* Bp);

// The activation tables of a cell in byte form, for the cell kernel: gate g (z, r, n) has one when its
// activation is a table of at most 256 entries whose codes all fit u8 (is_signed false) or i8 (true);
// table[g][i] holds entry i's low byte, zeros beyond the table. Prepared once at load.
struct CellByteTables {
  bool bytes[3];
  bool is_signed[3];
  alignas(64) int8_t table[3][256];
};
void prepare_byte_tables(const GruCellParamsView& p, CellByteTables* out);

void gemm_vnni_u8s8(const uint8_t* A, size_t lda, int M, const int8_t* Bp, int Kp, const int32_t* bias_rowsum,
                    int c0, int c1, int32_t* C, size_t ldc);
// gemm_vnni_u8s8 with M = 1 (the batch-1 recurrence's GEMV): the same sums, the weight groups visited in
// ascending order or, when `descending`, in descending order. Alternating the order from step to step
// starts each step on the weights the previous step read last, which are still in L1.
void gemv_vnni_u8s8(const uint8_t* a, const int8_t* Bp, int Kp, const int32_t* bias_rowsum, int c0, int c1,
                    int32_t* c, bool descending);
// gemv_vnni_u8s8 over the operand elements k in [k_begin, k_end) only (multiples of 4 within [0, Kp]): without
// `accumulate` c[ch] = Σ_{k in range} a[k]·W[ch, k] - bias_rowsum[ch]; with it c[ch] += Σ_{k in range}
// a[k]·W[ch, k]. Parts covering [0, Kp) once, the first without `accumulate`, give gemv_vnni_u8s8's c: each
// partial sum is an exact int32 (fewer terms than the whole, same bound), and int32 addition, exact modulo
// 2^32, gives the exact total because the total fits int32 (the contract above). The split recurrence
// computes its own units' part of h first and the part the other threads write after waiting for them.
// gemm_vnni_s16s8(A_lo, A_hi, lda, M, Bp, Kp, bias_rowsum, c0, c1, C, ldc): gemm_vnni_u8s8's product for 16-bit
// operand codes A (int16, e.g. the int16-activations preset's x and h) against int8 weights, the codes given
// as two u8 planes (int16_to_planes): A_lo = A & 255 and A_hi = (A >> 8) + 128, so A = A_lo + 256·(A_hi - 128).
// Bp: the weights in the VNNI layout; bias_rowsum[c] = 128·Σ_k W[c, k]. Exactness: both planes' products are
// vpdpbusd's u8 x s8 with the bound above (Kp <= kVnniMaxK): Σ A_lo·w and Σ A_hi·w are exact int32, Σ A_hi·w -
// bias_rowsum = Σ (A >> 8)·w is exact (|.| <= 2^30), and C = Σ A_lo·w + 256·Σ (A >> 8)·w is the exact sum: in
// int64 lanes for an int64 C; for an int32 C only when the caller proved |C| <= 2^31 - 1 (the int32 lane
// arithmetic is exact modulo 2^32, so its result is then that sum). Each weight vector is read once for both
// planes (two vpdpbusd), so the GEMV reads R's int8 bytes once per step like the 8-bit level.
void gemm_vnni_s16s8(const uint8_t* A_lo, const uint8_t* A_hi, size_t lda, int M, const int8_t* Bp, int Kp,
                     const int32_t* bias_rowsum, int c0, int c1, int32_t* C, size_t ldc);
void gemm_vnni_s16s8(const uint8_t* A_lo, const uint8_t* A_hi, size_t lda, int M, const int8_t* Bp, int Kp,
                     const int32_t* bias_rowsum, int c0, int c1, int64_t* C, size_t ldc);
// int16_to_planes(x16, n, lo, hi): lo[i] = x16[i] & 255, hi[i] = (x16[i] >> 8) + 128 (arithmetic shift).
void int16_to_planes(const int16_t* x16, size_t n, uint8_t* lo, uint8_t* hi);
void gemv_vnni_u8s8_part(const uint8_t* a, const int8_t* Bp, int Kp, const int32_t* bias_rowsum, int c0, int c1,
                         int32_t* c, bool descending, int k_begin, int k_end, bool accumulate);

// The same step on sixteen int32 lanes (cell_rows_avx512_i32): int32 accumulators, the folded offsets as
// int32, and every intermediate proved by cell_fits_int32 to stay within ±2^30 (so that one more addition
// of a term within ±2^30 cannot wrap, |v| + 2^(s-1) fits vpsrlvd's unsigned lane, and the vpmulld products
// are exact). The proof, per cell at load, from the accumulator bounds (|gemm_x| <= gemm_x_max_abs, e.g.
// Kp·max|W|·max|x|) and the code ranges: |gemm + offset[c]| and its shifted value plus the linear's zero
// point; each gate input's two shifted code differences plus its zero point; |r - zp_r|·|hh - zp_hh| and
// its shifted value; |n - zp_n| aligned to h; |u - zp_u|·|h - zp_h| + |1 - u|·|n_aligned|, shifted, plus zp_h.
// The int8 preset passes while Kp·max|W|·max|x| plus the offsets stays below 2^30 (K up to tens of
// thousands); 16-bit activations do not (their products reach 2^32) and use the int64 kernel.
bool cell_fits_int32(const GruCellParamsView& p, int64_t gemm_x_max_abs, int64_t gemm_h_max_abs,
                     const int64_t* offset_x, const int64_t* offset_h);
// The int32 cell's constants, prepared once per cell at load by prepare_cell32_plan (only after
// cell_fits_int32 held for the same offsets) so that the step does fewer operations per lane:
// - per channel c of [3H]: the folded offset as int32 (|.| <= 2^30 by the proof) and the shift s of
//   rshift_round split into right = max(s, 0), left = max(-s, 0), half = 2^(right-1) as u32 bits (0 when
//   right is 0 or above 32): rshift_round(v, s) = sign(v)·(((|v| + half) >> right) << left), one formula for
//   both signs of s (for s <= 0 it is sign(v)·(|v| << -s) = v·2^-s; counts of 32 and more give 0 as in
//   rshift_round_v32);
// - a linear's code minus its zero point, saturate(v + zp) - zp, is min(max(v, q_min - zp), q_max - zp);
// - a gate's table index from the sum of its two shifted terms (without the gate input's zero point):
//   clamp(clamp(sum + zp, q_min, q_max), q_in_min, q_in_max) - q_in_min = clamp(sum, lo, hi) + add with
//   [lo, hi] the intersection of [q_min - zp, q_max - zp] and [q_in_min - zp, q_in_max - zp] (when they are
//   disjoint, the one end of the table range that every value saturates to) and add = zp - q_in_min.
// - every constant that is the same for all units, as sixteen equal int32 lanes (Cell32Lanes), so that a call
//   of the kernel (one per time step) reads each where it is used instead of broadcasting ~40 of them first
//   (a fifth of a step's instructions at H = 64).
struct alignas(64) Cell32Lanes {
  // The eight uniform shifts of C-1 .. C-4, in this order, then C-2a's (the linear_before_reset = 0 cell's r ⊙ h).
  enum Shift { IhZ, HhZ, IhR, HhR, IhN, RhN, NToH, U, RhH, kShifts };
  int32_t ih_lo[16], ih_hi[16], hh_lo[16], hh_hi[16];   // linear code - zp ranges (ih: weight_ih_linear)
  int32_t gate_lo[3][16], gate_hi[3][16], gate_add[3][16];  // z, r, n
  int32_t h_zp[16], h_min[16], h_max[16];
  int32_t zp_update_gate_output[16], zp_reset_gate_output[16], zp_new_gate_output[16];
  int32_t one_in_update_gate_scale[16];                 // |.| <= 2^30 (proved)
  int32_t shift_count[kShifts][16];                     // |s| (a count of 32 or more shifts every bit out)
  int32_t shift_half[kShifts][16];                      // s > 0: 2^(s-1) as u32 bits (0 beyond 32)
  int32_t shift_sign[kShifts];                          // 1: s > 0 (rounded right shift), 0: s = 0, -1: left shift
  int32_t shift_floor[kShifts];                         // 1: 1 <= s <= 30 (the floor form of rshift_round applies)
};
struct Cell32Plan {
  std::vector<int32_t> offset_x, right_x, left_x, half_x;  // [3H], B-1's channels
  std::vector<int32_t> offset_h, right_h, left_h, half_h;  // [3H], B-2's channels
  int32_t ih_lo = 0, ih_hi = 0, hh_lo = 0, hh_hi = 0;      // linear code - zp ranges (ih: weight_ih_linear)
  int32_t gate_lo[3] = {0, 0, 0}, gate_hi[3] = {0, 0, 0}, gate_add[3] = {0, 0, 0};  // z, r, n
  // True when every channel's shift of that side lies in [1, 30]: then, for |v| <= 2^30,
  // rshift_round(v, s) = (v + half + (v >> 31)) >> s (arithmetic shifts; half = 2^(s-1), so the sum stays
  // within ±(2^30 + 2^29)), which the AVX2 cell uses instead of the sign-magnitude form (4 operations instead
  // of 7). Derivation: for v >= 0 both are floor((v + half) / 2^s); for v < 0, -floor((-v + half) / 2^s) =
  // floor((v - half + 2^s - 1) / 2^s) = floor((v + half - 1) / 2^s), as 2^s - half = half.
  bool floor_x = false, floor_h = false;
  // True when the sums the avx512-vnni kernels read for that side already hold the per-channel addition of
  // cell32_sum_fold (the offset, and in the floor form half as well), folded by the executor into the VNNI
  // GEMM's bias row sums, so that the cell adds nothing: in the floor form a = v + half, and since v < 0
  // exactly when a < half, rshift_round(v, s) = (a - [a < half]) >> s: three operations and two loads, where
  // adding the offset and then the floor form take five operations and three loads. Only the avx512-vnni
  // kernels read these flags (cell_rows_avx512_i32, its _xterms form, x_terms_avx512_i32,
  // recurrence_small_avx512_i32); the avx2 level's GEMMs have no bias to fold into and its plans keep both false.
  bool sums_folded_x = false, sums_folded_h = false;
  Cell32Lanes lanes{};
};
void prepare_cell32_plan(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, Cell32Plan* out);
// What channel c's sum of side x (B-1) or h (B-2) holds beyond Σ x·w when that side is folded: the offset, plus
// half in the floor form; as int32 bits (u32 wrap: the GEMM's int32 lanes wrap too, and the sum they end with,
// |v| + half <= 2^30 + 2^29, fits int32, so it is exact). The executor subtracts it from the bias row sums
// (bias'[c] = bias[c] - fold, the same wrap); a test adds it to raw sums.
int32_t cell32_sum_fold(const Cell32Plan& plan, bool x_side, size_t c);
// The dequantized copy of the new h codes an int32 cell kernel writes beside them when y is not null:
// y[j] = float(code - zp)·scale, the executor's FloatOutput arithmetic (code - zp in int32, converted, then one
// float product: exact while |code - zp| < 2^24 and scale is a power of two the product neither overflows nor
// takes below float's normal range, which float_dequantize_exact checks before the executor asks for it).
struct FloatCopy {
  float* y = nullptr;  // at unit 0 of the row, like dst
  float scale = 0.0f;
  int32_t zp = 0;
};
// C-2 and C-2a of the linear_before_reset = 0 cell on int32 lanes (reset_hidden_avx512's contract; sixteen lanes here,
// eight in reset_hidden_avx2_i32): p the cell's own view (its reset gate a table; byte_tables prepared from it), plan
// the int32 plan of the cell's product-form view (cell_fits_int32 held for it: C-2's operations and bounds are the
// reset gate's in both views, which differ only in that gate's table), gx, gh int32 sums. The reset gate as
// cell_rows_avx512_i32 computes it, then (r - zp_r)·(h - zp_h) by vpmulld (|.| <= |r - zp_r|max·|h - zp_h|max <= 2^30
// by reset_hidden_fits_int32, so exact), rshift_round by the plan's RhH shift (the bounds of rshift_round_u32: the
// shifted value plus zp_h within 2^30, proved there too), plus zp_h, clamped into h's codes.
bool reset_hidden_fits_int32(const GruCellParamsView& p);
void reset_hidden_avx512_i32(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                             const int32_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden);
void reset_hidden_avx2_i32(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* gx, const int32_t* gh,
                           const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden);
void cell_rows_avx512_i32(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                          const int32_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                          uint8_t* h_new_u8, int32_t h_bias, int32_t* dst, const FloatCopy& y = FloatCopy{});
// The x side of the int32 cell moved out of the time loop: x_terms_avx512_i32 replaces, in place, the raw
// B-1 accumulators of `rows` rows (stride ldg) for the units [j0, j1) of each gate (channels g·H + j) by that
// gate's x term in its gate input's space: rshift_round(weight_ih_linear code - zp, shift_weight_ih_linear_to_
// <gate>_input), the very operations cell_rows_avx512_i32 applies to them (it depends on x alone, not on h).
// cell_rows_avx512_i32_xterms is cell_rows_avx512_i32 reading those terms instead of the accumulators: the
// same codes, with fewer operations between two time steps.
void x_terms_avx512_i32(const GruCellParamsView& p, const Cell32Plan& plan, int32_t* gx, size_t ldg, int rows, int j0, int j1);
void cell_rows_avx512_i32_xterms(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                                 const int32_t* x_terms, const int32_t* gh, const int16_t* h_old, int j0, int j1,
                                 int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst,
                                 const FloatCopy& y = FloatCopy{});

// The whole time loop of one cell at batch 1 on one thread, for H in {16, 32, 48, 64} with the int32 cell and
// R in the VNNI layout with K = H (small_recurrence_applies): h (u8 codes + a_bias in one register, int32 codes
// in up to four) and the GEMV's up to twelve accumulators stay in registers from one step to the next, and
// the cell reads the accumulators directly. Per step the same operations as gemv_vnni_u8s8 followed by
// cell_rows_avx512_i32_xterms (the same int32 sums, then the shared cell block), hence the same codes; what
// goes is the round trip of the gate accumulators and h codes through memory and the per-call set-up that
// dominate a step at these sizes.
// x_terms: [T, 3H] x terms (x_terms_avx512_i32), row t for time t; steps run t = 0 .. T-1, or T-1 .. 0 when
// `reverse`. steps_ready: null, or a counter the pipelined B-1 publishes: step s reads its x terms after
// *steps_ready > s (acquire). h16_in: [H] int16 codes of the initial state; h16_out (may be h16_in): the codes
// after the last step. out: the codes of time t at out + t·out_stride, H of them.
inline bool small_recurrence_applies(int H, int Kp) { return H >= 16 && H <= 64 && H % 16 == 0 && Kp == H; }
void recurrence_small_avx512_i32(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                                 const int8_t* R_packed, const int32_t* R_bias_rowsum, int32_t a_bias,
                                 const int32_t* x_terms, int T, bool reverse, const std::atomic<int>* steps_ready,
                                 const int16_t* h16_in, int16_t* h16_out, int32_t* out, size_t out_stride);

void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                      const int32_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                      uint8_t* h_new_u8, int32_t h_bias, int32_t* dst);
void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                      const int32_t* gx, const int64_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                      uint8_t* h_new_u8, int32_t h_bias, int32_t* dst);
void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                      const int64_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                      uint8_t* h_new_u8, int32_t h_bias, int32_t* dst);
void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                      const int64_t* gx, const int64_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                      uint8_t* h_new_u8, int32_t h_bias, int32_t* dst);

// cell_rows_avx512_multiplier: cell_rows_avx512 for a multiplier-scale cell (docs/FIXED_POINT.md §1a): every rescale
// multiply_rshift_round(v, m, s) = rshift_round(v·m, s), v·m by vpmullq (the exact int64 product: the artifact's
// overflow proof bounds |v|·m by 2^62 for every rescale, which is also rshift_round_v's input contract), the
// per-channel multipliers of B-1 / B-2 read beside their shifts. Otherwise the same lanes and operations.
//
// reset_hidden_avx512(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, q_reset_hidden), and its
// _multiplier form: C-2 and C-2a of the linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a) for j in [j0, j1):
//   q_reset_hidden[j] = gru_cell_reset_hidden_gates(p, requantize_gemm_x(p, H + j, gx[H + j] + offset_x[H + j]),
//                                                   requantize_gemm_h(p, H + j, gh[H + j] + offset_h[H + j]), h_old[j])
// p: the cell's own view (its real reset gate, a Table; byte_tables prepared from it); gx, gh: the row's raw B-1
// and B-2 sums [3H] (only the reset channels are read); q_reset_hidden: int16 codes in h's space (the operand of
// the step's second GEMM). Eight int64 lanes, cell_rows_avx512's operations for the reset channel, then
// (r - zp_r)·(h - zp_h) by vpmullq (|.| < 2^32 for code ranges of at most 16 bits) rescaled into h's space and
// saturated into its code range.
// A sigmoid gate's input (compute_sigmoid_gate_input, C-1 / C-2) as the int64 kernels of both levels read it: the
// two rescales (multiplier, read only in a multiplier-scale cell, and shift) into the gate input's space, and its codes.
struct SigmoidGateRescales {
  int32_t multiplier_ih, shift_ih, multiplier_hh, shift_hh;
  CodeSpace input;
};
inline SigmoidGateRescales update_gate_rescales(const GruCellParamsView& p) {
  return {p.multiplier_weight_ih_linear_to_update_gate_input, p.shift_weight_ih_linear_to_update_gate_input,
          p.multiplier_weight_hh_linear_to_update_gate_input, p.shift_weight_hh_linear_to_update_gate_input, p.update_gate_input};
}
inline SigmoidGateRescales reset_gate_rescales(const GruCellParamsView& p) {
  return {p.multiplier_weight_ih_linear_to_reset_gate_input, p.shift_weight_ih_linear_to_reset_gate_input,
          p.multiplier_weight_hh_linear_to_reset_gate_input, p.shift_weight_hh_linear_to_reset_gate_input, p.reset_gate_input};
}
#define QGRU_FAST_DECLARE_I64_KERNELS(GX, GH)                                                                              \
  void cell_rows_avx512_multiplier(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x,  \
                                   const int64_t* offset_h, const GX* gx, const GH* gh, const int16_t* h_old, int j0,      \
                                   int j1, int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst);             \
  void reset_hidden_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x,          \
                           const int64_t* offset_h, const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1,      \
                           int16_t* q_reset_hidden);                                                                       \
  void reset_hidden_avx512_multiplier(const GruCellParamsView& p, const CellByteTables& byte_tables,                       \
                                      const int64_t* offset_x, const int64_t* offset_h, const GX* gx, const GH* gh,        \
                                      const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden);                      \
  void cell_rows_avx2_multiplier(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx, \
                                 const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,   \
                                 int32_t h_bias, int32_t* dst);                                                            \
  void reset_hidden_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx,        \
                         const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden);                     \
  void reset_hidden_avx2_multiplier(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h,           \
                                    const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1,                      \
                                    int16_t* q_reset_hidden);
QGRU_FAST_DECLARE_I64_KERNELS(int32_t, int32_t)
QGRU_FAST_DECLARE_I64_KERNELS(int32_t, int64_t)
QGRU_FAST_DECLARE_I64_KERNELS(int64_t, int32_t)
QGRU_FAST_DECLARE_I64_KERNELS(int64_t, int64_t)
#undef QGRU_FAST_DECLARE_I64_KERNELS

// True when the AVX2 kernels were compiled in (x86-64 with GCC or Clang).
bool avx2_kernels_built();

// quantize_f32_avx2(x, n, shift, zp, q_min, q_max, q): q[i] = TensorQuant::quantize(x[i]) for the tensor
// (shift, zp, [q_min, q_max]), i.e. clamp(round(x·2^shift) + zp) with round half away from zero and NaN -> zp,
// for |shift| <= 60. Four doubles at a time: float -> double and the product by 2^shift are exact (no
// overflow or underflow for |shift| <= 60), t = trunc(v) and v - t are exact, and t ± 1 where
// |v - t| >= 0.5 is std::round's result; ±inf saturate like the scalar comparison.
// When q_min, q_max and zp lie within ±2^20 (every code range the fast path accepts), eight floats at a time
// in float arithmetic instead, the same result: 2^shift is exact in float for |shift| <= 60; x·2^shift is
// exact unless it overflows (±inf: saturates, as the double product beyond the range does) or falls below
// 2^-126 (then both round to 0); trunc and v - t are exact; t + away + zp is exact while |t| <= 2^23, and
// beyond that its magnitude exceeds 2^23 - 2^20 > 2^20 on either side of rounding, so the clamp gives the
// same end (rounding is monotone and q_min, q_max are floats); the clamped value is an integer within
// ±2^20, converted exactly.
void quantize_f32_avx2(const float* x, size_t n, int shift, int32_t zp, int32_t q_min, int32_t q_max, int32_t* q);
// quantize_f32_to_u8_rows_avx2(x, rows, C, Kp, shift, zp, q_min, q_max, a_bias, u8): the VNNI operand rows of x in
// one pass: u8[r·Kp + k] = TensorQuant::quantize(x[r·C + k]) + a_bias for k < C, a_bias (code 0) for C <= k < Kp.
// The caller guarantees |shift| <= 60 and [q_min + a_bias, q_max + a_bias] within [0, 255] (so zp lies within
// ±2^20 too): quantize_f32_avx2's float form, the same codes; each code + a_bias is then a byte, exactly.
void quantize_f32_to_u8_rows_avx2(const float* x, size_t rows, int C, int Kp, int shift, int32_t zp, int32_t q_min,
                                  int32_t q_max, int32_t a_bias, uint8_t* u8);

// codes_to_int16_checked(q, rows, C, Kp, q_min, q_max, x16): x16[r * Kp + k] = q[r * C + k] for k < C, 0 for
// C <= k < Kp (q: [rows, C] int32 codes, x16: [rows, Kp]); returns false when some code lies outside
// [q_min, q_max] (x16 is then unspecified). The caller guarantees [q_min, q_max] within int16, so every code
// it accepts converts exactly.
bool codes_to_int16_checked(const int32_t* q, size_t rows, int C, int Kp, int32_t q_min, int32_t q_max, int16_t* x16);
// codes_to_u8_rows_checked(q, rows, C, Kp, q_min, q_max, a_bias, u8): the VNNI operand rows of int32 codes in one
// pass: u8[r·Kp + k] = q[r·C + k] + a_bias for k < C, a_bias (code 0) for C <= k < Kp; returns false when some code
// lies outside [q_min, q_max] (u8 is then unspecified). The caller guarantees [q_min + a_bias, q_max + a_bias]
// within [0, 255], so every code it accepts gives its byte exactly (codes_to_int16_checked then
// int16_to_u8_biased, in one pass).
bool codes_to_u8_rows_checked(const int32_t* q, size_t rows, int C, int Kp, int32_t q_min, int32_t q_max,
                              int32_t a_bias, uint8_t* u8);
// int16_to_u8_biased(x16, n, a_bias, u8): u8[i] = x16[i] + a_bias for i < n; the caller guarantees every
// x16[i] + a_bias lies in [0, 255] (the VNNI operands: codes in [-128, 127] with a_bias 128, or [0, 255] with 0).
void int16_to_u8_biased(const int16_t* x16, size_t n, int32_t a_bias, uint8_t* u8);

void gemm_avx2(const int16_t* A, size_t lda, int M, const int8_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int32_t* C, size_t ldc);
void gemm_avx2(const int16_t* A, size_t lda, int M, const int8_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int64_t* C, size_t ldc);
void gemm_avx2(const int16_t* A, size_t lda, int M, const int16_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int32_t* C, size_t ldc);
void gemm_avx2(const int16_t* A, size_t lda, int M, const int16_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int64_t* C, size_t ldc);

// gemm_avx2_packed(A, lda, M, Bp, Kp, c0, c1, C, ldc): the AVX2 level's GEMM for int8 weights,
//   C[m * ldc + c] = Σ_{k < Kp} A[m * lda + k] · W[c, k]      for m < M, c0 <= c < c1
// A: [M, lda] int16 operand codes (x or h, signed, no bias), zero-padded to Kp. Bp: W [rows, Kp] in
// pack_vnni_u8s8's layout (the same bytes the avx512-vnni level reads; padded rows are zero). C points at
// channel 0 of row 0; only the channels [c0, c1) of the M rows are written (c0 need not be a multiple of 16).
// Arithmetic: the weights of four rows at one k4 are sign-extended to int16 (vpmovsxbw) and multiplied with the
// row's four operand codes by vpmaddwd: each product |a·w| <= 2^15·2^7 and each pair sum <= 2^23, exact; an
// int32 lane accumulates half of one channel's terms (k mod 4 in {0, 1} or {2, 3}) and a horizontal add joins
// the halves. Exactness: the caller guarantees Σ_k |A[m, k]|·|W[c, k]| <= 2^31 - 1 (e.g. Kp·max|W|·max|a|,
// PackedMatrix::out_int32), which bounds every partial sum, so each lane and the total are the exact integers.
// gemm_avx2_packed_part: the same over the operand elements k in [k_begin, k_end) only (multiples of 4), stored,
// or with `accumulate` added to C (the parts covering [0, Kp) once give the same C: int32 addition is exact
// because the total fits int32).
void gemm_avx2_packed(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1, int32_t* C,
                      size_t ldc);
void gemm_avx2_packed_part(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1, int32_t* C,
                           size_t ldc, int k_begin, int k_end, bool accumulate);

// gemv_avx2_packed_s8(a, Bp, Kp, c0, c1, c, k_begin, k_end, accumulate): gemm_avx2_packed_part for one operand
// row whose codes lie in [-128, 127], against weights in [-127, 127] (no code -128): per k4 the four codes as
// int8, |a| as u8 (vpabsb) and w·sign(a) (vpsignb, exact for w != -128), vpmaddubsw's pair |a|·w' + |a'|·w''
// <= 2·128·127 = 32512 (no saturation), vpmaddwd with ones for the row's four products in one int32 lane. The
// same exactness contract as gemm_avx2_packed (Σ_k |a·w| <= 2^31 - 1); a third fewer instructions per MAC.
void gemv_avx2_packed_s8(const int16_t* a, const int8_t* Bp, int Kp, int c0, int c1, int32_t* c, int k_begin, int k_end,
                         bool accumulate);
// gemm_avx2_packed_s8_part(A, lda, M, ...): gemm_avx2_packed_part for operand codes in [-128, 127] against
// weights in [-127, 127], M rows (M = 1: gemv_avx2_packed_s8): per chunk of rows the codes are converted once to
// int8 and |a| (u8), then the GEMV's arithmetic (vpsignb, vpmaddubsw, vpmaddwd with ones) on tiles of four rows
// x sixteen channels, whose lanes are channel sums without a horizontal add: two multiplies and two other
// operations per 32 MACs, where the int16 kernel needs two multiplies and two and a half others. The same
// exactness contract; k spans beyond 4096 run as added parts.
void gemm_avx2_packed_s8_part(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1, int32_t* C,
                              size_t ldc, int k_begin, int k_end, bool accumulate);

// The int32 cell step on eight lanes for the AVX2 level: cell_rows_avx512_i32, cell_rows_avx512_i32_xterms and
// x_terms_avx512_i32 with the same contracts (the same plan, the same int32 operations in the same order, the
// same bounds from cell_fits_int32), tables read by 32-bit gathers from the int32 tables of p (every activation
// must be a table). h_new_u8 may be null.
void cell_rows_avx2_i32(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* gx, const int32_t* gh,
                        const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias,
                        int32_t* dst);
void cell_rows_avx2_i32_xterms(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* x_terms,
                               const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                               uint8_t* h_new_u8, int32_t h_bias, int32_t* dst);
void x_terms_avx2_i32(const GruCellParamsView& p, const Cell32Plan& plan, int32_t* gx, size_t ldg, int rows, int j0, int j1);

// The cell step on four int64 lanes for the AVX2 level, for cells outside the int32 proof (16-bit activations):
// cell_rows_avx512's contract and operations (the folded int64 offsets, per-channel shifts in -62..62, every
// rshift_round operand within 2^62 by the artifact's overflow proof), tables by gathers from p's int32 tables.
// AVX2 has no 64-bit multiply: the three products use vpmuldq, exact when both factors lie within int32, which
// cell_avx2_i64_applies proves per cell from the code ranges (|r - zp_r|, |hh - zp_hh|, |u - zp_u|, |h - zp_h|,
// |1 - u| and |n aligned to h|), together with every activation being a table and every shift in -62..62; in a
// multiplier-scale cell (cell_rows_avx2_multiplier) also every multiplier positive: a value times a multiplier is
// two 32-bit multiplies (vpmuludq of the low half, vpmuldq of the high half, joined in wrapping 64-bit arithmetic:
// exact because the overflow proof bounds |v|·m by 2^62).
bool cell_avx2_i64_applies(const GruCellParamsView& p);
// reset_hidden_avx2 / _multiplier (reset_hidden_avx512's contract on four int64 lanes) apply: the reset gate a table,
// its shifts and those of B-1 / B-2 in -62..62, multipliers positive, |r - zp_r| and |h - zp_h| within int32.
bool reset_hidden_avx2_applies(const GruCellParamsView& p);
void cell_rows_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const int32_t* gx,
                    const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,
                    int32_t h_bias, int32_t* dst);
void cell_rows_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const int32_t* gx,
                    const int64_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,
                    int32_t h_bias, int32_t* dst);
void cell_rows_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const int64_t* gx,
                    const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,
                    int32_t h_bias, int32_t* dst);
void cell_rows_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const int64_t* gx,
                    const int64_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,
                    int32_t h_bias, int32_t* dst);

}  // namespace qgru::fast
