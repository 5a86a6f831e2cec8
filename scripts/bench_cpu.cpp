// CPU benchmarks of the qgru executors (Google Benchmark), run by scripts/bench_cpu.py; results in
// docs/benchmarks/cpu.md.
//
//   BM_gru/<path>/<H>/<T>/<N>/<threads>   one GRU layer, C = H, unidirectional, the whole sequence per
//                                          iteration; path 0 = integer reference (int8 preset), 1 = fast
//                                          int8 (the defaults: at N = 1 split over units or not as the
//                                          object's earlier runs measured), 2 = fast int16-activations, 3 = float reference, 4 = fast
//                                          int8 with every step split over hidden units (a barrier per
//                                          step; min_units_per_thread = 1, adaptive_split off), 5 = fast int8 at the avx2 level,
//                                          6 = fast int8 with B-1 pipelined beside a one-thread recurrence
//                                          (min_pipelined_b1_macs = 0, never split over units; N = 1,
//                                          two threads). N = 1 at H in {128, 192, 384, 512}: paths 1, 4, 6.
//                                          7 = fast int8 with multiplier scales ("scales": "multiplier" on every
//                                          tensor, docs/FIXED_POINT.md §1a), 8 = the same at the avx2 level,
//                                          9 = fast int8 with the linear_before_reset = 0 cell (§3a), 10 = the
//                                          same at the avx2 level (one thread, H in {64, 256}).
//   BM_madd_peak                            the machine's int16 multiply-add rate with _mm256_madd_epi16
//                                          (register-only, 10 independent chains): MACs/s in items_per_second.
//   BM_vnni_peak                            the same for AVX-512 VNNI vpdpbusd (u8 x s8, 64 MACs per
//                                          instruction, 12 independent chains): the peak of the avx512-vnni
//                                          level's GEMMs.
//   BM_fma_peak                             the fp32 FMA rate (vfmadd231ps, 8 MACs per instruction, 10 chains).
//   BM_madd_fma_mix                         vpmaddwd and vfmadd231ps chains interleaved: multiply instructions
//                                          per second (do the two kinds issue side by side?).
//   BM_vnni_gemm/<M>/<rows>/<K>             the avx512-vnni level's GEMM alone (weights and operands hot).
//   BM_cell_i32/<H>/<x_terms>               the avx512-vnni level's int32 cell step alone (one row, hot), from
//                                          the GEMM sums (x_terms 0: the batched loop's cell) or from the x
//                                          terms (1: the batch-1 loop's).
//   BM_avx2_gemm/<M>/<rows>/<K>/<s8>        the avx2 level's GEMM alone (s8 0: fast::gemm_avx2_packed on int16
//                                          codes; 1: gemm_avx2_packed_s8_part for 8-bit codes; M = 1: the
//                                          8-bit GEMV gemv_avx2_packed_s8), weights and operands hot.
// The model: weights uniform in ±1.5/sqrt(H), input N(0, 1), quantized with ranges observed (min/max) on
// the same input, as the unit tests do.
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "../lib/src/runtime/fast/fast_kernels.h"  // the fast executor's private kernels, for BM_vnni_gemm
#include "qgru/fixed/activation.h"
#include "qgru/fixed/rounding.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"  // test/unit/support: random models and a min/max range observer

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

struct Case {
  qgru::test::CalibratedCase c;
};

std::unique_ptr<Case> make_case(int H, int T, int N, const char* preset, bool multiplier_scales = false,
                                bool linear_before_reset = true) {
  auto k = std::make_unique<Case>();
  qgru::BitwidthConfig config = qgru::load_bitwidth_config(preset);
  if (multiplier_scales) {
    for (qgru::TensorBitwidth& t : config.tensors) t.multiplier_scale = true;
  }
  k->c = qgru::test::calibrated_case(H, H, 1, 1, T, N, config, 1234u, {}, linear_before_reset);
  return k;
}

// Random int8 weights [rows, Kp] in the packed layout both levels' GEMMs read (pack_vnni_u8s8).
std::vector<int8_t> random_packed_weights(int rows, int Kp, std::mt19937& rng) {
  std::vector<int8_t> W(static_cast<size_t>(rows) * Kp), Bp(static_cast<size_t>(qgru::fast::vnni_padded_rows(rows)) * Kp);
  for (auto& w : W) w = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  qgru::fast::pack_vnni_u8s8(W.data(), rows, Kp, Bp.data());
  return Bp;
}

