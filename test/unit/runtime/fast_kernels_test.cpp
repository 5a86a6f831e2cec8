// The fast executor's kernels against the specification, one kernel at a time: the AVX-512 cell step
// against gru_cell_element (qgru/fixed/gru_cell.h) on random accumulators, rounding ties and the ends of
// every code range, for every preset; the VNNI GEMM against the plain integer sum at the ends of the
// operand ranges and at the longest K its int32 contract allows. Levels this CPU lacks are reported, not
// passed silently.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../../../lib/src/runtime/fast/fast_kernels.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

// A cell's view with every piecewise-linear activation replaced by a table of its own outputs (what the
// fast executor does at load); the tables live in `storage`.
GruCellParamsView tabulated_view(const GruCellParamsView& v, std::vector<std::vector<int32_t>>& storage) {
  GruCellParamsView t = v;
  ActivationView* gates[3] = {&t.update_gate, &t.reset_gate, &t.new_gate};
  storage.resize(3);
  for (int g = 0; g < 3; ++g) {
    ActivationView& a = *gates[g];
    if (a.impl != ActivationImpl::Pwl) continue;
    storage[g].clear();
    for (int64_t q = a.q_in_min; q <= a.q_in_max; ++q) storage[g].push_back(evaluate_activation(a, static_cast<int32_t>(q)));
    a.impl = ActivationImpl::Table;
    a.table = storage[g].data();
  }
  return t;
}

// The int64 kernel (cell_rows_avx512), and with int32 accumulators the int32 one (cell_rows_avx512_i32)
// when cell_fits_int32 proves it for the accumulator bounds bx, bh, against gru_cell_element. With `avx2`
// the avx2 level's kernels instead (cell_rows_avx2_i32 and x_terms_avx2_i32, else cell_rows_avx2 on int64
// lanes, which must apply to every preset's cells).
int g_avx2_floor_plans = 0;    // int32 plans the avx2 sweep ran with a floor rounding form (cell_mismatch)
int g_avx512_floor_plans = 0;  // the same for the avx512-vnni sweep

