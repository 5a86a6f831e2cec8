#include "qgru/runtime/quant_executor.h"

#include <algorithm>
#include <memory>
#include <string>

#include "qgru/base/error.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/fixed/rounding.h"
#include "qgru/io/sequence_io.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru/runtime/stream_step.h"

namespace qgru {

namespace {

// acc[m·ldc + c] = Σ_k weight[c, k] * input[m, k] for m < rows, c < channels (ldc = channels when 0). Acc is
// the accumulator type the overflow proof chose (int32 for int8 operands, else int64): the proof bounds |Σ| by
// K * 2^(b_W-1) * max|q_in|, and every partial sum has fewer terms, so no partial sum overflows Acc either.
// The result is widened to int64 for the cell.
template <class Acc>
void integer_gemm(const int32_t* input, int rows, int K, const int32_t* weight, int channels, int64_t* acc, int ldc) {
  for (int m = 0; m < rows; ++m) {
    const int32_t* in = input + static_cast<size_t>(m) * K;
    for (int c = 0; c < channels; ++c) {
      const int32_t* w = weight + static_cast<size_t>(c) * K;
      Acc sum = 0;
      for (int k = 0; k < K; ++k) sum += static_cast<Acc>(w[k]) * static_cast<Acc>(in[k]);
      acc[static_cast<size_t>(m) * ldc + c] = sum;
    }
  }
}

void gemm(bool int32_acc, const int32_t* input, int rows, int K, const int32_t* weight, int channels, int64_t* acc,
          int ldc = 0) {
  if (ldc == 0) ldc = channels;
  if (int32_acc) {
    integer_gemm<int32_t>(input, rows, K, weight, channels, acc, ldc);
  } else {
    integer_gemm<int64_t>(input, rows, K, weight, channels, acc, ldc);
  }
}

// B-2 of one step for N rows: gemm_h [N, 3H] from the state codes q_h [N, H]. The linear_before_reset = 0 cell
// (docs/FIXED_POINT.md §3a) multiplies only R's z and r rows with h, computes C-2a of every unit
// (q_reset_hidden [N, H], in h's space) from this step's accumulators gemm_x [N, 3H], and takes the n channels
// from the second GEMM, R_n against q_reset_hidden: both GEMMs have operands in h's code range, so gemm_h_int32
// (proven for R h) holds for both.
void recurrent_gemms(const GruCellQuantParams& p, const GruCellParamsView& view, const int32_t* q_h, int N,
                     const int64_t* gemm_x, int64_t* gemm_h, int32_t* q_reset_hidden) {
  const int H = p.hidden_size;
  const int channels = 3 * H;
  if (p.linear_before_reset) {
    gemm(p.gemm_h_int32, q_h, N, H, p.q_R.data(), channels, gemm_h);
    return;
  }
  gemm(p.gemm_h_int32, q_h, N, H, p.q_R.data(), 2 * H, gemm_h, channels);  // z and r channels
  for (int n = 0; n < N; ++n) {
    const int64_t* gx = gemm_x + static_cast<size_t>(n) * channels;
    const int64_t* gh = gemm_h + static_cast<size_t>(n) * channels;
    for (int j = 0; j < H; ++j) {
      const size_t e = static_cast<size_t>(n) * H + j;
      q_reset_hidden[e] = gru_cell_reset_hidden(view, j, gx[H + j], gh[H + j], q_h[e]);
    }
  }
  // n channels: R_n (r ⊙ h), written at column 2H of each row
  gemm(p.gemm_h_int32, q_reset_hidden, N, H, p.q_R.data() + static_cast<size_t>(2 * H) * H, H, gemm_h + 2 * H, channels);
}

// Intermediate codes of one step, [N, 3H] for the linears and [N, H] for the rest (observer only).
struct StepBuffers {
  std::vector<int32_t> ih, hh, ugi, ugo, rgi, rgo, ngi, ngo;
  void resize(int N, int H) {
    const size_t nh = static_cast<size_t>(N) * H;
    ih.assign(3 * nh, 0);
    hh.assign(3 * nh, 0);
    for (auto* v : {&ugi, &ugo, &rgi, &rgo, &ngi, &ngo}) v->assign(nh, 0);
  }
};

// Run one cell over all T steps. q_x: [T, N, C] in the cell's x space. q_h: [N, H] initial codes in, final
// codes out. out: [T, N, out_stride], this direction's codes written at column offset out_offset.
void run_reference_cell(const GruCellQuantParams& p, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h,
                        int32_t* out, int out_stride, int out_offset, QuantGruObserver* observer,
                        const int32_t* lengths) {
  const int C = p.input_size;
  const int H = p.hidden_size;
  const int channels = 3 * H;
  const GruCellParamsView view = p.view();

  // B-1 for all steps at once.
  std::vector<int64_t> gemm_x(static_cast<size_t>(T) * N * channels);
  gemm(p.gemm_x_int32, q_x, T * N, C, p.q_W.data(), channels, gemm_x.data());

  std::vector<int64_t> gemm_h(static_cast<size_t>(N) * channels);
  std::vector<int32_t> q_h_new(static_cast<size_t>(N) * H);
  std::vector<int32_t> q_reset_hidden(p.linear_before_reset ? 0 : static_cast<size_t>(N) * H);  // C-2a, [N, H]
  StepBuffers buffers;
  if (observer) buffers.resize(N, H);
  for (int step = 0; step < T; ++step) {
    const int t = p.direction == 0 ? step : T - 1 - step;
    // B-2 for this step (and the linear_before_reset = 0 cell's r ⊙ h and second GEMM).
    recurrent_gemms(p, view, q_h.data(), N, gemm_x.data() + static_cast<size_t>(t) * N * channels, gemm_h.data(),
                    q_reset_hidden.data());
    for (int n = 0; n < N; ++n) {
      const int64_t* gx = gemm_x.data() + (static_cast<size_t>(t) * N + n) * channels;
      const int64_t* gh = gemm_h.data() + static_cast<size_t>(n) * channels;
      for (int j = 0; j < H; ++j) {
        GruCellAccumulators acc{{gx[j], gx[H + j], gx[2 * H + j]}, {gh[j], gh[H + j], gh[2 * H + j]}};
        const size_t e = static_cast<size_t>(n) * H + j;
        if (observer) {
          GruCellTrace trace{};
          q_h_new[e] = gru_cell_element(view, j, acc, q_h[e], &trace);
          for (int g = 0; g < 3; ++g) {
            buffers.ih[static_cast<size_t>(n) * channels + g * H + j] = trace.q_weight_ih_linear[g];
            buffers.hh[static_cast<size_t>(n) * channels + g * H + j] = trace.q_weight_hh_linear[g];
          }
          buffers.ugi[e] = trace.q_update_gate_input;
          buffers.ugo[e] = trace.q_update_gate_output;
          buffers.rgi[e] = trace.q_reset_gate_input;
          buffers.rgo[e] = trace.q_reset_gate_output;
          buffers.ngi[e] = trace.q_new_gate_input;
          buffers.ngo[e] = trace.q_new_gate_output;
        } else {
          q_h_new[e] = gru_cell_element(view, j, acc, q_h[e], nullptr);
        }
      }
      if (!row_is_valid(lengths, t, n)) {  // padding: the state stays
        std::copy_n(q_h.begin() + static_cast<std::ptrdiff_t>(n) * H, H, q_h_new.begin() + static_cast<std::ptrdiff_t>(n) * H);
      }
    }
    if (observer) {
      QuantStepView v;
      v.layer = p.layer;
      v.direction = p.direction;
      v.t = t;
      v.batch = N;
      v.input_size = C;
      v.hidden_size = H;
      v.params = &p;
      v.q_x = q_x + static_cast<size_t>(t) * N * C;
      v.q_h_prev = q_h.data();
      v.q_weight_ih_linear = buffers.ih.data();
      v.q_weight_hh_linear = buffers.hh.data();
      v.q_update_gate_input = buffers.ugi.data();
      v.q_update_gate_output = buffers.ugo.data();
      v.q_reset_gate_input = buffers.rgi.data();
      v.q_reset_gate_output = buffers.rgo.data();
      v.q_new_gate_input = buffers.ngi.data();
      v.q_new_gate_output = buffers.ngo.data();
      v.q_h_new = q_h_new.data();
      v.q_reset_hidden = p.linear_before_reset ? nullptr : q_reset_hidden.data();
      v.lengths = lengths;
      observer->on_step(v);
    }
    q_h.swap(q_h_new);
    for (int n = 0; n < N; ++n) {
      int32_t* dst = out + (static_cast<size_t>(t) * N + n) * out_stride + out_offset;
      const bool valid = row_is_valid(lengths, t, n);  // padding outputs zp_h, the code of 0.0
      for (int j = 0; j < H; ++j) dst[j] = valid ? q_h[static_cast<size_t>(n) * H + j] : view.h.zp;
    }
  }
}

// The reference cell: run_reference_cell above, for the shared layer loop (qgru/runtime/layer_loop.h).
class ReferenceCellRunner : public GruCellRunner {
 public:
  ReferenceCellRunner(const QuantizedGru& model, QuantGruObserver* observer) : model_(model), observer_(observer) {}
  void run_cell(int layer, int direction, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, int32_t* out,
                int out_stride, int out_offset) override {
    run_reference_cell(model_.cell(layer, direction), q_x, T, N, q_h, out, out_stride, out_offset, observer_, lengths);
  }

