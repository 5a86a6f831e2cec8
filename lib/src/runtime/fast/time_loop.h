#pragma once
// The fast executor's time loops (private to lib/src/runtime/fast/): what run_prepared hands a cell's loop, the loop
// of each cell form chosen once per cell (time_loop.cpp: the linear_before_reset = 1 cell; reset_before_loop.cpp:
// the linear_before_reset = 0 cell), the streaming stepper (stepper.cpp), and what they share: arrays aligned to
// cache lines, the parallel runner, the GEMM of int16 operand rows by a matrix's chosen kernel.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#include "fast_plan.h"
#include "worker_team.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/runtime/stream_step.h"

namespace qgru::fast {

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

// C[n, c] for the channels [c0, c1) of M (C points at channel 0 of row 0, rows ldc apart) from the int16 operand rows
// a16 [N, M.Kp], by M's kernel: the VNNI GEMM on u8 codes + a_bias, the two-plane GEMM, or the AVX2 GEMMs (what
// run_cell_fast and FastStepper use for M). a, b: [N, M.Kp] u8 scratch.
template <class OT>
void packed_gemm_rows(const PackedMatrix& M, const int16_t* a16, int N, uint8_t* a, uint8_t* b, int c0, int c1, OT* C,
                      size_t ldc) {
  M.to_operand(M, a16, static_cast<size_t>(N) * M.Kp, a, b);
  const Operand operand{a16, a, b};
  if constexpr (std::is_same_v<OT, int32_t>) {
    if (N == 1) return M.gemv(M, operand, c0, c1, C, false);
  }
  M.gemm<OT>()(M, operand, static_cast<size_t>(M.Kp), N, c0, c1, C, ldc);
}

// Working memory of one part's rows (at most `rows`) for reset_before_step.
struct ResetBeforeScratch {
  LineArray<uint8_t> a, b;      // [rows, max(Kx, Kh)] u8 operand forms
  LineArray<int16_t> rh16;      // [rows, Kh] q_reset_hidden as int16 (padding columns stay zero)
  ResetBeforeScratch(int rows, int Kx, int Kh)
      : a(static_cast<size_t>(rows) * std::max(Kx, Kh), 0), b(a.size(), 0), rh16(static_cast<size_t>(rows) * Kh, 0) {}
};

// What run_prepared hands to a cell's time loop.
struct CellRunArgs {
  const int16_t* x16;      // [T·N, W.Kp] x codes (null when x_u8 holds layer 0's operand rows)
  const uint8_t* x_u8;     // layer 0's VNNI operand rows, or null
  int T, N;
  const std::vector<int32_t>* h_init;
  int32_t* out;
  int out_stride, out_offset;
  FloatOutput out_f;
  int32_t* h_final;
  const Parallel* parallel;
  int threads, min_units_per_thread;
  int64_t min_pipelined_b1_macs;
  const int32_t* lengths;
};
// One cell's time loop for its sum types (int32 where the matrices' proofs say so) and form: chosen once per cell
// when the executor is made (fast_executor.cpp, choose_cell_run).
using CellRunFn = void (*)(const GruCellQuantParams& p, const PackedCell& pc, const CellRunArgs& a);

// run_cell_fast (time_loop.cpp) for the sums' types: int32 where W's (gx32) and R's (gh32) proofs say so.
CellRunFn linear_after_reset_run(bool gx32, bool gh32);
// run_cell_fast_reset_before (reset_before_loop.cpp), the linear_before_reset = 0 cell's loop, likewise.
CellRunFn reset_before_linear_run(bool gx32, bool gh32);

// One step of the linear_before_reset = 0 cell for N rows (reset_before_loop.cpp, instantiated for int32 and int64
// sums): x16 [N, W.Kp] and h16 [N, Kh] the rows' codes (int16, zero padding); gx, gh [N, 3H] accumulators
// (scratch); h_new16 [N, Kh] and dst (row i at dst + i·dst_stride, H codes) receive the new codes, and with out_f.y
// the floats y (laid out as dst) their dequantized values. Rows n_first + i with t past their length (lengths, or
// null) keep their state and write zp_h to dst.
template <class GX, class GH>
void reset_before_step(const PackedCell& pc, const int16_t* x16, const int16_t* h16, int N, GX* gx, GH* gh,
                       ResetBeforeScratch& s, int16_t* h_new16, int32_t* dst, size_t dst_stride, const int32_t* lengths,
                       int t, int n_first, const FloatOutput& out_f, float* y);

// FastQuantGru::make_stepper's cell (stepper.cpp) over the plan's cells; `model` and `cells` must outlive it.
std::unique_ptr<GruCellStepper> make_fast_stepper(const QuantizedGru& model, const std::vector<PackedCell>& cells, int N);

}  // namespace qgru::fast
