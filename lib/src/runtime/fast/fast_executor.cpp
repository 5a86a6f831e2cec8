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
#include "time_loop.h"
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

// requantize_h_to_next_x for one layer and direction with its rescale derived once (the reference derives it per
// code: h_to_next_x_rescale's float64 frexp and scalbn, most of a multiplier-scale model's time between layers):
// saturate(multiply_rshift_round(q_h - zp_h, m, s) + zp_x), the reference's integers; a power-of-two pair has
// m = 1, where multiply_rshift_round is rshift_round, the reference's requantize. q_h - zp_h is int64 (two 16-bit
// codes), the product within 2^62 by the overflow proof (overflow_check: the same rescale and bound).
struct HToNextX {
  int32_t zp_h, zp_x, q_min, q_max;
  MultiplierRescale rescale;
  HToNextX(const QuantizedGru& model, int layer, int direction) {
    const TensorQuant& h = model.cell(layer, direction).q(GruTensor::h);
    const TensorQuant& next_x = model.cell(layer + 1, 0).q(GruTensor::x);  // shared by layer l+1's directions
    zp_h = h.zp;
    zp_x = next_x.zp;
    q_min = next_x.qmin();
    q_max = next_x.qmax();
    rescale = h_to_next_x_rescale(h, next_x);
  }
  int32_t operator()(int32_t q_h) const {
    return saturate(multiply_rshift_round(static_cast<int64_t>(q_h) - zp_h, rescale.multiplier, rescale.shift) + zp_x, q_min, q_max);
  }
};

using fast::CellRunArgs;
using fast::CellRunFn;
using fast::FloatOutput;
using fast::LineArray;
using fast::PackedCell;
using fast::PackedMatrix;
using fast::Parallel;

int pad16(int k) { return (k + 15) / 16 * 16; }

// The cell's time loop, chosen once per cell: its form (linear_before_reset) and its sums' types.
CellRunFn choose_cell_run(const GruCellQuantParams& p, const PackedCell& pc) {
  return p.linear_before_reset ? fast::linear_after_reset_run(pc.W.out_int32, pc.R.out_int32)
                               : fast::reset_before_linear_run(pc.W.out_int32, pc.R.out_int32);
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
      std::vector<HToNextX> to_next_x;
      for (int d = 0; d < D; ++d) to_next_x.emplace_back(model, l, d);
      for (size_t r = 0; r < rows; ++r) {
        for (int k = 0; k < C; ++k) {
          x16[r * Kx + k] = static_cast<int16_t>(to_next_x[static_cast<size_t>(k / H)](layer_output[r * C + k]));
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

std::unique_ptr<GruCellStepper> FastQuantGru::make_stepper(int N) const {
  if (!support_.supported) return nullptr;
  return fast::make_fast_stepper(model_, packed_->plan->cells, N);
}


}  // namespace qgru