 private:
  const QuantizedGru& model_;
  QuantGruObserver* observer_;
};

// The streaming cell (qgru/runtime/stream_step.h): one time step of run_reference_cell (the same GEMMs and
// gru_cell_element) on buffers allocated once for a batch of N.
class ReferenceStepper : public GruCellStepper {
 public:
  ReferenceStepper(const QuantizedGru& model, int N) : model_(model), N_(N) {
    if (N < 0) throw Error("stepper: negative batch " + std::to_string(N));
    const size_t NH = static_cast<size_t>(N) * model.hidden_size;
    gemm_x_.resize(3 * NH);
    gemm_h_.resize(3 * NH);
    q_h_new_.resize(NH);
    q_reset_hidden_.resize(model.linear_before_reset() ? 0 : NH);
    for (const GruCellQuantParams& p : model.cells) views_.push_back(p.view());
  }
  int batch() const override { return N_; }
  void step_cell(int layer, const int32_t* q_x, int32_t* q_h) override {
    const GruCellQuantParams& p = model_.cell(layer, 0);
    const GruCellParamsView& view = views_[static_cast<size_t>(layer) * model_.num_directions];
    const int H = p.hidden_size;
    const int channels = 3 * H;
    gemm(p.gemm_x_int32, q_x, N_, p.input_size, p.q_W.data(), channels, gemm_x_.data());
    recurrent_gemms(p, view, q_h, N_, gemm_x_.data(), gemm_h_.data(), q_reset_hidden_.data());
    for (int n = 0; n < N_; ++n) {
      const int64_t* gx = gemm_x_.data() + static_cast<size_t>(n) * channels;
      const int64_t* gh = gemm_h_.data() + static_cast<size_t>(n) * channels;
      for (int j = 0; j < H; ++j) {
        const GruCellAccumulators acc{{gx[j], gx[H + j], gx[2 * H + j]}, {gh[j], gh[H + j], gh[2 * H + j]}};
        const size_t e = static_cast<size_t>(n) * H + j;
        q_h_new_[e] = gru_cell_element(view, j, acc, q_h[e], nullptr);
      }
    }
    std::copy(q_h_new_.begin(), q_h_new_.end(), q_h);
  }

