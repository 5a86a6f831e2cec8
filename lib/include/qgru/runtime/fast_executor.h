#pragma once
// The fast CPU executor of a quantized GRU: the same codes as the reference executor
// (qgru/runtime/quant_executor.h, the specification), computed with AVX2 integer kernels.
//
// What is the same: every GEMM accumulator is the exact integer Σ q_W[c, k] q_x[k] (integer addition is
// associative, and no partial sum overflows, see below); the cell step is gru_cell_element's sequence of
// QGRU_HD functions (qgru/fixed/gru_cell.h) with B-1/B-2's per-channel constants (W_sum[c]*zp_x and the
// bias at GEMM scale) folded into one int64 offset per channel, added to the accumulator before the same
// requantize (int64 addition in another order: the same integer); inter-layer requantization is the same
// requantize(). test/unit/runtime/fast_executor_test.cpp checks every code against the reference executor
// on every preset, edge shapes and edge codes.
//
// What is different:
// - W and R are prepacked once (FastQuantGru's constructor) as int8 (or int16 when a code is outside
//   [-128, 127]) rows padded to a multiple of 16 with zeros; x and h are int16 codes (sign-extended).
// - B-1 for all T steps is one GEMM [T*N, C] x [C, 3H] (see Threads; with the packed int8 kernels of either
//   level and N >= 8 one [N, C] x [C, 3H] GEMM per step instead, its output staying in L2); B-2 is a batch-N GEMV per step
//   (at N = 1 and the avx512-vnni level, R's row groups visited in alternating order from step to step, so
//   that each step starts on what the previous one read last).
// - Products use _mm256_madd_epi16 (int16 x int16 -> int32, pairs added). Overflow proof, per cell: with
//   Wmax = max |q_W| and Xmax = max(|qmin_x|, |qmax_x|), one madd lane holds at most 2·Wmax·Xmax
//   (must be <= 2^31-1, else the cell is not supported); an int32 lane accumulator takes at most
//   floor((2^31-1) / (2·Wmax·Xmax)) madd results before it is widened to int64 (the K loop is cut into
//   chunks of that many 16-element vectors). int8 x int8: chunks of 65535 vectors (K up to ~10^6) so
//   the accumulators stay int32; int8 x int16: 255 vectors (4080 elements) per chunk.
// - Threads: a team started by the first run that uses more than one thread and kept for later runs
//   (starting a thread costs 10-140 µs here, a step at H = 256 about 3 µs). The recurrence is split over
//   batch rows (independent, no synchronisation) when N >= threads, else over hidden units with one wait
//   per step (only when H is large enough to pay for it): at N = 1 each thread first multiplies its rows of
//   R with its own units' h codes, then waits for the other threads' codes of the previous step and adds
//   their products. B-1 is computed by the thread that reads it (its batch rows or its units' channels).
//   When the recurrence runs on one thread, B-1 may run beside it on a second thread a few steps ahead
//   (min_pipelined_b1_macs). For N < threads, which of these schedules runs (one thread, pipelined B-1,
//   split over units) is chosen per FastQuantGru by the measured wall time of its earlier runs
//   (adaptive_split; lib/src/runtime/fast/schedule_choice.h), because the fastest one changes with where the
//   hypervisor places the cores; every schedule computes the same codes.
//
// - Levels, chosen at run time from the CPU (FastIsa; QGRU_FAST_ISA=avx2|avx512-vnni|reference in the
//   environment forces one when the options leave it at Auto):
//   avx2:        int8 weights whose every sum provably fits int32 (PackedMatrix::out_int32: the int8 preset,
//                and 16-bit activations up to K = 512) prepacked in the VNNI layout below and read by
//                fast::gemm_avx2_packed: four rows' weights at a k4 sign-extended to int16 (vpmovsxbw) against
//                a row's four codes (vpmaddwd), 4 rows x 8 channels per register tile; with 8-bit operand
//                codes and no weight code -128 (the int8 preset), fast::gemm_avx2_packed_s8_part instead (|a|
//                as u8 times w·sign(a) by vpmaddubsw, pairs within 32512, then vpmaddwd with ones; 4 rows x
//                16 channels, at batch 1 the GEMV gemv_avx2_packed_s8). Cells the int32 proof covers run the
//                cell step on eight int32 lanes (fast::cell_rows_avx2_i32, tables by gathers, rshift_round in
//                its floor form where every shift lies in [1, 30]), others (16-bit activations) on four int64 lanes (fast::cell_rows_avx2, products by
//                vpmuldq where fast::cell_avx2_i64_applies proves every factor within int32; multiplier-scale
//                cells too, each rescale's 64-bit product by two 32-bit multiplies), the rest element by element
//                (the QGRU_HD functions); other weights go through the madd GEMMs above.
//   avx512-vnni: (AVX512F/BW/DQ/VL/VBMI + AVX512-VNNI: Ice Lake, Sapphire Rapids, Zen 4) GEMMs whose
//                operands are 8-bit (x or h codes in [-128, 127] or [0, 255], int8 weights, K <= 65536) by
//                vpdpbusd: u8 x s8 with the activation codes shifted into u8 by a_bias and a_bias·Σ_k W[c, k]
//                subtracted once per output (exact in int32); weights prepacked at load in groups of 64
//                rows x 4 k. The cell step a row at a time with the same integer operations as
//                gru_cell_element: on sixteen int32 lanes when a per-cell proof (fast::cell_fits_int32)
//                bounds every intermediate by 2^30 (the int8 preset), else on eight int64 lanes (multiplier-scale
//                cells there too: each rescale's 64-bit product by vpmullq, then the rounding shift). Contracts
//                and proofs in lib/src/runtime/fast/fast_kernels.h. 16-bit activation codes against int8
//                weights (the int16-activations preset) go through the same instruction as two u8 planes,
//                low byte and high byte + 128, each weight vector read once for both (gemm_vnni_s16s8: the
//                planes' int32 sums are exact, combined as lo + 256·hi in int32 when the whole sum provably
//                fits, else in int64). 16-bit weights keep the AVX2 kernel.
//   Forcing a level the CPU lacks runs the reference (support().reason says so).
//
// The linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a) runs a time loop of its own (fast/reset_before_loop.cpp,
// run_cell_fast_reset_before; the stepper runs its step): per step B-1, B-2 on R's z and r rows, C-2 and C-2a of
// every unit on the level's vector lanes (int32 beside the int32 cell, fast::reset_hidden_avx512_i32 and _avx2_i32;
// else int64, fast::reset_hidden_avx512 and _avx2; element by element where none applies) into q_reset_hidden,
// codes in h's space, so R's packing and proof serve the second GEMM R_n (r ⊙ h) unchanged; then the level's cell
// kernel on the cell's view rewritten in the other cell's C-3 form (ResetBeforeForm: a reset gate of code zp_r + 1
// everywhere and the sum's shift give the product form the sum's codes exactly); batch rows split over the threads,
// no unit split.
//
// When the fast path does not apply (no AVX2; operands outside int16 or a madd pair that could overflow,
// e.g. the int16 preset with 16-bit weights; an observer is attached), the reference executor runs.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/runtime/quantize_input.h"  // quantize_fast, declared here before it had a header of its own

