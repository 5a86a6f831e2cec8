// The time loop of the linear_before_reset = 1 cell on the fast path (run_cell_fast): B-1 before the loop, per
// step or pipelined on a second thread; B-2 and the cell per step, over batch rows or split over units; the batch-1
// small recurrence. Every kernel is the one the plan chose (fast_plan.h); the loop decides only how to schedule them.
#include "time_loop.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "fast_kernels.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/fixed/rounding.h"
#include "qgru/io/sequence_io.h"

namespace qgru::fast {

namespace {

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

template <class GX, class GH>
void run_linear_after_reset(const GruCellQuantParams& p, const PackedCell& pc, const CellRunArgs& a) {
  run_cell_fast<GX, GH>(p, pc, a.x16, a.x_u8, a.T, a.N, *a.h_init, a.out, a.out_stride, a.out_offset, a.out_f, a.h_final,
                        *a.parallel, a.threads, a.min_units_per_thread, a.min_pipelined_b1_macs, a.lengths);
}

}  // namespace

CellRunFn linear_after_reset_run(bool gx32, bool gh32) {
  if (gx32 && gh32) return run_linear_after_reset<int32_t, int32_t>;
  if (gx32) return run_linear_after_reset<int32_t, int64_t>;
  if (gh32) return run_linear_after_reset<int64_t, int32_t>;
  return run_linear_after_reset<int64_t, int64_t>;
}

}  // namespace qgru::fast