 private:
  const QuantizedGru& model_;
  int N_;
  std::vector<GruCellParamsView> views_;  // one per cell
  std::vector<int64_t> gemm_x_, gemm_h_;  // [N, 3H]
  std::vector<int32_t> q_h_new_;          // [N, H]
  std::vector<int32_t> q_reset_hidden_;   // [N, H], the linear_before_reset = 0 cell's C-2a
};

}  // namespace

std::unique_ptr<GruCellStepper> make_reference_stepper(const QuantizedGru& model, int N) {
  return std::make_unique<ReferenceStepper>(model, N);
}

std::vector<int32_t> quantize_values(const TensorQuant& quant, const float* values, size_t count) {
  std::vector<int32_t> codes(count);
  for (size_t i = 0; i < count; ++i) codes[i] = quant.quantize(values[i]);
  return codes;
}

QuantGruResult run_quantized_gru_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                       const int32_t* q_h0, QuantGruObserver* observer, const int32_t* lengths) {
  ReferenceCellRunner runner(model, observer);
  return run_layer_loop(model, q_x, T, N, q_h0, runner, lengths);
}

std::vector<int32_t> quantize_initial_state(const QuantizedGru& model, const float* h0, int N) {
  if (!h0) return {};
  const size_t per_cell = static_cast<size_t>(N) * model.hidden_size;
  std::vector<int32_t> q_h0(model.cells.size() * per_cell);
  for (size_t c = 0; c < model.cells.size(); ++c) {
    const std::vector<int32_t> codes = quantize_values(model.cells[c].q(GruTensor::h), h0 + c * per_cell, per_cell);
    std::copy(codes.begin(), codes.end(), q_h0.begin() + static_cast<std::ptrdiff_t>(c * per_cell));
  }
  return q_h0;
}