namespace qgru {

class GruCellStepper;  // qgru/runtime/stream_step.h

// Instruction set level of the fast path (see above). Auto: QGRU_FAST_ISA when set, else the best the CPU has.
enum class FastIsa { Auto, Avx2, Avx512Vnni };

struct FastExecutorOptions {
  FastIsa isa = FastIsa::Auto;
  int threads = 0;                // 0: std::thread::hardware_concurrency() (at most 2 on the reference machine)
  bool allow_simd = true;         // false: behave as if the CPU had no AVX2 (tests the fallback)
  int min_units_per_thread = 96;  // split one step over hidden units only when H / threads >= this (threads
                                  // wait on each other once per step). avx512-vnni, N = 1, T = 100, 2 threads,
                                  // persistent team, idle Intel Xeon 2-core VM, interleaved runs (median): 1.8x slower at
                                  // H = 64, 1.4x at H = 96, even at H = 128, 1.10x faster at H = 192, 1.4x at
                                  // H = 256, 1.8x at H = 512, 2.5x at H = 1024 (each core keeps its part of R
                                  // in its own L2 and the GEMV products with its own h codes hide the wait)
  bool adaptive_split = true;     // batch 1 (N < threads, T > 1) on the persistent team: choose among the
                                  // schedules the two bounds here allow (the recurrence on one thread alone, on
                                  // one thread with B-1 pipelined on another, split over units) by the wall time
                                  // of this object's earlier runs of the same N (the first run takes the
                                  // bounds' choice; lib/src/runtime/fast/schedule_choice.h): which one is fastest
                                  // changes with how the hypervisor places the two cores. false: the bounds
                                  // alone decide (what the tests of each schedule use)
  int64_t min_pipelined_b1_macs = 1000000;  // when the recurrence runs on one thread (N < threads, H too small
                                  // to split), a second thread of the team computes B-1 (W·x) and the x terms a few
                                  // steps ahead of it when B-1 has at least this many MACs (T·N·3H·C). Interleaved
                                  // runs, N = 1, T = 100, idle 2-core VM (median): even at H = 16 (0.1 M MACs),
                                  // 1.1x faster at H = 32 (0.3 M), 1.2x at H = 64 (1.2 M), 1.3x at H = 128. Where
                                  // the process gets about one CPU (load 7) the threads wait on each other instead
                                  // (2.5x slower at H = 256 with per-run threads): set max() there, or threads = 1
};

// The fast path's plan of one model (lib/src/runtime/fast/fast_plan.h): the level, the packed weights and per
// matrix and cell the kernels chosen once. Made by fast_path_support; keeps pointers into the model, which must
// outlive it and stay unchanged.
struct FastPlan;

// Whether and how the fast path runs a model, and when it does, the plan that runs it (FastQuantGru takes it,
// so that the weights are packed once).
struct FastPathSupport {
  bool supported = false;
  std::string isa;     // "avx2" or "avx512-vnni" when supported
  std::string reason;  // why not, naming the cell and the operand bound, when not supported
  std::shared_ptr<const FastPlan> plan;  // when supported
};

// True when the CPU this process runs on has AVX2 (and the library was built for x86-64).
bool cpu_has_avx2();
// True when the CPU has AVX512F/BW/DQ/VL/VBMI and AVX512-VNNI (and the library was built for x86-64).
bool cpu_has_avx512_vnni();

// The level (options.isa, QGRU_FAST_ISA, the CPU) and the plan for `model`, or why the fast path refuses it.
FastPathSupport fast_path_support(const QuantizedGru& model, const FastExecutorOptions& options = {});

// A model prepacked for the fast kernels. Keeps a reference to `model`, which must outlive it and stay
// unchanged. Construct once, run many times (run is const and thread-safe).
class FastQuantGru {
 public:
  explicit FastQuantGru(const QuantizedGru& model, const FastExecutorOptions& options = {});
  // With the plan fast_path_support(model, ...) made (no second packing): `support` decides the level and kernels
  // (options.isa and allow_simd are the ones it was made with), options the threads and schedules. A refused
  // support runs the reference executor.
  FastQuantGru(const QuantizedGru& model, const FastPathSupport& support, const FastExecutorOptions& options);
  ~FastQuantGru();
  FastQuantGru(const FastQuantGru&) = delete;
  FastQuantGru& operator=(const FastQuantGru&) = delete;