template <class GX, class GH>
std::string cell_mismatch(const GruCellParamsView& spec, const GruCellParamsView& tab, const std::vector<GX>& gx,
                          const std::vector<GH>& gh, const std::vector<int16_t>& h_old, int j0, int j1, int32_t h_bias,
                          int64_t bx, int64_t bh, bool* ran_int32 = nullptr, bool avx2 = false) {
  const int H = spec.hidden_size;
  std::vector<int64_t> off_x(3 * static_cast<size_t>(H)), off_h(3 * static_cast<size_t>(H));
  for (int c = 0; c < 3 * H; ++c) {
    off_x[c] = rshift_round(spec.q_bw[c], spec.shift_bw_to_gemm_x[c]) - spec.W_sum[c] * static_cast<int64_t>(spec.zp_x);
    off_h[c] = rshift_round(spec.q_br[c], spec.shift_br_to_gemm_h[c]) - spec.R_sum[c] * static_cast<int64_t>(spec.h.zp);
  }
  fast::CellByteTables bytes;
  fast::prepare_byte_tables(tab, &bytes);
  constexpr int32_t kSentinel = 0x5A5A5A5A;
  std::vector<int32_t> dst(static_cast<size_t>(H), kSentinel);
  std::vector<int16_t> h16(static_cast<size_t>(H), int16_t{0x5A5A});
  std::vector<uint8_t> hu8(static_cast<size_t>(H), uint8_t{0x5A});
  bool int32_kernel = false;
  if constexpr (std::is_same_v<GX, int32_t> && std::is_same_v<GH, int32_t>) {
    if (fast::cell_fits_int32(tab, bx, bh, off_x.data(), off_h.data())) {
      int32_kernel = true;
      fast::Cell32Plan plan;
      fast::prepare_cell32_plan(tab, off_x.data(), off_h.data(), &plan);
      uint8_t* u8 = h_bias >= 0 ? hu8.data() : nullptr;
      // the level's int32 kernel on a plan
      auto run_i32 = [&](const fast::Cell32Plan& pl, int16_t* h16_out, uint8_t* u8_out, int32_t* dst_out) {
        if (avx2) {
          fast::cell_rows_avx2_i32(tab, pl, gx.data(), gh.data(), h_old.data(), j0, j1, h16_out, u8_out, h_bias, dst_out);
        } else {
          fast::cell_rows_avx512_i32(tab, bytes, pl, gx.data(), gh.data(), h_old.data(), j0, j1, h16_out, u8_out, h_bias, dst_out);
        }
      };
      run_i32(plan, h16.data(), u8, dst.data());
      // The same step with the floor form of rshift_round switched off (the sign-magnitude form everywhere):
      // both forms must give the codes the reference checks below.
      if (plan.floor_x || plan.floor_h) ++(avx2 ? g_avx2_floor_plans : g_avx512_floor_plans);
      fast::Cell32Plan general = plan;
      general.floor_x = general.floor_h = false;
      for (int32_t& f : general.lanes.shift_floor) f = 0;
      std::vector<int32_t> dst_g(static_cast<size_t>(H), kSentinel);
      std::vector<int16_t> h16_g(static_cast<size_t>(H), int16_t{0x5A5A});
      std::vector<uint8_t> hu8_g(static_cast<size_t>(H), uint8_t{0x5A});
      run_i32(general, h16_g.data(), h_bias >= 0 ? hu8_g.data() : nullptr, dst_g.data());
      if (dst_g != dst || h16_g != h16 || hu8_g != hu8) return "the int32 cell's floor and sign-magnitude rounding forms differ";
      // The same step with the x side computed beforehand (x_terms_*_i32, in place on a copy of gx): every
      // unit's outputs must equal the direct kernel's, which the reference checks below.
      std::vector<int32_t> x_terms(gx.begin(), gx.end());
      std::vector<int32_t> dst_x(static_cast<size_t>(H), kSentinel);
      std::vector<int16_t> h16_x(static_cast<size_t>(H), int16_t{0x5A5A});
      std::vector<uint8_t> hu8_x(static_cast<size_t>(H), uint8_t{0x5A});
      uint8_t* u8_x = h_bias >= 0 ? hu8_x.data() : nullptr;
      if (avx2) {
        fast::x_terms_avx2_i32(tab, plan, x_terms.data(), x_terms.size(), 1, j0, j1);
        fast::cell_rows_avx2_i32_xterms(tab, plan, x_terms.data(), gh.data(), h_old.data(), j0, j1, h16_x.data(), u8_x, h_bias,
                                        dst_x.data());
      } else {
        fast::x_terms_avx512_i32(tab, plan, x_terms.data(), x_terms.size(), 1, j0, j1);
        fast::cell_rows_avx512_i32_xterms(tab, bytes, plan, x_terms.data(), gh.data(), h_old.data(), j0, j1, h16_x.data(), u8_x,
                                          h_bias, dst_x.data());
      }
      if (dst_x != dst || h16_x != h16 || hu8_x != hu8) return "int32 kernel with precomputed x terms differs from the direct one";
      // The avx512-vnni level as the executor runs it: the per-channel additions folded into the sums (the GEMMs'
      // bias row sums; here added to the raw sums with cell32_sum_fold's wrap), in both rounding forms, read by
      // the direct kernel and by the x-terms pair: the same codes.
      if (!avx2) {
        for (const fast::Cell32Plan* base : {&plan, &general}) {
          fast::Cell32Plan folded = *base;
          folded.sums_folded_x = folded.sums_folded_h = true;
          std::vector<int32_t> gx_f(gx.size()), gh_f(gh.size());
          for (size_t c = 0; c < gx.size(); ++c) {
            gx_f[c] = static_cast<int32_t>(static_cast<uint32_t>(gx[c]) + static_cast<uint32_t>(fast::cell32_sum_fold(folded, true, c)));
            gh_f[c] = static_cast<int32_t>(static_cast<uint32_t>(gh[c]) + static_cast<uint32_t>(fast::cell32_sum_fold(folded, false, c)));
          }
          std::vector<int32_t> dst_f(static_cast<size_t>(H), kSentinel);
          std::vector<int16_t> h16_f(static_cast<size_t>(H), int16_t{0x5A5A});
          std::vector<uint8_t> hu8_f(static_cast<size_t>(H), uint8_t{0x5A});
          fast::cell_rows_avx512_i32(tab, bytes, folded, gx_f.data(), gh_f.data(), h_old.data(), j0, j1, h16_f.data(),
                                     h_bias >= 0 ? hu8_f.data() : nullptr, h_bias, dst_f.data());
          if (dst_f != dst || h16_f != h16 || hu8_f != hu8) return "the int32 cell on folded sums differs from the unfolded one";
          std::fill(dst_f.begin(), dst_f.end(), kSentinel);
          std::fill(h16_f.begin(), h16_f.end(), int16_t{0x5A5A});
          std::fill(hu8_f.begin(), hu8_f.end(), uint8_t{0x5A});
          fast::x_terms_avx512_i32(tab, folded, gx_f.data(), gx_f.size(), 1, j0, j1);
          fast::cell_rows_avx512_i32_xterms(tab, bytes, folded, gx_f.data(), gh_f.data(), h_old.data(), j0, j1, h16_f.data(),
                                            h_bias >= 0 ? hu8_f.data() : nullptr, h_bias, dst_f.data());
          if (dst_f != dst || h16_f != h16 || hu8_f != hu8) return "the x-terms int32 cell on folded sums differs from the unfolded one";
        }
      }
    }
  }
  if (ran_int32) *ran_int32 = int32_kernel;
  if (!int32_kernel && avx2) {
    if (!fast::cell_avx2_i64_applies(tab)) return "the avx2 int64 cell does not apply to this cell";
    fast::cell_rows_avx2(tab, off_x.data(), off_h.data(), gx.data(), gh.data(), h_old.data(), j0, j1, h16.data(),
                         h_bias >= 0 ? hu8.data() : nullptr, h_bias, dst.data());
  } else if (!int32_kernel) {
    fast::cell_rows_avx512(tab, bytes, off_x.data(), off_h.data(), gx.data(), gh.data(), h_old.data(), j0, j1, h16.data(),
                           h_bias >= 0 ? hu8.data() : nullptr, h_bias, dst.data());
  }
  for (int j = 0; j < H; ++j) {
    std::ostringstream os;
    if (j < j0 || j >= j1) {
      if (dst[j] != kSentinel || h16[j] != int16_t{0x5A5A} || hu8[j] != uint8_t{0x5A}) {
        os << "unit " << j << " outside [" << j0 << ", " << j1 << ") was written";
        return os.str();
      }
      continue;
    }
    GruCellAccumulators acc{};
    for (int g = 0; g < 3; ++g) {
      acc.gemm_x[g] = gx[static_cast<size_t>(g) * H + j];
      acc.gemm_h[g] = gh[static_cast<size_t>(g) * H + j];
    }
    GruCellTrace trace{};
    const int32_t want = gru_cell_element(spec, j, acc, h_old[j], &trace);
    const bool u8_bad = h_bias >= 0 && hu8[j] != static_cast<uint8_t>(want + h_bias);
    if (dst[j] != want || h16[j] != want || u8_bad) {
      os << (int32_kernel ? "int32" : "int64") << " kernel, unit " << j << ": reference " << want << ", kernel " << dst[j] << " (int16 " << h16[j] << ", u8 "
         << int{hu8[j]} << "); gemm_x " << acc.gemm_x[0] << " " << acc.gemm_x[1] << " " << acc.gemm_x[2] << ", gemm_h "
         << acc.gemm_h[0] << " " << acc.gemm_h[1] << " " << acc.gemm_h[2] << ", h_old " << h_old[j]
         << "; reference ih " << trace.q_weight_ih_linear[0] << " " << trace.q_weight_ih_linear[1] << " "
         << trace.q_weight_ih_linear[2] << ", hh " << trace.q_weight_hh_linear[0] << " " << trace.q_weight_hh_linear[1]
         << " " << trace.q_weight_hh_linear[2] << ", z " << trace.q_update_gate_output << ", r "
         << trace.q_reset_gate_output << ", n " << trace.q_new_gate_output;
      return os.str();
    }
  }
  return "";
}

