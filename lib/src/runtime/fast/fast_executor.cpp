// The fast CPU executor (contract and overflow proof in qgru/runtime/fast_executor.h): threads, schedules and the
// time loops, run from the plan (fast_plan.h: the packed weights and, per matrix and cell, the kernels chosen once;
// the loops call through its tables). The arithmetic per element is the reference's sequence of QGRU_HD functions
// (fast_plan.cpp's element kernel, and the fast/ folder's gemm_* and cell_* kernels).
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
#include "fast_plan.h"
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

using fast::FloatOutput;
using fast::Operand;
using fast::PackedCell;
using fast::PackedMatrix;

int pad16(int k) { return (k + 15) / 16 * 16; }

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

namespace {

// ---- The linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a): a time loop of its own ----------------------------
// Per step and batch row: B-1, B-2 on R's z and r rows against h, C-2 and C-2a of every unit (q_reset_hidden: codes
// in h's space, so R's packing, operand form and proof, made for h, hold for them), the second GEMM R_n against
// them into gemm_h's n channels, then the cell kernel on the cell's view in the product form (ResetBeforeForm), so the
// level's vector cell kernel runs the second half. Threads: batch rows split over the parts, each with its own
// scratch; every part runs the whole time loop on its rows.

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
      pc.kernels.cell(pc, gx + static_cast<size_t>(i) * G, gh + static_cast<size_t>(i) * G, hc, 0, H, hn, nullptr, d,
                      FloatOutput{}, nullptr);
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
  const bool b1_per_step = W.int8_packed && std::is_same_v<GX, int32_t> && N >= kB1PerStepBatch;
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
  // x in the form W's kernels read (fast_plan.h, OperandForm): the int16 codes, the codes + a_bias as u8 [M, Kp]
  // (padding meets zero weights; layer 0's given as x_u8, else made here) or two u8 planes [M, Kp].
  std::unique_ptr<uint8_t[]> x_a, x_b;
  Operand x_operand{x16, x_u8, nullptr};
  if (!x_u8 && W.operand_buffers() > 0) {
    const size_t count = static_cast<size_t>(M) * W.Kp;
    x_a.reset(new uint8_t[count]);
    if (W.operand_buffers() > 1) x_b.reset(new uint8_t[count]);
    W.to_operand(W, x16, count, x_a.get(), x_b.get());
    x_operand.u8 = x_a.get();
    x_operand.hi = x_b.get();
  }
  const fast::GemmFn<GX> gemm_w = W.gemm<GX>();
  const size_t ldx = static_cast<size_t>(W.Kp);
  // B-1 of the rows [m0, m1) of x (rows t·N + n).
  auto b1_rows = [&](int m0, int m1) {
    gemm_w(W, x_operand.from_row(static_cast<size_t>(m0), ldx), ldx, m1 - m0, 0, G, gemm_x + static_cast<size_t>(m0) * G,
           static_cast<size_t>(G));
  };
  // B-1 of all rows for the units [j0, j1) of each gate (channels g·H + j).
  auto b1_units = [&](int j0, int j1) {
    for (int g = 0; g < 3; ++g) gemm_w(W, x_operand, ldx, M, g * H + j0, g * H + j1, gemm_x, static_cast<size_t>(G));
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
  // R on u8 codes (OperandForm::U8): h also as u8 codes + a_bias [N, Kh], written by the cell beside the int16 codes.
  const bool h_u8 = R.form == fast::OperandForm::U8;
  LineArray<uint8_t> hu8[2];
  if (h_u8) {
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
  // (the int32 cells only: their kernel table has x_terms, and both sides' sums are int32)
  const bool x_terms = pc.kernels.x_terms != nullptr && !b1_per_step;
  auto x_terms_rows = [&](int m0, int m1, int ja, int jb) {
    if constexpr (std::is_same_v<GX, int32_t>) {
      pc.kernels.x_terms(view, pc.plan32, gemm_x + static_cast<size_t>(m0) * G, static_cast<size_t>(G), m1 - m0, ja, jb);
    }
  };
  // The cell kernel of the time loop: on B-1's sums, or on the x terms made of them.
  const fast::CellRowFn cell_kernel = x_terms ? pc.kernels.cell_xterms : pc.kernels.cell;
  // (not with padding steps: the kernel runs every one of the T steps)
  const bool small_loop = x_terms && pc.kernels.small_recurrence && N == 1 && parts == 1 && (!lengths || lengths[0] == T);
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
        pc.kernels.small_recurrence(view, pc.byte_tables, pc.plan32, R.packed_vnni.data(), R.bias_rowsum.data(),
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
    // R on two u8 planes (OperandForm::Planes): this thread's rows of h as planes, refreshed before each step's GEMM
    const bool h_planes = R.form == fast::OperandForm::Planes;
    std::vector<uint8_t> h_lo(h_planes ? static_cast<size_t>(n1 - n0) * Kh : 0), h_hi(h_lo.size());
    const fast::GemmFn<GH> gemm_r = R.gemm<GH>();
    const int rows = n1 - n0;
    int cur = 0;
    for (int step = 0; step < T; ++step) {
      const int t = p.direction == 0 ? step : T - 1 - step;
      const int16_t* h_cur = hbuf[cur].data();
      int16_t* h_next = hbuf[cur ^ 1].data();
      // B-1 of this step when it runs in the loop: this thread's rows and units.
      if constexpr (std::is_same_v<GX, int32_t>) {
        if (b1_per_step) {
          const Operand x_rows = x_operand.from_row(static_cast<size_t>(t) * N + n0, ldx);
          int32_t* gx0 = gemm_x + static_cast<size_t>(n0) * G;
          if (j0 == 0 && j1 == H) {
            gemm_w(W, x_rows, ldx, rows, 0, G, gx0, static_cast<size_t>(G));
          } else {
            for (int g = 0; g < 3; ++g) gemm_w(W, x_rows, ldx, rows, g * H + j0, g * H + j1, gx0, static_cast<size_t>(G));
          }
        }
      }
      // B-2 for this thread's rows and units: gates z, r, n. h in the form R's kernels read: the int16 codes, the
      // u8 codes the cell wrote beside them, or the planes made here.
      Operand h_operand{h_cur + static_cast<size_t>(n0) * Kh, nullptr, nullptr};
      if (h_u8) h_operand.u8 = hu8[cur].data() + static_cast<size_t>(n0) * Kh;
      GH* gh0 = gemm_h.data() + static_cast<size_t>(n0) * G;
      // h_cur complete: the other parts' codes of the previous step (the split GEMV below waits itself)
      const bool split_gemv = R.gemv_part && rows == 1 && sync && std::is_same_v<GH, int32_t>;
      if (sync && step > 0 && !split_gemv) wait_for_others(part, step);
      if (split_gemv) {
        if constexpr (std::is_same_v<GH, int32_t>) {
          // Batch 1 split over units: first the products with this part's own h codes (written by this
          // thread), then, after waiting for the other parts' step, the products with theirs.
          auto gemv_part = [&](int g, int k0, int k1, bool accumulate) {  // gate g's units of this part, k in [k0, k1)
            R.gemv_part(R, h_operand, g * H + j0, g * H + j1, gh0, k0, k1, accumulate);
          };
          for (int g = 0; g < 3; ++g) gemv_part(g, k_own0, k_own1, false);
          if (step > 0) wait_for_others(part, step);
          for (int g = 0; g < 3; ++g) {
            if (k_own0 > 0) gemv_part(g, 0, k_own0, true);
            if (k_own1 < Kh) gemv_part(g, k_own1, Kh, true);
          }
        }
      } else {
        if (h_planes) {
          R.to_operand(R, h_cur + static_cast<size_t>(n0) * Kh, h_lo.size(), h_lo.data(), h_hi.data());
          h_operand.u8 = h_lo.data();
          h_operand.hi = h_hi.data();
        }
        // Batch 1 (int32 sums): the GEMV; on the VNNI layout its weight order alternates from step to step, so
        // that each step starts on the rows of R the previous one read last (still in L1, or in L2 when R does
        // not fit L2: BM_vnni_gemm/M:1/rows:3072/K:1024 with alternate:1).
        auto b2_channels = [&](int c0, int c1) {
          if constexpr (std::is_same_v<GH, int32_t>) {
            if (rows == 1) return R.gemv(R, h_operand, c0, c1, gh0, (step & 1) != 0);
          }
          gemm_r(R, h_operand, static_cast<size_t>(Kh), rows, c0, c1, gh0, static_cast<size_t>(G));
        };
        if (j0 == 0 && j1 == H) {
          b2_channels(0, G);
        } else {
          for (int g = 0; g < 3; ++g) b2_channels(g * H + j0, g * H + j1);
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
      // The cell step of each row (the cell's kernel, fast_plan.h CellKernels).
      for (int n = n0; n < n1; ++n) {
        const GX* gx = gemm_x + ((b1_per_step ? 0 : static_cast<size_t>(t) * N) + n) * G;
        const GH* gh = gemm_h.data() + static_cast<size_t>(n) * G;
        const int16_t* hc = h_cur + static_cast<size_t>(n) * Kh;
        int16_t* hn = h_next + static_cast<size_t>(n) * Kh;
        const size_t at = (static_cast<size_t>(t) * N + n) * out_stride + out_offset;  // the row's output, codes and floats
        int32_t* dst = out + at;
        float* y = out_f.y ? out_f.y + at : nullptr;
        uint8_t* hn_u8 = h_u8 ? hu8[cur ^ 1].data() + static_cast<size_t>(n) * Kh : nullptr;
        if (!row_is_valid(lengths, t, n)) {  // padding: the state stays, the output is zp_h (the code of 0.0)
          for (int j = j0; j < j1; ++j) {
            hn[j] = hc[j];
            dst[j] = view.h.zp;
            if (hn_u8) hn_u8[j] = static_cast<uint8_t>(hc[j] + R.a_bias);
          }
          if (y) out_f.rows_of(dst, y, j0, j1);
        } else {
          cell_kernel(pc, gx, gh, hc, j0, j1, hn, hn_u8, dst, out_f, y);
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
// when the executor is made (choose_cell_run).
using CellRunFn = void (*)(const GruCellQuantParams& p, const PackedCell& pc, const CellRunArgs& a);
template <class GX, class GH>
void run_cell_linear_after_reset(const GruCellQuantParams& p, const PackedCell& pc, const CellRunArgs& a) {
  run_cell_fast<GX, GH>(p, pc, a.x16, a.x_u8, a.T, a.N, *a.h_init, a.out, a.out_stride, a.out_offset, a.out_f, a.h_final,
                        *a.parallel, a.threads, a.min_units_per_thread, a.min_pipelined_b1_macs, a.lengths);
}
template <class GX, class GH>
void run_cell_reset_before_linear(const GruCellQuantParams& p, const PackedCell& pc, const CellRunArgs& a) {
  // its own time loop (run_cell_fast_reset_before), on int16 x codes
  run_cell_fast_reset_before<GX, GH>(p, pc, a.x16, a.T, a.N, *a.h_init, a.out, a.out_stride, a.out_offset, a.out_f,
                                     a.h_final, *a.parallel, a.threads, a.lengths);
}
template <class GX, class GH>
CellRunFn cell_run_for(const GruCellQuantParams& p) {
  return p.linear_before_reset ? run_cell_linear_after_reset<GX, GH> : run_cell_reset_before_linear<GX, GH>;
}
CellRunFn choose_cell_run(const GruCellQuantParams& p, const PackedCell& pc) {
  if (pc.W.out_int32 && pc.R.out_int32) return cell_run_for<int32_t, int32_t>(p);
  if (pc.W.out_int32) return cell_run_for<int32_t, int64_t>(p);
  if (pc.R.out_int32) return cell_run_for<int64_t, int32_t>(p);
  return cell_run_for<int64_t, int64_t>(p);
}

}  // namespace

struct FastQuantGru::Packed {
  const FastPlan* plan = nullptr;  // support_.plan's, when supported
  std::vector<CellRunFn> runs;     // per cell of the plan
  // The persistent threads of runs with more than one thread (worker_team.h), started by the first such run.
  // One run at a time uses them; a run that finds them busy (another thread's run) starts its own threads.
  std::mutex team_mutex;
  std::unique_ptr<fast::WorkerTeam> team;
  // Batch 1 on the team: how to use the threads, chosen by measured wall time per N < threads and set of
  // allowed schedules (FastExecutorOptions::adaptive_split); guarded by team_mutex.
  std::map<int, fast::ScheduleChoice> schedules;
};

FastQuantGru::FastQuantGru(const QuantizedGru& model, const FastExecutorOptions& options)
    : FastQuantGru(model, fast_path_support(model, options), options) {}

FastQuantGru::FastQuantGru(const QuantizedGru& model, const FastPathSupport& support, const FastExecutorOptions& options)
    : model_(model), options_(options), support_(support), packed_(std::make_unique<Packed>()) {
  if (options_.threads <= 0) options_.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (support_.supported && !support_.plan) support_ = fast_path_support(model, options_);  // a support without its plan
  if (!support_.supported) return;
  const FastPlan& plan = *support_.plan;
  if (plan.cells.size() != model.cells.size()) {
    throw Error("FastQuantGru: the plan has " + std::to_string(plan.cells.size()) + " cells, the model " +
                std::to_string(model.cells.size()) + " (a plan belongs to the model it was made from)");
  }
  packed_->plan = &plan;
  packed_->runs.reserve(plan.cells.size());
  for (size_t i = 0; i < plan.cells.size(); ++i) packed_->runs.push_back(choose_cell_run(model.cells[i], plan.cells[i]));
}

FastQuantGru::~FastQuantGru() = default;

bool FastQuantGru::layer0_reads_u8_rows() const { return packed_->plan->layer0_u8_rows; }

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
    if (u8_rows) x_u8_owner = LineArray<uint8_t>(rows * packed_->plan->cells[0].W.Kp);  // every byte written (codes, then padding)
    auto prepare = [&](int part) {
      if (u8_rows) {
        const PackedMatrix& W = packed_->plan->cells[0].W;
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
      const size_t cell_index = static_cast<size_t>(l * D + d);
      const PackedCell& pc = packed_->plan->cells[cell_index];
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
      const CellRunArgs args{x16.data(), xu, T, N, &q_h, out, D * H, d * H, out_f, h_final, &par, th, mu, mp, lengths};
      packed_->runs[cell_index](p, pc, args);
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
    steps_.reserve(cells.size());
    for (const PackedCell& pc : cells) steps_.push_back(step_for(pc));
  }
  int batch() const override { return N_; }
  void step_cell(int layer, const int32_t* q_x, int32_t* q_h) override {
    const size_t index = static_cast<size_t>(layer) * model_.num_directions;
    const PackedCell& pc = cells_[index];
    (this->*steps_[index])(model_.cells[index], pc, q_x, q_h);
  }

 private:
  // The step of one cell for its sum types (int32 where the matrices' proofs say so), chosen once per cell.
  using StepFn = void (FastStepper::*)(const GruCellQuantParams& p, const PackedCell& pc, const int32_t* q_x, int32_t* q_h);
  static StepFn step_for(const PackedCell& pc) {
    if (pc.W.out_int32 && pc.R.out_int32) return &FastStepper::step<int32_t, int32_t>;
    if (pc.W.out_int32) return &FastStepper::step<int32_t, int64_t>;
    if (pc.R.out_int32) return &FastStepper::step<int64_t, int32_t>;
    return &FastStepper::step<int64_t, int64_t>;
  }
  template <class T>
  T* sums(LineArray<int32_t>& s32, LineArray<int64_t>& s64) {
    if constexpr (std::is_same_v<T, int32_t>) {
      return s32.data();
    } else {
      return s64.data();
    }
  }

  // acc [N, 3H] = operand codes [N, K] (int32, within the operand's range) times M's rows, by the kernel
  // run_cell_fast uses for M (VNNI on u8 codes + a_bias, two u8 planes, or the AVX2 GEMMs on int16 codes).
  template <class OT>
  void gemm(const PackedMatrix& M, const TensorQuant& operand, const int32_t* codes, int K, int16_t* a16, uint8_t* a,
            uint8_t* b, OT* acc) {
    fast::codes_to_int16_checked(codes, static_cast<size_t>(N_), K, M.Kp, operand.qmin(), operand.qmax(), a16);
    packed_gemm_rows(M, a16, N_, a, b, 0, M.rows, acc, static_cast<size_t>(M.rows));
  }

  template <class GX, class GH>
  void step(const GruCellQuantParams& p, const PackedCell& pc, const int32_t* q_x, int32_t* q_h) {
    GX* gx = sums<GX>(gx32_, gx64_);
    GH* gh = sums<GH>(gh32_, gh64_);
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
      uint8_t* hn_u8 = pc.R.form == fast::OperandForm::U8 ? h_new_u8_.data() + row * Kh : nullptr;
      pc.kernels.cell(pc, gx + row * G, gh + row * G, h16_.data() + row * Kh, 0, H, h_new16_.data() + row * Kh, hn_u8,
                      q_h + row * static_cast<size_t>(H), FloatOutput{}, nullptr);
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
  std::vector<StepFn> steps_;                      // per cell
  std::unique_ptr<ResetBeforeScratch> reset_before_;  // the linear_before_reset = 0 cell's (reset_before_step)
};

}  // namespace

std::unique_ptr<GruCellStepper> FastQuantGru::make_stepper(int N) const {
  if (!support_.supported) return nullptr;
  return std::make_unique<FastStepper>(model_, packed_->plan->cells, N);
}


}  // namespace qgru