void BM_gru(benchmark::State& state) {
  const int path = static_cast<int>(state.range(0));
  const int H = static_cast<int>(state.range(1));
  const int T = static_cast<int>(state.range(2));
  const int N = static_cast<int>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  auto k = make_case(H, T, N, path == 2 ? "int16-activations" : "int8", path == 7 || path == 8, path != 9 && path != 10);
  const auto& c = k->c;
  qgru::FastExecutorOptions options;
  options.threads = threads;
  if (path == 8 || path == 10) options.isa = qgru::FastIsa::Avx2;
  if (path == 4) {
    options.min_units_per_thread = 1;
    options.adaptive_split = false;
  }
  if (path == 5) options.isa = qgru::FastIsa::Avx2;
  if (path == 6) {
    options.min_pipelined_b1_macs = 0;
    options.min_units_per_thread = std::numeric_limits<int>::max();
    options.adaptive_split = false;
  }
  qgru::FastQuantGru fast(c.quantized, options);
  if (path != 0 && path != 3 && !fast.support().supported) {
    state.SkipWithError(("fast path not supported: " + fast.support().reason).c_str());
    return;
  }
  // Untimed warm-up runs of the fast paths (the peers' workers make 2): the first run starts the thread team,
  // and at batch 1 the first runs of an object take turns among its schedules (schedule_choice.h).
  if (path != 0 && path != 3) {
    for (int i = 0; i < 12; ++i) benchmark::DoNotOptimize(fast.run(c.x.data(), T, N, nullptr).output_codes.data());
  }
  for (auto _ : state) {
    if (path == 0) {
      auto r = qgru::run_quantized_gru(c.quantized, c.x.data(), T, N, nullptr);
      benchmark::DoNotOptimize(r.output_codes.data());
    } else if (path == 3) {
      auto r = qgru::run_float_gru(c.model, c.x.data(), T, N, nullptr, nullptr);
      benchmark::DoNotOptimize(r.output.data());
    } else {
      auto r = fast.run(c.x.data(), T, N, nullptr);
      benchmark::DoNotOptimize(r.output_codes.data());
    }
  }
  const double macs = 2.0 * 3.0 * H * H * T * N;  // W x and R h per step
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MACs_per_s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void BM_madd_peak(benchmark::State& state) {
  const __m256i a = _mm256_set1_epi16(3);
  const __m256i b = _mm256_set1_epi16(-5);
  // Each chain multiplies its own accumulator (so the multiply stays in the loop without a register copy per
  // instruction): a chain's latency is madd + add (about 4 cycles), and ten chains (all in registers) ask for
  // more multiplies per cycle than the machine issues, so the rate is the multiplier's throughput.
  constexpr int kChains = 10;  // named variables below: GCC keeps them in registers (an array it spilled)
  constexpr int kIters = 4096;
  for (auto _ : state) {
    __m256i c0 = a, c1 = _mm256_add_epi16(a, b), c2 = _mm256_sub_epi16(a, b), c3 = _mm256_add_epi16(c1, b),
            c4 = _mm256_sub_epi16(c2, b), c5 = _mm256_add_epi16(c3, b), c6 = _mm256_sub_epi16(c4, b),
            c7 = _mm256_add_epi16(c5, b), c8 = _mm256_sub_epi16(c6, b), c9 = _mm256_add_epi16(c7, b);
    for (int i = 0; i < kIters; ++i) {
      // written out in assembly: GCC kept some of the chains in memory when given intrinsics
      __asm__ volatile(
          "vpmaddwd %[b], %[c0], %%ymm11\n\tvpaddd %%ymm11, %[c0], %[c0]\n\t"
          "vpmaddwd %[b], %[c1], %%ymm12\n\tvpaddd %%ymm12, %[c1], %[c1]\n\t"
          "vpmaddwd %[b], %[c2], %%ymm13\n\tvpaddd %%ymm13, %[c2], %[c2]\n\t"
          "vpmaddwd %[b], %[c3], %%ymm14\n\tvpaddd %%ymm14, %[c3], %[c3]\n\t"
          "vpmaddwd %[b], %[c4], %%ymm15\n\tvpaddd %%ymm15, %[c4], %[c4]\n\t"
          "vpmaddwd %[b], %[c5], %%ymm11\n\tvpaddd %%ymm11, %[c5], %[c5]\n\t"
          "vpmaddwd %[b], %[c6], %%ymm12\n\tvpaddd %%ymm12, %[c6], %[c6]\n\t"
          "vpmaddwd %[b], %[c7], %%ymm13\n\tvpaddd %%ymm13, %[c7], %[c7]\n\t"
          "vpmaddwd %[b], %[c8], %%ymm14\n\tvpaddd %%ymm14, %[c8], %[c8]\n\t"
          "vpmaddwd %[b], %[c9], %%ymm15\n\tvpaddd %%ymm15, %[c9], %[c9]\n\t"
          : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5), [c6] "+x"(c6),
            [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9)
          : [b] "x"(b)
          : "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    }
    for (__m256i v : {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9}) benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations() * int64_t{kChains} * kIters * 16);  // 16 MACs per madd
}
BENCHMARK(BM_madd_peak)->Threads(1)->Threads(2)->MeasureProcessCPUTime()->UseRealTime();

// The fp32 FMA rate of the same core (vfmadd231ps, 8 multiply-adds per instruction, ten independent chains,
// register-only, in assembly like BM_madd_peak): what an fp32 peer's GEMM can reach at most. With
// BM_madd_fma_mix it says whether integer multiply-adds and FMAs issue side by side or share the same units.
__attribute__((target("avx2,fma"))) void BM_fma_peak(benchmark::State& state) {
  constexpr int kChains = 10;
  constexpr int kIters = 4096;
  const __m256 b = _mm256_set1_ps(0.5f);
  for (auto _ : state) {
    __m256 c0 = b, c1 = b, c2 = b, c3 = b, c4 = b, c5 = b, c6 = b, c7 = b, c8 = b, c9 = b;
    for (int i = 0; i < kIters; ++i) {
      __asm__ volatile(
          "vfmadd231ps %[b], %[b], %[c0]\n\tvfmadd231ps %[b], %[b], %[c1]\n\tvfmadd231ps %[b], %[b], %[c2]\n\t"
          "vfmadd231ps %[b], %[b], %[c3]\n\tvfmadd231ps %[b], %[b], %[c4]\n\tvfmadd231ps %[b], %[b], %[c5]\n\t"
          "vfmadd231ps %[b], %[b], %[c6]\n\tvfmadd231ps %[b], %[b], %[c7]\n\tvfmadd231ps %[b], %[b], %[c8]\n\t"
          "vfmadd231ps %[b], %[b], %[c9]\n\t"
          : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5), [c6] "+x"(c6),
            [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9)
          : [b] "x"(b));
    }
    for (__m256 v : {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9}) benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations() * int64_t{kChains} * kIters * 8);  // 8 MACs per FMA
}
BENCHMARK(BM_fma_peak)->Threads(1)->MeasureProcessCPUTime()->UseRealTime();

// Four vpmaddwd + vpaddd chains interleaved with four vfmadd231ps chains: items are instructions of the two
// multiply kinds (vpmaddwd and vfmadd231ps; the vpaddd not counted). If both kinds issued on separate units the
// rate would approach the sum of BM_madd_peak's and BM_fma_peak's instruction rates; if they share units it
// stays at either one's.
__attribute__((target("avx2,fma"))) void BM_madd_fma_mix(benchmark::State& state) {
  constexpr int kIters = 4096;
  const __m256i bi = _mm256_set1_epi16(-5);
  const __m256 bf = _mm256_set1_ps(0.5f);
  for (auto _ : state) {
    __m256i i0 = bi, i1 = _mm256_add_epi16(bi, bi), i2 = _mm256_sub_epi16(bi, i1), i3 = _mm256_add_epi16(i1, bi);
    __m256 f0 = bf, f1 = bf, f2 = bf, f3 = bf;
    for (int i = 0; i < kIters; ++i) {
      __asm__ volatile(
          "vpmaddwd %[bi], %[i0], %%ymm12\n\tvfmadd231ps %[bf], %[bf], %[f0]\n\tvpaddd %%ymm12, %[i0], %[i0]\n\t"
          "vpmaddwd %[bi], %[i1], %%ymm13\n\tvfmadd231ps %[bf], %[bf], %[f1]\n\tvpaddd %%ymm13, %[i1], %[i1]\n\t"
          "vpmaddwd %[bi], %[i2], %%ymm14\n\tvfmadd231ps %[bf], %[bf], %[f2]\n\tvpaddd %%ymm14, %[i2], %[i2]\n\t"
          "vpmaddwd %[bi], %[i3], %%ymm15\n\tvfmadd231ps %[bf], %[bf], %[f3]\n\tvpaddd %%ymm15, %[i3], %[i3]\n\t"
          : [i0] "+x"(i0), [i1] "+x"(i1), [i2] "+x"(i2), [i3] "+x"(i3), [f0] "+x"(f0), [f1] "+x"(f1), [f2] "+x"(f2),
            [f3] "+x"(f3)
          : [bi] "x"(bi), [bf] "x"(bf)
          : "xmm12", "xmm13", "xmm14", "xmm15");
    }
    for (__m256i v : {i0, i1, i2, i3}) benchmark::DoNotOptimize(v);
    for (__m256 v : {f0, f1, f2, f3}) benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations() * int64_t{8} * kIters);  // multiply instructions
}
BENCHMARK(BM_madd_fma_mix)->Threads(1)->MeasureProcessCPUTime()->UseRealTime();

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void vnni_peak_loop(benchmark::State& state) {
  const __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-5);
  constexpr int kChains = 12;  // > latency x throughput of vpdpbusd
  constexpr int kIters = 4096;
  for (auto _ : state) {
    __m512i acc[kChains];
    for (auto& v : acc) v = _mm512_setzero_si512();
    for (int i = 0; i < kIters; ++i) {
      for (int j = 0; j < kChains; ++j) {
        __m512i x = a;
        __asm__ volatile("" : "+v"(x));  // keep the multiply inside the loop
        acc[j] = _mm512_dpbusd_epi32(acc[j], x, b);
      }
    }
    for (auto& v : acc) benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations() * int64_t{kChains} * kIters * 64);  // 64 MACs per vpdpbusd
}
void BM_vnni_peak(benchmark::State& state) {
  if (!qgru::cpu_has_avx512_vnni()) {
    state.SkipWithError("this CPU has no AVX-512 VNNI");
    return;
  }
  vnni_peak_loop(state);
}
BENCHMARK(BM_vnni_peak)->Threads(1)->Threads(2)->MeasureProcessCPUTime()->UseRealTime();