void check_input_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N) {
  const TensorQuant& x0 = model.input_quant();
  const size_t x_count = static_cast<size_t>(T) * N * model.input_size;
  // One branch-free pass the compiler vectorizes; the offending index is looked up only when it fails.
  const int32_t qmin = x0.qmin(), qmax = x0.qmax();
  int outside = 0;
  for (size_t i = 0; i < x_count; ++i) outside |= static_cast<int>(q_x[i] < qmin) | static_cast<int>(q_x[i] > qmax);
  if (outside == 0) return;
  for (size_t i = 0; i < x_count; ++i) {
    if (q_x[i] < qmin || q_x[i] > qmax) {
      throw Error("input code " + std::to_string(q_x[i]) + " at flat index " + std::to_string(i) +
                  " is outside x's code range [" + std::to_string(x0.qmin()) + ", " + std::to_string(x0.qmax()) + "]");
    }
  }
}

std::vector<int32_t> initial_h_codes(const QuantizedGru& model, const int32_t* q_h0, int layer, int direction, int N) {
  const TensorQuant& hq = model.cell(layer, direction).q(GruTensor::h);
  const size_t count = static_cast<size_t>(N) * model.hidden_size;
  std::vector<int32_t> q_h(count, hq.zp);
  if (!q_h0) return q_h;
  const size_t h_offset = (static_cast<size_t>(layer) * model.num_directions + direction) * count;
  for (size_t i = 0; i < count; ++i) {
    q_h[i] = q_h0[h_offset + i];
    if (q_h[i] < hq.qmin() || q_h[i] > hq.qmax()) {
      throw Error("h0 code " + std::to_string(q_h[i]) + " of layer " + std::to_string(layer) + " direction " +
                  std::to_string(direction) + " is outside h's code range");
    }
  }
  return q_h;
}

int32_t requantize_h_to_next_x(const QuantizedGru& model, int layer, int direction, int32_t q_h) {
  const TensorQuant& h = model.cell(layer, direction).q(GruTensor::h);
  const TensorQuant& next_x = model.cell(layer + 1, 0).q(GruTensor::x);  // shared by layer l+1's directions
  // (q_h - zp_h) at S_h -> S_x: shift_h - shift_x; proven within 2^62 by the overflow check.
  if (h.power_of_two() && next_x.power_of_two()) {
    return requantize(static_cast<int64_t>(q_h) - h.zp, h.shift - next_x.shift, next_x.zp, next_x.qmin(), next_x.qmax());
  }
  // A real scale on either side: multiplier and shift of S_h / S_x (docs/FIXED_POINT.md §5; the proof bounds the
  // product |q_h - zp_h| · multiplier).
  const MultiplierRescale r = h_to_next_x_rescale(h, next_x);
  return saturate(multiply_rshift_round(static_cast<int64_t>(q_h) - h.zp, r.multiplier, r.shift) + next_x.zp, next_x.qmin(),
                  next_x.qmax());
}