// Random, tie and edge accumulators for every preset and H through cell_mismatch (avx2: the avx2 level's kernels).
void cell_sweep(bool avx2) {
  for (const char* preset : {"int8", "int16-activations", "int16"}) {
    CAPTURE(preset);
    for (int H : {1, 7, 8, 16, 17, 37, 64}) {
      CAPTURE(H);
      test::CalibratedCase c = test::calibrated_case(5, H, 1, 1, 2, 1, load_bitwidth_config(preset), 900u + H);
      const GruCellQuantParams& p = c.quantized.cells[0];
      const GruCellParamsView spec = p.view();
      std::vector<std::vector<int32_t>> storage;
      const GruCellParamsView tab = tabulated_view(spec, storage);
      // Accumulator bounds the overflow proof allows: K · max|W| · max|x| (likewise R, h).
      auto max_abs = [](const std::vector<int32_t>& v) {
        int64_t m = 1;
        for (int32_t q : v) m = std::max<int64_t>(m, q < 0 ? -int64_t{q} : q);
        return m;
      };
      const TensorQuant& xq = p.q(GruTensor::x);
      const TensorQuant& hq = p.q(GruTensor::h);
      const int64_t bx = std::min<int64_t>(INT32_MAX, p.input_size * max_abs(p.q_W) * std::max(-int64_t{xq.qmin()}, int64_t{xq.qmax()}));
      const int64_t bh = std::min<int64_t>(INT32_MAX, H * max_abs(p.q_R) * std::max(-int64_t{hq.qmin()}, int64_t{hq.qmax()}));
      std::mt19937_64 rng(17u + static_cast<unsigned>(H));
      const int32_t h_bias = hq.qmin() >= -128 && hq.qmax() <= 127 ? 128 : -1;  // the u8 copy when h is 8-bit
      for (int trial = 0; trial < 300; ++trial) {
        CAPTURE(trial);
        std::vector<int32_t> gx(3 * static_cast<size_t>(H)), gh(3 * static_cast<size_t>(H));
        std::vector<int16_t> h_old(static_cast<size_t>(H));
        for (int cidx = 0; cidx < 3 * H; ++cidx) {
          for (int side = 0; side < 2; ++side) {
            const int64_t b = side == 0 ? bx : bh;
            const int shift = side == 0 ? spec.shift_gemm_x_to_weight_ih_linear[cidx] : spec.shift_gemm_h_to_weight_hh_linear[cidx];
            const int64_t off = side == 0 ? rshift_round(spec.q_bw[cidx], spec.shift_bw_to_gemm_x[cidx]) - spec.W_sum[cidx] * int64_t{spec.zp_x}
                                          : rshift_round(spec.q_br[cidx], spec.shift_br_to_gemm_h[cidx]) - spec.R_sum[cidx] * int64_t{spec.h.zp};
            int64_t v = 0;
            switch (rng() % 6) {
              case 0: v = b; break;
              case 1: v = -b; break;
              case 2:  // a rounding tie of B-1/B-2: (v + offset) mod 2^s == 2^(s-1)
                if (shift > 0) {
                  const int64_t unit = int64_t{1} << shift;
                  v = (static_cast<int64_t>(rng() % 64) - 32) * unit + unit / 2 - off;
                }
                break;
              case 3: v = static_cast<int64_t>(rng() % 2001) - 1000; break;  // near zero: the gates' centre
              default: v = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * b + 1)) - b;
            }
            v = std::max<int64_t>(-b, std::min<int64_t>(b, v));
            (side == 0 ? gx : gh)[static_cast<size_t>(cidx)] = static_cast<int32_t>(v);
          }
        }
        for (auto& q : h_old) {
          const uint64_t pick = rng() % 4;
          q = static_cast<int16_t>(pick == 0 ? hq.qmin() : pick == 1 ? hq.qmax() : hq.qmin() + static_cast<int32_t>(rng() % static_cast<uint64_t>(hq.qmax() - hq.qmin() + 1)));
        }
        const int j0 = trial % 3 == 0 ? 0 : static_cast<int>(rng() % static_cast<uint64_t>(H));
        const int j1 = trial % 3 == 0 ? H : j0 + static_cast<int>(rng() % static_cast<uint64_t>(H - j0 + 1));
        bool ran_int32 = false;
        std::string bad = cell_mismatch(spec, tab, gx, gh, h_old, j0, j1, h_bias, bx, bh, &ran_int32, avx2);
        REQUIRE_MESSAGE(bad.empty(), bad);
        // the int8 preset must get the int32 kernel; 16-bit activations must not (products up to 2^32)
        if (std::string(preset) == "int8") REQUIRE(ran_int32);
        if (std::string(preset) != "int8") REQUIRE_FALSE(ran_int32);
        // the same values through the int64 accumulator overloads
        const std::vector<int64_t> gx64(gx.begin(), gx.end()), gh64(gh.begin(), gh.end());
        bad = cell_mismatch(spec, tab, gx64, gh, h_old, j0, j1, h_bias, bx, bh, nullptr, avx2);
        REQUIRE_MESSAGE(bad.empty(), bad);
        bad = cell_mismatch(spec, tab, gx, gh64, h_old, j0, j1, h_bias, bx, bh, nullptr, avx2);
        REQUIRE_MESSAGE(bad.empty(), bad);
        bad = cell_mismatch(spec, tab, gx64, gh64, h_old, j0, j1, h_bias, bx, bh, nullptr, avx2);
        REQUIRE_MESSAGE(bad.empty(), bad);
      }
    }
  }
}

TEST_CASE("the AVX-512 cell steps (int64 and int32 lanes) drift from gru_cell_element (random, tie and edge accumulators, every preset)") {
  if (!cpu_has_avx512_vnni()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX-512 VNNI/VBMI; the avx512-vnni cell kernel cannot run here");
    return;
  }
  g_avx512_floor_plans = 0;
  cell_sweep(false);
  // the presets' cells take the floor form of rshift_round (shifts in [1, 30]): it must have been exercised
  REQUIRE(g_avx512_floor_plans > 0);
}