// An int8 cell of the unit tests' kind prepared as the fast executor does at load (activations tabulated, the
// int32 plan, byte tables), for the cell benchmark below.
struct CellSetup {
  std::unique_ptr<Case> k;
  qgru::GruCellParamsView v{};
  std::vector<int32_t> tables[3];
  qgru::fast::CellByteTables bytes{};
  qgru::fast::Cell32Plan plan;
};
std::unique_ptr<CellSetup> cell_setup(int H) {
  auto s = std::make_unique<CellSetup>();
  s->k = make_case(H, 4, 4, "int8");
  s->v = s->k->c.quantized.cells[0].view();
  qgru::ActivationView* acts[3] = {&s->v.update_gate, &s->v.reset_gate, &s->v.new_gate};
  for (int g = 0; g < 3; ++g) {  // the executor's tabulation of piecewise-linear activations
    if (acts[g]->impl != qgru::ActivationImpl::Pwl) continue;
    for (int64_t q = acts[g]->q_in_min; q <= acts[g]->q_in_max; ++q) s->tables[g].push_back(qgru::evaluate_activation(*acts[g], static_cast<int32_t>(q)));
    acts[g]->impl = qgru::ActivationImpl::Table;
    acts[g]->table = s->tables[g].data();
  }
  const qgru::GruCellParamsView& v = s->v;
  std::vector<int64_t> off_x(3 * static_cast<size_t>(H)), off_h(3 * static_cast<size_t>(H));
  for (int c = 0; c < 3 * H; ++c) {
    off_x[c] = qgru::rshift_round(v.q_bw[c], v.shift_bw_to_gemm_x[c]) - v.W_sum[c] * static_cast<int64_t>(v.zp_x);
    off_h[c] = qgru::rshift_round(v.q_br[c], v.shift_br_to_gemm_h[c]) - v.R_sum[c] * static_cast<int64_t>(v.h.zp);
  }
  qgru::fast::prepare_byte_tables(v, &s->bytes);
  qgru::fast::prepare_cell32_plan(v, off_x.data(), off_h.data(), &s->plan);
  // the executor's form: the offsets (and halves) folded into the GEMMs' bias row sums (the sums here are random)
  s->plan.sums_folded_x = s->plan.sums_folded_h = true;
  return s;
}