void dequantize_result(const QuantizedGru& model, QuantGruResult& result) {
  const int L = model.num_layers;
  const int D = model.num_directions;
  const size_t H = static_cast<size_t>(model.hidden_size);
  result.output.resize(result.output_codes.size());
  for (size_t i = 0; i < result.output_codes.size(); ++i) {
    const int d = static_cast<int>((i / H) % static_cast<size_t>(D));
    result.output[i] = static_cast<float>(model.cell(L - 1, d).q(GruTensor::h).dequantize(result.output_codes[i]));
  }
  result.h_n.resize(result.h_n_codes.size());
  const size_t per_cell = result.h_n_codes.size() / model.cells.size();
  for (size_t c = 0; c < model.cells.size(); ++c) {
    const TensorQuant& h = model.cells[c].q(GruTensor::h);
    for (size_t i = 0; i < per_cell; ++i) {
      result.h_n[c * per_cell + i] = static_cast<float>(h.dequantize(result.h_n_codes[c * per_cell + i]));
    }
  }
}

// dequantize_result (quant_executor.h) with float arithmetic the compiler vectorizes: the reference computes
// float((q - zp) · 2^-shift) in double. Codes are at most 16 bits, so |q - zp| < 2^17 is exact in float, and
// for |shift| <= 100 both 2^-shift and the product are normal floats (2^-100 .. 2^117) held exactly: the
// double product is that same number and its conversion to float is exact. Other shifts: the reference.
bool float_dequantize_exact(const QuantizedGru& model) {
  for (const GruCellQuantParams& p : model.cells) {
    const int shift = p.q(GruTensor::h).shift;
    // A real scale is not exact in float: the reference's double arithmetic
    if (shift < -100 || shift > 100 || !p.q(GruTensor::h).power_of_two()) return false;
  }
  return true;
}

void dequantize_result_fast(const QuantizedGru& model, QuantGruResult& result, bool output_done) {
  if (!float_dequantize_exact(model)) return dequantize_result(model, result);
  const int L = model.num_layers;
  const int D = model.num_directions;
  const size_t H = static_cast<size_t>(model.hidden_size);
  result.output.resize(result.output_codes.size());
  const size_t rows = H == 0 || output_done ? 0 : result.output_codes.size() / (static_cast<size_t>(D) * H);
  for (int d = 0; d < D; ++d) {
    const TensorQuant& hq = model.cell(L - 1, d).q(GruTensor::h);
    const float scale = static_cast<float>(hq.scale());  // a power of two, exact in float
    const int32_t zp = hq.zp;
    for (size_t r = 0; r < rows; ++r) {
      const size_t base = (r * D + static_cast<size_t>(d)) * H;
      const int32_t* q = result.output_codes.data() + base;
      float* y = result.output.data() + base;
      for (size_t j = 0; j < H; ++j) y[j] = static_cast<float>(q[j] - zp) * scale;
    }
  }
  result.h_n.resize(result.h_n_codes.size());
  const size_t per_cell = result.h_n_codes.size() / model.cells.size();
  for (size_t c = 0; c < model.cells.size(); ++c) {
    const TensorQuant& hq = model.cells[c].q(GruTensor::h);
    const float scale = static_cast<float>(hq.scale());
    for (size_t i = 0; i < per_cell; ++i) {
      result.h_n[c * per_cell + i] = static_cast<float>(result.h_n_codes[c * per_cell + i] - hq.zp) * scale;
    }
  }
}

QuantGruResult run_quantized_gru(const QuantizedGru& model, const float* x, int T, int N, const float* h0,
                                 QuantGruObserver* observer, const int32_t* lengths) {
  if (model.cells.empty()) throw Error("run_quantized_gru: the model has no cells");
  const std::vector<int32_t> q_x =
      quantize_values(model.input_quant(), x, static_cast<size_t>(T) * N * model.input_size);
  const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0, N);
  return run_quantized_gru_codes(model, q_x.data(), T, N, q_h0.empty() ? nullptr : q_h0.data(), observer, lengths);
}

}  // namespace qgru