TEST_CASE("the AVX2 cell steps (int32 and int64 lanes) drift from gru_cell_element (random, tie and edge accumulators, every preset)") {
  if (!cpu_has_avx2()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX2; the avx2 cell kernel cannot run here");
    return;
  }
  g_avx2_floor_plans = 0;
  cell_sweep(true);
  // the presets' cells take the floor form of rshift_round (shifts in [1, 30]): it must have been exercised
  REQUIRE(g_avx2_floor_plans > 0);
}

// Plain Σ x·w for rows of A (codes, already biased into u8) against W.
// order: 0 the GEMM entry point; 1, 2 (M = 1 only) the GEMV in ascending, descending group order.
// W [rows, Kp] in the VNNI layout with its a_bias·Σ_k W[r, k] per row (padded like the rows), as the executor
// prepares them.
struct VnniWeights {
  std::vector<int8_t> packed;
  std::vector<int32_t> bias_rowsum;
};
VnniWeights pack_for_test(const std::vector<int8_t>& W, int rows, int Kp, int32_t a_bias) {
  const int rows_padded = fast::vnni_padded_rows(rows);
  VnniWeights v;
  v.packed.resize(static_cast<size_t>(rows_padded) * Kp);
  fast::pack_vnni_u8s8(W.data(), rows, Kp, v.packed.data());
  v.bias_rowsum.assign(static_cast<size_t>(rows_padded), 0);
  for (int r = 0; r < rows; ++r) {
    int32_t sum = 0;
    for (int k = 0; k < Kp; ++k) sum += W[static_cast<size_t>(r) * Kp + k];
    v.bias_rowsum[static_cast<size_t>(r)] = a_bias * sum;
  }
  return v;
}

void vnni_check(int M, int rows, int K, int c0, int c1, int32_t a_bias, uint32_t seed, int fill /* 0 random, 1 max, 2 min */,
                int order = 0) {
  const int Kp = (K + 15) / 16 * 16;
  std::mt19937 rng(seed);
  std::vector<int8_t> W(static_cast<size_t>(rows) * Kp, 0);
  std::vector<uint8_t> A(static_cast<size_t>(M) * Kp, 0);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < K; ++k) {
      W[static_cast<size_t>(r) * Kp + k] = static_cast<int8_t>(fill == 0 ? static_cast<int>(rng() % 256) - 128 : (fill == 1 ? 127 : -128));
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < Kp; ++k) A[static_cast<size_t>(m) * Kp + k] = static_cast<uint8_t>(fill == 0 ? rng() % 256 : 255);
  }
  const VnniWeights packed = pack_for_test(W, rows, Kp, a_bias);
  const std::vector<int8_t>& Bp = packed.packed;
  const std::vector<int32_t>& bias = packed.bias_rowsum;
  const size_t ldc = static_cast<size_t>(rows) + 3;
  constexpr int32_t kSentinel = -0x12345678;
  std::vector<int32_t> C(static_cast<size_t>(M) * ldc, kSentinel);
  if (order == 0) {
    fast::gemm_vnni_u8s8(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, bias.data(), c0, c1, C.data(), ldc);
  } else {
    REQUIRE(M == 1);
    fast::gemv_vnni_u8s8(A.data(), Bp.data(), Kp, bias.data(), c0, c1, C.data(), order == 2);
  }
  for (int m = 0; m < M; ++m) {
    for (size_t c = 0; c < ldc; ++c) {
      const int32_t got = C[static_cast<size_t>(m) * ldc + c];
      if (static_cast<int>(c) < c0 || static_cast<int>(c) >= c1) {
        REQUIRE_MESSAGE(got == kSentinel, "row " << m << " channel " << c << " outside [" << c0 << ", " << c1 << ") written");
        continue;
      }
      int64_t want = 0;
      for (int k = 0; k < Kp; ++k) {
        want += (int64_t{A[static_cast<size_t>(m) * Kp + k]} - a_bias) * W[c * Kp + static_cast<size_t>(k)];
      }
      REQUIRE_MESSAGE(got == want, "M " << M << " rows " << rows << " K " << K << ": C[" << m << ", " << c << "] = " << got
                                        << ", Σ x·w = " << want);
    }
  }
}

TEST_CASE("the VNNI GEMM drifts from Σ x·w (shapes that fill no block, operand ends, the longest K)") {
  if (!cpu_has_avx512_vnni()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX-512 VNNI/VBMI; the VNNI GEMM cannot run here");
    return;
  }
  for (int M : {1, 3, 4, 9}) {
    for (int rows : {1, 15, 16, 17, 129}) {
      for (int K : {1, 16, 33, 200}) {
        CAPTURE(M);
        CAPTURE(rows);
        CAPTURE(K);
        vnni_check(M, rows, K, 0, rows, 128, 7u * M + rows + K, 0);
        vnni_check(M, rows, K, rows / 3, rows - rows / 4, 0, 11u * M + rows + K, 0);
        vnni_check(M, rows, K, 0, rows, 128, 1u, 1);
        vnni_check(M, rows, K, 0, rows, 128, 1u, 2);
      }
    }
  }
  // The batch-1 GEMV in both group orders (the recurrence alternates them): runs of four groups, a pair and a
  // single, channel ranges that start and end inside groups.
  for (int rows : {1, 64, 65, 192, 257, 320, 448, 768, 1100}) {
    for (int K : {16, 64, 200}) {
      for (int order : {1, 2}) {
        CAPTURE(rows);
        CAPTURE(K);
        CAPTURE(order);
        vnni_check(1, rows, K, 0, rows, 128, 13u * rows + K, 0, order);
        vnni_check(1, rows, K, rows / 3, rows - rows / 5, 0, 17u * rows + K, 0, order);
        vnni_check(1, rows, K, 0, rows, 128, 1u, 2, order);
      }
    }
  }
  // K = kVnniMaxK with every product at its extreme: the int32 lane holds 65536·255·(-128) exactly.
  vnni_check(1, 16, fast::kVnniMaxK, 0, 16, 128, 3u, 2);
  vnni_check(2, 17, fast::kVnniMaxK, 0, 17, 0, 3u, 1);
}

