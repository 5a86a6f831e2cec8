// The linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a) on the fast path: a time loop of its own
// (run_cell_fast_reset_before) and its step, which the streaming stepper runs too.
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

// ---- The linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a): a time loop of its own ----------------------------
// Per step and batch row: B-1, B-2 on R's z and r rows against h, C-2 and C-2a of every unit (the cell's
// reset_hidden kernel; q_reset_hidden: codes in h's space, so R's packing, operand form and proof, made for h, hold
// for them), the second GEMM R_n against them into gemm_h's n channels, then the cell kernel on the cell's view in
// the product form (ResetBeforeForm), so the level's vector cell kernel runs the second half. Threads: batch rows split over the parts, each with its own
// scratch; every part runs the whole time loop on its rows.

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
  for (int i = 0; i < N; ++i) {  // C-2, C-2a of every unit (the level's kernel: B-1/B-2 of the r channel, folded offsets)
    pc.kernels.reset_hidden(pc, gx + static_cast<size_t>(i) * G, gh + static_cast<size_t>(i) * G, h16 + static_cast<size_t>(i) * Kh,
                            0, H, s.rh16.data() + static_cast<size_t>(i) * Kh);
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

template void reset_before_step<int32_t, int32_t>(const PackedCell&, const int16_t*, const int16_t*, int, int32_t*, int32_t*,
                                                  ResetBeforeScratch&, int16_t*, int32_t*, size_t, const int32_t*, int, int,
                                                  const FloatOutput&, float*);
template void reset_before_step<int32_t, int64_t>(const PackedCell&, const int16_t*, const int16_t*, int, int32_t*, int64_t*,
                                                  ResetBeforeScratch&, int16_t*, int32_t*, size_t, const int32_t*, int, int,
                                                  const FloatOutput&, float*);
template void reset_before_step<int64_t, int32_t>(const PackedCell&, const int16_t*, const int16_t*, int, int64_t*, int32_t*,
                                                  ResetBeforeScratch&, int16_t*, int32_t*, size_t, const int32_t*, int, int,
                                                  const FloatOutput&, float*);
template void reset_before_step<int64_t, int64_t>(const PackedCell&, const int16_t*, const int16_t*, int, int64_t*, int64_t*,
                                                  ResetBeforeScratch&, int16_t*, int32_t*, size_t, const int32_t*, int, int,
                                                  const FloatOutput&, float*);

namespace {

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

template <class GX, class GH>
void run_reset_before_linear(const GruCellQuantParams& p, const PackedCell& pc, const CellRunArgs& a) {
  run_cell_fast_reset_before<GX, GH>(p, pc, a.x16, a.T, a.N, *a.h_init, a.out, a.out_stride, a.out_offset, a.out_f,
                                     a.h_final, *a.parallel, a.threads, a.lengths);
}

}  // namespace

CellRunFn reset_before_linear_run(bool gx32, bool gh32) {
  if (gx32 && gh32) return run_reset_before_linear<int32_t, int32_t>;
  if (gx32) return run_reset_before_linear<int32_t, int64_t>;
  if (gh32) return run_reset_before_linear<int64_t, int32_t>;
  return run_reset_before_linear<int64_t, int64_t>;
}

}  // namespace qgru::fast