  const FastPathSupport& support() const { return support_; }

  // Same contracts (shapes, code-range checks, errors, sequence lengths) as run_quantized_gru_codes /
  // run_quantized_gru. Runs the reference executor when !support().supported or when observer != nullptr.
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                           QuantGruObserver* observer = nullptr, const int32_t* lengths = nullptr) const;
  QuantGruResult run(const float* x, int T, int N, const float* h0, QuantGruObserver* observer = nullptr,
                     const int32_t* lengths = nullptr) const;

  // The streaming cell of the fast path (qgru/runtime/stream_step.h) for a batch of N: one time step of the
  // time loop above on the calling thread (B-1 of the frame, B-2 from the state, the same cell kernels),
  // working memory allocated here. Null when !support().supported (make_reference_stepper then). Each
  // stepper belongs to one thread at a time; this object and the model must outlive it.
  std::unique_ptr<GruCellStepper> make_stepper(int N) const;

 private:
  struct Packed;
  // Layer 0's x for the VNNI operand rows every layer-0 cell reads ([T·N, Kp] codes + a_bias), made by
  // run_prepared: from floats x (run(): quantized with x's power-of-two scale) or from int32 codes q_x
  // (run_codes(): range-checked, the reference's message for a code out of range).
  struct Layer0Operands {
    const float* x = nullptr;
    const int32_t* q_x = nullptr;
  };
  // run_codes after the contract's checks, from layer 0's x as int32 codes q_x ([T, N, C]) or, when u8_rows is
  // not null, as the VNNI operand rows made from what u8_rows holds (layer0_reads_u8_rows(); q_x is then null).
  QuantGruResult run_prepared(const int32_t* q_x, const Layer0Operands* u8_rows, int T, int N, const int32_t* q_h0,
                              const int32_t* lengths) const;
  // Whether every layer-0 cell reads x as the same VNNI operand rows (so run() and run_codes() may make them in
  // one pass and hand them to run_prepared).
  bool layer0_reads_u8_rows() const;
  const QuantizedGru& model_;
  FastExecutorOptions options_;
  FastPathSupport support_;
  std::unique_ptr<Packed> packed_;
};


// Drop-in replacements of run_quantized_gru / run_quantized_gru_codes (same signatures): prepack, then
// run the fast path when it applies, else the reference. For repeated runs keep a FastQuantGru instead.
QuantGruResult run_quantized_gru_fast(const QuantizedGru& model, const float* x, int T, int N, const float* h0,
                                      QuantGruObserver* observer = nullptr, const int32_t* lengths = nullptr);
QuantGruResult run_quantized_gru_fast_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                            const int32_t* q_h0, QuantGruObserver* observer = nullptr,
                                            const int32_t* lengths = nullptr);

}  // namespace qgru