// gemm_vnni_s16s8 (16-bit operand codes as two u8 planes) against the plain int64 sum Σ a·w, into int32 or
// int64 outputs. fill: 0 random codes in [-32768, 32767], 1 every product at 32767·127, 2 every product at
// -32768·127 (the most negative), 3 random codes in [-1000, 1000] (for the int32 output).
template <class OT>
void planes_check(int M, int rows, int K, int c0, int c1, uint32_t seed, int fill) {
  const int Kp = (K + 15) / 16 * 16;
  std::mt19937 rng(seed);
  std::vector<int8_t> W(static_cast<size_t>(rows) * Kp, 0);
  std::vector<int16_t> A(static_cast<size_t>(M) * Kp, 0);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < K; ++k) {
      W[static_cast<size_t>(r) * Kp + k] = static_cast<int8_t>(fill == 0 || fill == 3 ? static_cast<int>(rng() % 256) - 128 : 127);
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < K; ++k) {
      const int v = fill == 0   ? static_cast<int>(rng() % 65536) - 32768
                    : fill == 1 ? 32767
                    : fill == 2 ? -32768
                                : static_cast<int>(rng() % 2001) - 1000;
      A[static_cast<size_t>(m) * Kp + k] = static_cast<int16_t>(v);
    }
  }
  const VnniWeights packed = pack_for_test(W, rows, Kp, 128);
  const std::vector<int8_t>& Bp = packed.packed;
  const std::vector<int32_t>& bias = packed.bias_rowsum;
  std::vector<uint8_t> lo(A.size()), hi(A.size());
  fast::int16_to_planes(A.data(), A.size(), lo.data(), hi.data());
  for (size_t i = 0; i < A.size(); ++i) {  // the planes themselves: A = lo + 256·(hi - 128)
    REQUIRE(int{lo[i]} + 256 * (int{hi[i]} - 128) == A[i]);
  }
  const size_t ldc = static_cast<size_t>(rows) + 5;
  const OT kSentinel = static_cast<OT>(-0x12345678);
  std::vector<OT> C(static_cast<size_t>(M) * ldc, kSentinel);
  fast::gemm_vnni_s16s8(lo.data(), hi.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, bias.data(), c0, c1, C.data(), ldc);
  for (int m = 0; m < M; ++m) {
    for (size_t c = 0; c < ldc; ++c) {
      const OT got = C[static_cast<size_t>(m) * ldc + c];
      if (static_cast<int>(c) < c0 || static_cast<int>(c) >= c1) {
        REQUIRE_MESSAGE(got == kSentinel, "row " << m << " channel " << c << " outside [" << c0 << ", " << c1 << ") written");
        continue;
      }
      int64_t want = 0;
      for (int k = 0; k < Kp; ++k) want += int64_t{A[static_cast<size_t>(m) * Kp + k]} * W[c * Kp + static_cast<size_t>(k)];
      REQUIRE_MESSAGE(static_cast<int64_t>(got) == want, "M " << M << " rows " << rows << " K " << K << " fill " << fill
                                                            << ": C[" << m << ", " << c << "] = " << got << ", Σ a·w = " << want);
    }
  }
}

TEST_CASE("the two-plane VNNI GEMM for 16-bit codes drifts from Σ a·w (int32 and int64 outputs, operand ends, long K)") {
  if (!cpu_has_avx512_vnni()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX-512 VNNI/VBMI; the two-plane GEMM cannot run here");
    return;
  }
  for (int M : {1, 2, 3, 65}) {
    for (int rows : {1, 17, 64, 129, 200}) {
      for (int K : {1, 16, 33, 100}) {
        CAPTURE(M);
        CAPTURE(rows);
        CAPTURE(K);
        planes_check<int64_t>(M, rows, K, 0, rows, 5u * M + rows + K, 0);
        planes_check<int64_t>(M, rows, K, rows / 3, rows - rows / 4, 9u * M + rows + K, 0);
        planes_check<int64_t>(M, rows, K, 0, rows, 1u, 1);
        planes_check<int64_t>(M, rows, K, 0, rows, 1u, 2);
        planes_check<int32_t>(M, rows, K, rows / 5, rows, 3u * M + rows + K, 3);  // |Σ| <= 112·1000·128 < 2^31
      }
    }
  }
  // Long K with every product at an end: the planes' int32 lanes at their bounds, the sum far beyond int32.
  planes_check<int64_t>(1, 16, fast::kVnniMaxK, 0, 16, 3u, 2);
  planes_check<int64_t>(2, 17, fast::kVnniMaxK, 0, 17, 3u, 1);
  // int32 outputs that use most of the int32 range: 512·32767·127 < 2^31
  planes_check<int32_t>(1, 70, 512, 0, 70, 3u, 1);
  planes_check<int32_t>(3, 70, 512, 0, 70, 3u, 2);
}

TEST_CASE("a GEMV split at k into a stored and two added parts drifts from the whole GEMV") {
  if (!cpu_has_avx512_vnni()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX-512 VNNI/VBMI; the split GEMV cannot run here");
    return;
  }
  std::mt19937 rng(21);
  for (int rows : {48, 192, 384, 770}) {
    for (int Kp : {64, 256, 272}) {
      CAPTURE(rows);
      CAPTURE(Kp);
      std::vector<int8_t> W(static_cast<size_t>(rows) * Kp);
      for (auto& w : W) w = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
      std::vector<uint8_t> a(static_cast<size_t>(Kp));
      for (auto& v : a) v = static_cast<uint8_t>(rng());
      const VnniWeights packed = pack_for_test(W, rows, Kp, 128);
      const std::vector<int8_t>& Bp = packed.packed;
      const std::vector<int32_t>& bias = packed.bias_rowsum;
      std::vector<int32_t> whole(static_cast<size_t>(rows)), parts(static_cast<size_t>(rows), 0x5A5A5A5A);
      fast::gemv_vnni_u8s8(a.data(), Bp.data(), Kp, bias.data(), 0, rows, whole.data(), false);
      // the middle part first (stored), then the two outer parts (added), as the middle thread of three does
      const int k0 = Kp / 4 / 4 * 4, k1 = Kp / 2 / 4 * 4 + 4;
      const int c0 = rows / 3, c1 = rows - rows / 5;
      fast::gemv_vnni_u8s8_part(a.data(), Bp.data(), Kp, bias.data(), c0, c1, parts.data(), false, k0, k1, false);
      fast::gemv_vnni_u8s8_part(a.data(), Bp.data(), Kp, bias.data(), c0, c1, parts.data(), false, 0, k0, true);
      fast::gemv_vnni_u8s8_part(a.data(), Bp.data(), Kp, bias.data(), c0, c1, parts.data(), false, k1, Kp, true);
      for (int c = 0; c < rows; ++c) {
        if (c < c0 || c >= c1) {
          REQUIRE(parts[static_cast<size_t>(c)] == 0x5A5A5A5A);
        } else {
          REQUIRE_MESSAGE(parts[static_cast<size_t>(c)] == whole[static_cast<size_t>(c)], "channel " << c);
        }
      }
    }
  }
}

