#pragma once
// The fast CPU executor of a quantized GRU: the same codes as the reference executor
// (qgru/quant/quant_executor.h, the specification), computed with AVX2 integer kernels.
//
// What is the same: every GEMM accumulator is the exact integer Σ q_W[c, k] q_x[k] (integer addition is
// associative, and no partial sum overflows, see below); the cell step is gru_cell_element's sequence of
// QGRU_HD functions (qgru/fixed/gru_cell.h) with B-1/B-2's per-channel constants (W_sum[c]*zp_x and the
// bias at GEMM scale) folded into one int64 offset per channel, added to the accumulator before the same
// requantize (int64 addition in another order: the same integer); inter-layer requantization is the same
// requantize(). test/unit/quant/fast_executor_test.cpp checks every code against the reference executor
// on every preset, edge shapes and edge codes.
//
// What is different:
// - W and R are prepacked once (FastQuantGru's constructor) as int8 (or int16 when a code is outside
//   [-128, 127]) rows padded to a multiple of 16 with zeros; x and h are int16 codes (sign-extended).
// - B-1 for all T steps is one GEMM [T*N, C] x [C, 3H] (threads over rows); B-2 is a batch-N GEMV per step.
// - Products use _mm256_madd_epi16 (int16 x int16 -> int32, pairs added). Overflow proof, per cell: with
//   Wmax = max |q_W| and Xmax = max(|qmin_x|, |qmax_x|), one madd lane holds at most 2·Wmax·Xmax
//   (must be <= 2^31-1, else the cell is not supported); an int32 lane accumulator takes at most
//   floor((2^31-1) / (2·Wmax·Xmax)) madd results before it is widened to int64 (the K loop is cut into
//   chunks of that many 16-element vectors). int8 x int8: chunks of 65535 vectors (K up to ~10^6) so
//   the accumulators stay int32; int8 x int16: 255 vectors (4080 elements) per chunk.
// - Threads: the recurrence is split over batch rows (independent, no synchronisation) when N >= threads,
//   else over hidden units with one barrier per step (only when H is large enough to pay for it).
//
// When the fast path does not apply (no AVX2; operands outside int16 or a madd pair that could overflow,
// e.g. the int16 preset with 16-bit weights; an observer is attached), the reference executor runs.
#include <cstdint>
#include <memory>
#include <string>

#include "qgru/quant/quant_executor.h"
#include "qgru/quant/quantized_gru.h"

namespace qgru {

struct FastExecutorOptions {
  int threads = 0;                // 0: std::thread::hardware_concurrency() (at most 2 on the reference machine)
  bool allow_simd = true;         // false: behave as if the CPU had no AVX2 (tests the fallback)
  int min_units_per_thread = 1024; // split one step over hidden units only when H / threads >= this (a
                                  // barrier per step: measured not to pay at H <= 1024 on a loaded 2-core VM)
};

// Whether and how the fast path runs a model.
struct FastPathSupport {
  bool supported = false;
  std::string isa;     // "avx2" when supported
  std::string reason;  // why not, naming the cell and the operand bound, when not supported
};

// True when the CPU this process runs on has AVX2 (and the library was built for x86-64).
bool cpu_has_avx2();

FastPathSupport fast_path_support(const QuantizedGru& model, const FastExecutorOptions& options = {});

// A model prepacked for the fast kernels. Keeps a reference to `model`, which must outlive it and stay
// unchanged. Construct once, run many times (run is const and thread-safe).
class FastQuantGru {
 public:
  explicit FastQuantGru(const QuantizedGru& model, const FastExecutorOptions& options = {});
  ~FastQuantGru();
  FastQuantGru(const FastQuantGru&) = delete;
  FastQuantGru& operator=(const FastQuantGru&) = delete;

  const FastPathSupport& support() const { return support_; }

  // Same contracts (shapes, code-range checks, errors) as run_quantized_gru_codes / run_quantized_gru.
  // Runs the reference executor when !support().supported or when observer != nullptr.
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0,
                           QuantGruObserver* observer = nullptr) const;
  QuantGruResult run(const float* x, int T, int N, const float* h0, QuantGruObserver* observer = nullptr) const;

 private:
  struct Packed;
  const QuantizedGru& model_;
  FastExecutorOptions options_;
  FastPathSupport support_;
  std::unique_ptr<Packed> packed_;
};

// Drop-in replacements of run_quantized_gru / run_quantized_gru_codes (same signatures): prepack, then
// run the fast path when it applies, else the reference. For repeated runs keep a FastQuantGru instead.
QuantGruResult run_quantized_gru_fast(const QuantizedGru& model, const float* x, int T, int N, const float* h0,
                                      QuantGruObserver* observer = nullptr);
QuantGruResult run_quantized_gru_fast_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                            const int32_t* q_h0, QuantGruObserver* observer = nullptr);

}  // namespace qgru