// The int32 cell step alone (fast::cell_rows_avx512_i32 on one row of H units, accumulators hot in L1): the
// counter ns_per_16_units is per wall second (CPU time / (H / 16) is the figure when the machine is shared).
void BM_cell_i32(benchmark::State& state) {
  if (!qgru::cpu_has_avx512_vnni()) {
    state.SkipWithError("this CPU has no AVX-512 VNNI");
    return;
  }
  const int H = static_cast<int>(state.range(0));
  auto s = cell_setup(H);
  std::mt19937 rng(7);
  std::vector<int32_t> gx(3 * static_cast<size_t>(H)), gh(gx.size()), dst(static_cast<size_t>(H));
  for (auto& a : gx) a = static_cast<int32_t>(rng() % 200001) - 100000;
  for (auto& a : gh) a = static_cast<int32_t>(rng() % 200001) - 100000;
  std::vector<int16_t> h_old(static_cast<size_t>(H)), h_new(static_cast<size_t>(H));
  for (auto& a : h_old) a = static_cast<int16_t>(static_cast<int>(rng() % 256) - 128);
  std::vector<uint8_t> hu8(static_cast<size_t>(H));
  const bool x_terms = state.range(1) != 0;
  for (auto _ : state) {
    if (x_terms) {
      qgru::fast::cell_rows_avx512_i32_xterms(s->v, s->bytes, s->plan, gx.data(), gh.data(), h_old.data(), 0, H, h_new.data(),
                                              hu8.data(), 128, dst.data());
    } else {
      qgru::fast::cell_rows_avx512_i32(s->v, s->bytes, s->plan, gx.data(), gh.data(), h_old.data(), 0, H, h_new.data(), hu8.data(),
                                       128, dst.data());
    }
    benchmark::DoNotOptimize(dst.data());
  }
  state.counters["ns_per_16_units"] = benchmark::Counter(static_cast<double>(H) / 16.0, benchmark::Counter::kIsIterationInvariantRate |
                                                                                       benchmark::Counter::kInvert);
}
BENCHMARK(BM_cell_i32)->Args({256, 0})->Args({256, 1})->ArgNames({"H", "x_terms"})->MeasureProcessCPUTime()->UseRealTime();