// One of the avx2 level's packed GEMMs, part(A, lda, M, Bp, Kp, c0, c1, C, ldc, k_begin, k_end, accumulate),
// against the plain int64 sum Σ a·w for W [rows, Kp] and A [M, Kp]: the whole K stored, and a stored middle
// part plus two added outer parts (as a part of a unit split does) giving the same C; channels outside [c0, c1)
// untouched.
template <class Part>
void avx2_gemm_check(int M, int rows, int Kp, int c0, int c1, const std::vector<int8_t>& W, const std::vector<int16_t>& A,
                     const Part& part, const char* what) {
  std::vector<int8_t> Bp(static_cast<size_t>(fast::vnni_padded_rows(rows)) * Kp);
  fast::pack_vnni_u8s8(W.data(), rows, Kp, Bp.data());
  const size_t ldc = static_cast<size_t>(rows) + 3;
  constexpr int32_t kSentinel = -0x12345678;
  std::vector<int32_t> C(static_cast<size_t>(M) * ldc, kSentinel), parts(C.size(), kSentinel);
  part(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, c0, c1, C.data(), ldc, 0, Kp, false);
  const int k0 = Kp / 4 / 4 * 4, k1 = std::max(k0, Kp / 2 / 4 * 4);
  part(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, c0, c1, parts.data(), ldc, k0, k1, false);
  part(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, c0, c1, parts.data(), ldc, 0, k0, true);
  part(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, c0, c1, parts.data(), ldc, k1, Kp, true);
  for (int m = 0; m < M; ++m) {
    for (size_t c = 0; c < ldc; ++c) {
      const size_t i = static_cast<size_t>(m) * ldc + c;
      if (static_cast<int>(c) < c0 || static_cast<int>(c) >= c1) {
        REQUIRE_MESSAGE((C[i] == kSentinel && parts[i] == kSentinel), what << ": row " << m << " channel " << c << " outside [" << c0 << ", " << c1 << ") written");
        continue;
      }
      int64_t want = 0;
      for (int k = 0; k < Kp; ++k) want += int64_t{A[static_cast<size_t>(m) * Kp + k]} * W[c * Kp + static_cast<size_t>(k)];
      REQUIRE_MESSAGE(int64_t{C[i]} == want, what << ": M " << M << " rows " << rows << " Kp " << Kp << ": C[" << m << ", " << c
                                                  << "] = " << C[i] << ", Σ a·w = " << want);
      REQUIRE_MESSAGE(parts[i] == C[i], what << ": parts: C[" << m << ", " << c << "] = " << parts[i] << ", whole " << C[i]);
    }
  }
}

// gemm_avx2_packed / gemm_avx2_packed_part (int16 operand codes against int8 weights in the packed layout).
// fill: 0 random 8-bit codes, 1 every product at (-128)·(-128), 2 every product at 127·(-128), 3 random 16-bit
// codes with |a| <= 2^14 (|Σ| stays below 2^31 for K <= 512: the contract's bound).
void avx2_packed_check(int M, int rows, int K, int c0, int c1, uint32_t seed, int fill) {
  const int Kp = (K + 15) / 16 * 16;
  std::mt19937 rng(seed);
  std::vector<int8_t> W(static_cast<size_t>(rows) * Kp, 0);
  std::vector<int16_t> A(static_cast<size_t>(M) * Kp, 0);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < K; ++k) W[static_cast<size_t>(r) * Kp + k] = static_cast<int8_t>(fill == 0 || fill == 3 ? static_cast<int>(rng() % 256) - 128 : -128);
  }
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < K; ++k) {
      const int v = fill == 0 ? static_cast<int>(rng() % 256) - 128 : fill == 1 ? -128 : fill == 2 ? 127 : static_cast<int>(rng() % 32769) - 16384;
      A[static_cast<size_t>(m) * Kp + k] = static_cast<int16_t>(v);
    }
  }
  auto part = [](const int16_t* a, size_t lda, int m, const int8_t* bp, int kp, int ca, int cb, int32_t* c, size_t ldc, int kb,
                 int ke, bool acc) {
    if (kb == 0 && ke == kp && !acc) return fast::gemm_avx2_packed(a, lda, m, bp, kp, ca, cb, c, ldc);  // the whole-K entry
    fast::gemm_avx2_packed_part(a, lda, m, bp, kp, ca, cb, c, ldc, kb, ke, acc);
  };
  avx2_gemm_check(M, rows, Kp, c0, c1, W, A, part, "gemm_avx2_packed");
}

// gemm_avx2_packed_s8_part (8-bit operand codes, weights in [-127, 127]), or another kernel with its contract
// and signature (the GEMV below). fill: 0 random codes and weights, 1 every product (-128)·(-127), 2 every
// product 127·(-127), 3 random with zero codes and zero weights mixed in.
template <class Part = decltype(&fast::gemm_avx2_packed_s8_part)>
void avx2_s8_gemm_check(int M, int rows, int K, int c0, int c1, uint32_t seed, int fill,
                        Part part = fast::gemm_avx2_packed_s8_part, const char* what = "gemm_avx2_packed_s8_part") {
  const int Kp = (K + 15) / 16 * 16;
  std::mt19937 rng(seed);
  std::vector<int8_t> W(static_cast<size_t>(rows) * Kp, 0);
  std::vector<int16_t> A(static_cast<size_t>(M) * Kp, 0);
  auto random_weight = [&] { return static_cast<int>(rng() % 255) - 127; };
  auto random_code = [&] { return static_cast<int>(rng() % 256) - 128; };
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < K; ++k) {
      const int w = fill == 0 ? random_weight() : fill == 3 ? (rng() % 3 == 0 ? 0 : random_weight()) : -127;
      W[static_cast<size_t>(r) * Kp + k] = static_cast<int8_t>(w);
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < K; ++k) {
      const int v = fill == 0 ? random_code() : fill == 1 ? -128 : fill == 2 ? 127 : (rng() % 3 == 0 ? 0 : random_code());
      A[static_cast<size_t>(m) * Kp + k] = static_cast<int16_t>(v);
    }
  }
  avx2_gemm_check(M, rows, Kp, c0, c1, W, A, part, what);
}

TEST_CASE("the AVX2 packed GEMMs (int16 and 8-bit codes) drift from Σ a·w (every row tile, channel ranges inside groups, operand ends, parts)") {
  if (!cpu_has_avx2()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX2; the avx2 packed GEMM cannot run here");
    return;
  }
  for (int M : {1, 2, 3, 4, 5, 7, 70}) {
    for (int rows : {1, 8, 17, 64, 100, 200}) {
      for (int K : {1, 16, 33, 200}) {
        CAPTURE(M);
        CAPTURE(rows);
        CAPTURE(K);
        avx2_packed_check(M, rows, K, 0, rows, 7u * M + rows + K, 0);
        avx2_packed_check(M, rows, K, rows / 3, rows - rows / 4, 11u * M + rows + K, 0);
        avx2_packed_check(M, rows, K, 0, rows, 1u, 1);
        avx2_packed_check(M, rows, K, rows / 5, rows, 1u, 2);
        avx2_packed_check(M, rows, K, 0, rows, 5u * M + rows + K, 3);
        // the GEMM for 8-bit codes (M = 1: its GEMV)
        avx2_s8_gemm_check(M, rows, K, 0, rows, 7u * M + rows + K, 0);
        avx2_s8_gemm_check(M, rows, K, rows / 3, rows - rows / 4, 11u * M + rows + K, 3);
        avx2_s8_gemm_check(M, rows, K, 0, rows, 1u, 1);
        avx2_s8_gemm_check(M, rows, K, rows / 5, rows, 1u, 2);
      }
    }
  }
  // The longest rows a lane holds at the ends: K = 65536 with every product 2^14 sums to 2^30 in two lanes.
  avx2_packed_check(1, 33, 65536, 0, 33, 3u, 1);
  avx2_packed_check(5, 9, 65536, 1, 9, 3u, 2);
  // a row chunk of the GEMM for long K (8 rows at K = 2048) and more than one chunk
  avx2_packed_check(21, 70, 2048, 3, 67, 9u, 0);
}

TEST_CASE("the AVX2 8-bit GEMV drifts from Σ a·w (groups, channel ranges, operand and weight ends, parts)") {
  if (!cpu_has_avx2()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX2; the avx2 8-bit GEMV cannot run here");
    return;
  }
  // gemv_avx2_packed_s8 called directly (one operand row; lda and ldc unused)
  auto gemv = [](const int16_t* a, size_t, int, const int8_t* bp, int kp, int ca, int cb, int32_t* c, size_t, int kb, int ke,
                 bool acc) { fast::gemv_avx2_packed_s8(a, bp, kp, ca, cb, c, kb, ke, acc); };
  for (int rows : {1, 8, 63, 64, 65, 200, 770}) {
    for (int K : {4, 16, 100, 1024}) {
      for (int fill = 0; fill < 3; ++fill) {  // 0 random, 1 every product (-128)·(-127), 2 every product 127·(-127)
        CAPTURE(rows);
        CAPTURE(K);
        CAPTURE(fill);
        avx2_s8_gemm_check(1, rows, K, rows / 4, rows - rows / 7, 31u + static_cast<uint32_t>(rows + K), fill, gemv,
                           "gemv_avx2_packed_s8");
      }
    }
  }
}

TEST_CASE("the AVX2 8-bit GEMM drifts from Σ a·w beyond one converted span of K and over many row chunks") {
  if (!cpu_has_avx2()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX2; the avx2 8-bit GEMM cannot run here");
    return;
  }
  // K beyond one converted span (4096): two and three spans, at the operand ends and random; many row chunks
  avx2_s8_gemm_check(6, 40, 5000, 3, 37, 5u, 1);
  avx2_s8_gemm_check(9, 70, 9000, 0, 70, 6u, 0);
  avx2_s8_gemm_check(133, 130, 256, 1, 129, 8u, 0);
}