void BM_vnni_gemm(benchmark::State& state) {
  if (!qgru::cpu_has_avx512_vnni()) {
    state.SkipWithError("this CPU has no AVX-512 VNNI");
    return;
  }
  const int M = static_cast<int>(state.range(0));
  const int rows = static_cast<int>(state.range(1));
  const int Kp = static_cast<int>(state.range(2));
  std::mt19937 rng(5);
  const std::vector<int8_t> Bp = random_packed_weights(rows, Kp, rng);
  std::vector<uint8_t> A(static_cast<size_t>(M) * Kp);
  for (auto& a : A) a = static_cast<uint8_t>(rng());
  std::vector<int32_t> bias(static_cast<size_t>(qgru::fast::vnni_padded_rows(rows)), 0), C(static_cast<size_t>(M) * rows);
  bool descending = false;
  for (auto _ : state) {
    if (M == 1 && state.range(3) == 1) {  // the recurrence's alternating order
      qgru::fast::gemv_vnni_u8s8(A.data(), Bp.data(), Kp, bias.data(), 0, rows, C.data(), descending);
      descending = !descending;
      benchmark::DoNotOptimize(C.data());
      continue;
    }
    qgru::fast::gemm_vnni_u8s8(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, bias.data(), 0, rows, C.data(),
                               static_cast<size_t>(rows));
    benchmark::DoNotOptimize(C.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t{M} * rows * Kp);  // MACs
}
BENCHMARK(BM_vnni_gemm)->Args({1, 192, 64, 0})->Args({1, 768, 256, 0})->Args({1, 768, 256, 1})->Args({1, 3072, 1024, 0})
    ->Args({1, 3072, 1024, 1})->Args({1, 384, 256, 0})->Args({1, 128, 256, 0})->Args({32, 768, 256, 0})->Args({64, 768, 256, 0})->Args({16, 1536, 512, 0})->Args({6400, 768, 256, 0})->Args({100, 192, 64, 0})
    ->ArgNames({"M", "rows", "K", "alternate"})->MeasureProcessCPUTime()->UseRealTime();
#endif

// The avx2 level's GEMM alone (fast::gemm_avx2_packed: int16 operand codes against int8 weights in the packed
// layout), weights and operands hot.
void BM_avx2_gemm(benchmark::State& state) {
  if (!qgru::cpu_has_avx2()) {
    state.SkipWithError("this CPU has no AVX2");
    return;
  }
  const int M = static_cast<int>(state.range(0));
  const int rows = static_cast<int>(state.range(1));
  const int Kp = static_cast<int>(state.range(2));
  std::mt19937 rng(5);
  const std::vector<int8_t> Bp = random_packed_weights(rows, Kp, rng);
  std::vector<int16_t> A(static_cast<size_t>(M) * Kp);
  for (auto& a : A) a = static_cast<int16_t>(static_cast<int>(rng() % 256) - 128);
  std::vector<int32_t> C(static_cast<size_t>(M) * rows);
  const bool s8 = state.range(3) != 0;
  for (auto _ : state) {
    if (M == 1) {  // weights in [-127, 127], codes in [-128, 127]: the recurrence's GEMV
      qgru::fast::gemv_avx2_packed_s8(A.data(), Bp.data(), Kp, 0, rows, C.data(), 0, Kp, false);
    } else if (s8) {
      qgru::fast::gemm_avx2_packed_s8_part(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, 0, rows, C.data(),
                                           static_cast<size_t>(rows), 0, Kp, false);
    } else {
      qgru::fast::gemm_avx2_packed(A.data(), static_cast<size_t>(Kp), M, Bp.data(), Kp, 0, rows, C.data(), static_cast<size_t>(rows));
    }
    benchmark::DoNotOptimize(C.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t{M} * rows * Kp);  // MACs
}
BENCHMARK(BM_avx2_gemm)->Args({1, 192, 64, 1})->Args({1, 768, 256, 1})->Args({1, 3072, 1024, 1})
    ->ArgsProduct({{32, 64}, {768}, {256}, {0, 1}})->ArgsProduct({{50}, {3072}, {1024}, {0, 1}})
    ->ArgsProduct({{100, 6400}, {768}, {256}, {0, 1}})->ArgsProduct({{100}, {192}, {64}, {0, 1}})
    ->ArgsProduct({{1600}, {1536}, {512}, {0, 1}})
    ->ArgNames({"M", "rows", "K", "s8"})->MeasureProcessCPUTime()->UseRealTime();

void shapes(benchmark::internal::Benchmark* b) {
  const int list[][3] = {{64, 100, 1}, {256, 100, 1}, {256, 100, 64}, {512, 50, 32}, {1024, 50, 1}};
  for (int path : {0, 1, 2, 3, 4, 5, 6}) {
    for (const auto& s : list) {
      for (int threads : {1, 2}) {
        if ((path == 0 || path == 3) && threads != 1) continue;  // single-threaded by construction
        if ((path == 4 || path == 6) && (threads != 2 || s[2] != 1)) continue;  // N = 1, two threads
        b->Args({path, s[0], s[1], s[2], threads});
      }
    }
  }
  // Batch 1 between the shapes: where splitting a step over two cores starts to pay (paths 1, 4, 6)
  for (int H : {128, 192, 384, 512}) {
    b->Args({1, H, 100, 1, 1});
    for (int path : {1, 4, 6}) b->Args({path, H, 100, 1, 2});
  }
  // The cells beside the power-of-two linear_before_reset = 1 one: multiplier scales, linear_before_reset = 0
  for (int path : {7, 8, 9, 10}) {
    for (const auto& s : {std::array<int, 3>{64, 100, 1}, std::array<int, 3>{256, 100, 1}, std::array<int, 3>{256, 100, 64}}) {
      b->Args({path, s[0], s[1], s[2], 1});
    }
  }
}
BENCHMARK(BM_gru)->Apply(shapes)->ArgNames({"path", "H", "T", "N", "threads"})->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