TEST_CASE("the vector input quantization drifts from TensorQuant::quantize (ties, saturation, inf, NaN, tiny values)") {
  if (!cpu_has_avx2()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX2");
    return;
  }
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int bits : {8, 16}) {
    for (bool is_unsigned : {false, true}) {
      for (int shift : {-60, -31, -7, -1, 0, 1, 3, 7, 12, 15, 24, 31, 60}) {
        TensorQuant q;
        q.bits = bits;
        q.is_unsigned = is_unsigned;
        q.shift = shift;
        for (int32_t zp : {q.qmin(), 0, 3, q.qmax()}) {
          q.zp = zp;
          CAPTURE(bits);
          CAPTURE(is_unsigned);
          CAPTURE(shift);
          CAPTURE(zp);
          std::vector<float> x;
          const float scale = std::ldexp(1.0f, -shift);
          for (int k = -40; k <= 40; ++k) {  // exact ties k + 1/2 and their neighbours, in x's scale
            const float tie = (static_cast<float>(k) + 0.5f) * scale;
            x.push_back(tie);
            x.push_back(std::nextafter(tie, 0.0f));
            x.push_back(std::nextafter(tie, 2.0f * tie));
          }
          for (float v : {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, 3.4e38f, -3.4e38f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f,
                          8388608.5f * scale, 16777216.0f * scale, -16777217.0f * scale}) {
            x.push_back(v);
          }
          for (int i = 0; i < 200; ++i) x.push_back(normal(rng) * scale * 300.0f);
          x.push_back(0.5f);  // a tail that fills no vector of eight (n % 8 != 0 below)
          std::vector<int32_t> got(x.size(), 0x5A5A5A5A);
          fast::quantize_f32_avx2(x.data(), x.size(), shift, zp, q.qmin(), q.qmax(), got.data());
          for (size_t i = 0; i < x.size(); ++i) {
            REQUIRE_MESSAGE(got[i] == q.quantize(static_cast<double>(x[i])),
                            "x[" << i << "] = " << x[i] << ": TensorQuant::quantize " << q.quantize(x[i]) << ", vector " << got[i]);
          }
          // 8-bit codes: the same values as VNNI operand rows (codes + a_bias as bytes, padding a_bias), rows of
          // C values in Kp bytes for C that fill 32-byte blocks, leave tails or fill nothing
          if (bits != 8) continue;
          const int32_t a_bias = is_unsigned ? 0 : 128;
          for (int C : {1, 7, 31, 32, 33, 77}) {
            CAPTURE(C);
            const int Kp = (C + 15) / 16 * 16 + 16;
            const size_t rows = x.size() / static_cast<size_t>(C);
            std::vector<uint8_t> u8(rows * static_cast<size_t>(Kp), 0x5A);
            fast::quantize_f32_to_u8_rows_avx2(x.data(), rows, C, Kp, shift, zp, q.qmin(), q.qmax(), a_bias, u8.data());
            for (size_t r = 0; r < rows; ++r) {
              for (int k = 0; k < Kp; ++k) {
                const int32_t want = (k < C ? q.quantize(static_cast<double>(x[r * C + k])) : 0) + a_bias;
                REQUIRE_MESSAGE(u8[r * Kp + k] == want, "row " << r << " k " << k << ": want " << want << ", got " << int{u8[r * Kp + k]});
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("an out-of-range input code slips through the one-pass int32 -> u8 operand rows, or a byte is off") {
  if (!cpu_has_avx2()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX2");
    return;
  }
  // C across the 32-code vectors and the tail; int8 codes with a_bias 128 and uint8 codes with 0
  for (int C : {1, 7, 31, 32, 33, 64, 100}) {
    for (const std::array<int32_t, 3>& space : {std::array<int32_t, 3>{-128, 127, 128}, std::array<int32_t, 3>{0, 255, 0}}) {
      const int32_t q_min = space[0], q_max = space[1], a_bias = space[2];
      CAPTURE(C);
      CAPTURE(q_min);
      const int Kp = (C + 15) / 16 * 16;
      const size_t rows = 5;
      std::vector<int32_t> q(rows * C);
      for (size_t i = 0; i < q.size(); ++i) {  // both ends of the range, and everything between
        q[i] = i % 7 == 0 ? q_min : i % 7 == 1 ? q_max : q_min + static_cast<int32_t>((i * 37) % (q_max - q_min + 1));
      }
      std::vector<uint8_t> u8(rows * Kp, 0x5A);
      REQUIRE(fast::codes_to_u8_rows_checked(q.data(), rows, C, Kp, q_min, q_max, a_bias, u8.data()));
      for (size_t r = 0; r < rows; ++r) {
        for (int k = 0; k < Kp; ++k) {
          CHECK(int{u8[r * Kp + k]} == (k < C ? q[r * C + k] : 0) + a_bias);  // padding: the code 0
        }
      }
      for (size_t bad : {size_t{0}, q.size() / 2, q.size() - 1}) {  // in a vector of 32 or in the tail
        for (int32_t v : {q_min - 1, q_max + 1, 1 << 20, -(1 << 20)}) {
          std::vector<int32_t> qb = q;
          qb[bad] = v;
          CHECK_FALSE(fast::codes_to_u8_rows_checked(qb.data(), rows, C, Kp, q_min, q_max, a_bias, u8.data()));
        }
      }
    }
  }
}

TEST_CASE("an out-of-range input code slips through the fused int32 -> int16 conversion, or the u8 bias is off") {
  if (!cpu_has_avx2()) {
    MESSAGE("NOT TESTED: this CPU lacks AVX2");
    return;
  }
  for (int C : {1, 15, 16, 17, 40}) {
    CAPTURE(C);
    const int Kp = (C + 15) / 16 * 16;
    const size_t rows = 3;
    std::vector<int32_t> q(rows * C);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int32_t>(i % 2 ? -128 : 127) - static_cast<int32_t>(i % 5);
    std::vector<int16_t> x16(rows * Kp, 0x5A5A);
    REQUIRE(fast::codes_to_int16_checked(q.data(), rows, C, Kp, -132, 127, x16.data()));
    for (size_t r = 0; r < rows; ++r) {
      for (int k = 0; k < Kp; ++k) CHECK(x16[r * Kp + k] == (k < C ? q[r * C + k] : 0));
    }
    for (size_t bad : {size_t{0}, q.size() / 2, q.size() - 1}) {  // in a vector of sixteen or in the tail
      for (int32_t v : {-133, 128, 1 << 20}) {
        std::vector<int32_t> qb = q;
        qb[bad] = v;
        CHECK_FALSE(fast::codes_to_int16_checked(qb.data(), rows, C, Kp, -132, 127, x16.data()));
      }
    }
    std::vector<int16_t> codes(static_cast<size_t>(C) * 3 + 5);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<int16_t>(static_cast<int>(i * 37 % 256) - 128);
    std::vector<uint8_t> u8(codes.size());
    fast::int16_to_u8_biased(codes.data(), codes.size(), 128, u8.data());
    for (size_t i = 0; i < codes.size(); ++i) CHECK(int{u8[i]} == codes[i] + 128);
  }
}

}  // namespace
}  // namespace qgru
