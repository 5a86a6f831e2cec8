// Golden vectors (format in qgru/verify/golden_vectors.h): the CPU integer executor run with an observer
// that records every intermediate code, plus the GEMM accumulators recomputed from the codes and weights.
#include "qgru/verify/golden_vectors.h"

#include <algorithm>
#include <limits>

#include "qgru/base/error.h"
#include "qgru/base/sha256.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/fixed/rounding.h"
#include "qgru/io/safetensors.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/version.h"

namespace qgru {
namespace {

// Every recorded quantity of one cell, time-indexed by the input's t.
struct CellRecord {
  int C = 0, H = 0;
  std::vector<int32_t> q_x, q_h_prev, ih, hh, ugi, ugo, rgi, rgo, ngi, ngo, aligned, h_new;  // codes
  std::vector<int32_t> reset_hidden;  // the linear_before_reset = 0 cell only (C-2a)
  std::vector<int64_t> gemm_x, gemm_x_corrected, gemm_h, gemm_h_corrected;                // accumulators
  std::vector<int64_t> bw_in_gemm, br_in_gemm;                                              // [3H]
  bool seen = false;
};

class GoldenRecorder : public QuantGruObserver {
 public:
  GoldenRecorder(const QuantizedGru& model, int T, int N) : model_(model), N_(N) {
    cells_.resize(model.cells.size());
    for (size_t i = 0; i < model.cells.size(); ++i) {
      const GruCellQuantParams& p = model.cells[i];
      CellRecord& r = cells_[i];
      r.C = p.input_size;
      r.H = p.hidden_size;
      const size_t steps = static_cast<size_t>(T) * static_cast<size_t>(N);
      const size_t h = static_cast<size_t>(p.hidden_size);
      r.q_x.assign(steps * static_cast<size_t>(p.input_size), 0);
      for (auto* v : {&r.q_h_prev, &r.ugi, &r.ugo, &r.rgi, &r.rgo, &r.ngi, &r.ngo, &r.aligned, &r.h_new}) {
        v->assign(steps * h, 0);
      }
      if (!p.linear_before_reset) r.reset_hidden.assign(steps * h, 0);
      r.ih.assign(steps * 3 * h, 0);
      r.hh.assign(steps * 3 * h, 0);
      for (auto* v : {&r.gemm_x, &r.gemm_x_corrected, &r.gemm_h, &r.gemm_h_corrected}) v->assign(steps * 3 * h, 0);
      r.bw_in_gemm.resize(3 * h);
      r.br_in_gemm.resize(3 * h);
      const GruCellParamsView cell_view = p.view();
      for (size_t c = 0; c < 3 * h; ++c) {
        // B-1 / B-2 step 2: the bias moved into the GEMM space S_W[c]*S_x (S_R[c]*S_h), with the cell's own functions.
        r.bw_in_gemm[c] = bias_in_gemm_x(cell_view, static_cast<int32_t>(c));
        r.br_in_gemm[c] = bias_in_gemm_h(cell_view, static_cast<int32_t>(c));
      }
    }
  }

  void on_step(const QuantStepView& step) override {
    const size_t cell = static_cast<size_t>(step.layer * model_.num_directions + step.direction);
    const GruCellQuantParams& p = *step.params;
    CellRecord& r = cells_.at(cell);
    r.seen = true;
    const int C = step.input_size;
    const int H = step.hidden_size;
    const int channels = 3 * H;
    const GruCellParamsView view = p.view();
    const int32_t zp_x = p.q(GruTensor::x).zp;
    const int32_t zp_h = p.q(GruTensor::h).zp;
    for (int n = 0; n < step.batch; ++n) {
      const size_t row = static_cast<size_t>(step.t) * static_cast<size_t>(N_) + static_cast<size_t>(n);
      const int32_t* x = step.q_x + static_cast<size_t>(n) * C;
      const int32_t* h = step.q_h_prev + static_cast<size_t>(n) * H;
      // The linear_before_reset = 0 cell's n channels multiply R_n with r ⊙ h (C-2a), recorded below.
      const int32_t* rh = p.linear_before_reset ? nullptr : step.q_reset_hidden + static_cast<size_t>(n) * H;
      if (rh != nullptr) std::copy(rh, rh + H, r.reset_hidden.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(H)));
      std::copy(x, x + C, r.q_x.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(C)));
      std::copy(h, h + H, r.q_h_prev.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(H)));
      for (int c = 0; c < channels; ++c) {
        // The raw GEMM accumulators, in int64 (exact: the overflow proof bounds them far below 2^63).
        int64_t gx = 0;
        for (int k = 0; k < C; ++k) gx += static_cast<int64_t>(p.q_W[static_cast<size_t>(c) * C + k]) * x[k];
        int64_t gh = 0;
        const int32_t* operand = rh != nullptr && c >= 2 * H ? rh : h;
        for (int k = 0; k < H; ++k) gh += static_cast<int64_t>(p.q_R[static_cast<size_t>(c) * H + k]) * operand[k];
        const size_t e3 = row * static_cast<size_t>(channels) + static_cast<size_t>(c);
        r.gemm_x[e3] = gx;
        r.gemm_x_corrected[e3] = gx - p.W_sum[static_cast<size_t>(c)] * zp_x;  // S_W[c]*S_x
        r.gemm_h[e3] = gh;
        r.gemm_h_corrected[e3] = gh - p.R_sum[static_cast<size_t>(c)] * zp_h;  // S_R[c]*S_h
        const int32_t ih = step.q_weight_ih_linear[static_cast<size_t>(n) * channels + c];
        const int32_t hh = step.q_weight_hh_linear[static_cast<size_t>(n) * channels + c];
        // The recomputed accumulators must give the executor's linears; anything else is a bug here or there.
        if (compute_weight_ih_linear(view, c, gx) != ih || compute_weight_hh_linear(view, c, gh) != hh) {
          throw Error("internal: golden vectors: the GEMM recomputed for layer " + std::to_string(step.layer) +
                      " direction " + std::to_string(step.direction) + " t " + std::to_string(step.t) + " n " +
                      std::to_string(n) + " channel " + std::to_string(c) +
                      " does not give the executor's weight_ih_linear / weight_hh_linear");
        }
        r.ih[e3] = ih;
        r.hh[e3] = hh;
      }
      for (int j = 0; j < H; ++j) {
        const size_t src = static_cast<size_t>(n) * H + static_cast<size_t>(j);
        const size_t e = row * static_cast<size_t>(H) + static_cast<size_t>(j);
        r.ugi[e] = step.q_update_gate_input[src];
        r.ugo[e] = step.q_update_gate_output[src];
        r.rgi[e] = step.q_reset_gate_input[src];
        r.rgo[e] = step.q_reset_gate_output[src];
        r.ngi[e] = step.q_new_gate_input[src];
        r.ngo[e] = step.q_new_gate_output[src];
        r.h_new[e] = step.q_h_new[src];
        // C-4 step 1, with the cell's own function (the executor does not expose it).
        const int64_t n_diff = static_cast<int64_t>(step.q_new_gate_output[src]) - view.zp_new_gate_output;
        const int64_t aligned = rescale(view, n_diff, view.multiplier_new_gate_output_to_h, view.shift_new_gate_output_to_h) + view.h.zp;
        if (aligned < std::numeric_limits<int32_t>::min() || aligned > std::numeric_limits<int32_t>::max()) {
          throw Error("internal: golden vectors: q_new_gate_aligned_to_h does not fit int32 (layer " +
                      std::to_string(step.layer) + " direction " + std::to_string(step.direction) + ")");
        }
        r.aligned[e] = static_cast<int32_t>(aligned);
      }
    }
  }

  const std::vector<CellRecord>& cells() const { return cells_; }

 private:
  const QuantizedGru& model_;
  int N_;  // sequences per step: the row of (t, n) in a step-major table
  std::vector<CellRecord> cells_;
};

// I32 when every value fits, else I64.
Tensor accumulator_tensor(const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  const bool fits = std::all_of(values.begin(), values.end(), [](int64_t v) {
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  });
  if (!fits) return Tensor::from_vector(std::move(shape), values);
  std::vector<int32_t> narrowed(values.size());
  for (size_t i = 0; i < values.size(); ++i) narrowed[i] = static_cast<int32_t>(values[i]);
  return Tensor::from_vector(std::move(shape), narrowed);
}

}  // namespace

GoldenVectors make_golden_vectors(const QuantizedGru& model, const int32_t* q_x, int T, int N, const int32_t* q_h0,
                                  const GoldenVectorsOptions& options) {
  if (T < 1 || N < 1) {
    throw Error("golden vectors need at least one step and one sequence, got T = " + std::to_string(T) +
                ", N = " + std::to_string(N));
  }
  const int L = model.num_layers;
  const int D = model.num_directions;
  const int H = model.hidden_size;
  const int C = model.input_size;
  const size_t cells = static_cast<size_t>(L) * static_cast<size_t>(D);
  std::vector<int32_t> h0(cells * static_cast<size_t>(N) * static_cast<size_t>(H));
  for (size_t cell = 0; cell < cells; ++cell) {
    const int32_t zp_h = model.cells.at(cell).q(GruTensor::h).zp;
    for (size_t i = 0; i < static_cast<size_t>(N) * static_cast<size_t>(H); ++i) {
      const size_t at = cell * static_cast<size_t>(N) * static_cast<size_t>(H) + i;
      h0[at] = q_h0 ? q_h0[at] : zp_h;
    }
  }

  GoldenRecorder recorder(model, T, N);
  const QuantGruResult result = run_quantized_gru_codes(model, q_x, T, N, h0.data(), &recorder);

  GoldenVectors golden;
  const int64_t T64 = T, N64 = N, H64 = H;
  golden.tensors["input.q_x"] =
      Tensor::from_vector({T64, N64, C}, std::vector<int32_t>(q_x, q_x + static_cast<size_t>(T64 * N64 * C)));
  golden.tensors["input.q_h0"] = Tensor::from_vector({static_cast<int64_t>(cells), N64, H64}, h0);
  golden.tensors["output.q_y"] = Tensor::from_vector({T64, N64, D * H64}, result.output_codes);
  golden.tensors["output.q_h_n"] = Tensor::from_vector({static_cast<int64_t>(cells), N64, H64}, result.h_n_codes);
  for (int l = 0; l < L; ++l) {
    for (int d = 0; d < D; ++d) {
      const CellRecord& r = recorder.cells().at(static_cast<size_t>(l * D + d));
      if (!r.seen) throw Error("internal: golden vectors: the executor reported no step of layer " + std::to_string(l));
      const std::string prefix = "l" + std::to_string(l) + ".d" + std::to_string(d) + ".";
      const std::vector<int64_t> shape_x{T64, N64, r.C}, shape_h{T64, N64, H64}, shape_3h{T64, N64, 3 * H64};
      auto& t = golden.tensors;
      t[prefix + "q_x"] = Tensor::from_vector(shape_x, r.q_x);
      t[prefix + "gemm_x"] = accumulator_tensor(r.gemm_x, shape_3h);
      t[prefix + "gemm_x_corrected"] = accumulator_tensor(r.gemm_x_corrected, shape_3h);
      t[prefix + "q_bw_in_gemm_x"] = accumulator_tensor(r.bw_in_gemm, {3 * H64});
      t[prefix + "q_weight_ih_linear"] = Tensor::from_vector(shape_3h, r.ih);
      t[prefix + "q_h_prev"] = Tensor::from_vector(shape_h, r.q_h_prev);
      t[prefix + "gemm_h"] = accumulator_tensor(r.gemm_h, shape_3h);
      t[prefix + "gemm_h_corrected"] = accumulator_tensor(r.gemm_h_corrected, shape_3h);
      t[prefix + "q_br_in_gemm_h"] = accumulator_tensor(r.br_in_gemm, {3 * H64});
      t[prefix + "q_weight_hh_linear"] = Tensor::from_vector(shape_3h, r.hh);
      t[prefix + "q_update_gate_input"] = Tensor::from_vector(shape_h, r.ugi);
      t[prefix + "q_update_gate_output"] = Tensor::from_vector(shape_h, r.ugo);
      t[prefix + "q_reset_gate_input"] = Tensor::from_vector(shape_h, r.rgi);
      t[prefix + "q_reset_gate_output"] = Tensor::from_vector(shape_h, r.rgo);
      t[prefix + "q_new_gate_input"] = Tensor::from_vector(shape_h, r.ngi);
      t[prefix + "q_new_gate_output"] = Tensor::from_vector(shape_h, r.ngo);
      t[prefix + "q_new_gate_aligned_to_h"] = Tensor::from_vector(shape_h, r.aligned);
      t[prefix + "q_h_new"] = Tensor::from_vector(shape_h, r.h_new);
      if (!r.reset_hidden.empty()) t[prefix + "q_reset_hidden"] = Tensor::from_vector(shape_h, r.reset_hidden);
    }
  }

  auto& m = golden.metadata;
  m["format"] = kGoldenVectorsFormat;
  m["version"] = std::to_string(kGoldenVectorsVersion);
  m["tool_version"] = QGRU_VERSION_STRING;
  m["artifact_sha256"] = options.artifact_sha256;
  m["artifact_tensor_file_sha256"] = options.artifact_tensor_file_sha256;
  m["T"] = std::to_string(T);
  m["N"] = std::to_string(N);
  m["num_layers"] = std::to_string(L);
  m["num_directions"] = std::to_string(D);
  m["input_size"] = std::to_string(C);
  m["hidden_size"] = std::to_string(H);
  m["time_index"] = "input";
  m["documentation"] = "docs/FIXED_POINT.md";
  return golden;
}

namespace {

SafetensorsFile golden_file(const QuantizedGru& model, const int32_t* q_x, int T, int N, const int32_t* q_h0,
                            const GoldenVectorsOptions& options) {
  GoldenVectors golden = make_golden_vectors(model, q_x, T, N, q_h0, options);
  SafetensorsFile file;
  file.tensors = std::move(golden.tensors);
  file.metadata = std::move(golden.metadata);
  return file;
}

}  // namespace

std::vector<uint8_t> serialize_golden_vectors(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                              const int32_t* q_h0, const GoldenVectorsOptions& options) {
  return serialize_safetensors(golden_file(model, q_x, T, N, q_h0, options));
}

void write_golden_vectors(const std::string& path, const QuantizedGru& model, const int32_t* q_x, int T, int N,
                          const int32_t* q_h0, const GoldenVectorsOptions& options) {
  write_safetensors(path, golden_file(model, q_x, T, N, q_h0, options));
}

void write_golden_vectors_from_floats(const std::string& path, const QuantizedGru& model, const float* x, int T,
                                      int N, const float* h0, int first_sequences,
                                      const GoldenVectorsOptions& options) {
  if (model.cells.empty()) throw Error("golden vectors: the model has no cells");
  const int keep = first_sequences > 0 ? std::min(first_sequences, N) : N;
  const size_t C = static_cast<size_t>(model.input_size);
  const size_t H = static_cast<size_t>(model.hidden_size);
  // x [T, N, C] -> [T, keep, C], quantized into layer 0's x space.
  std::vector<int32_t> q_x(static_cast<size_t>(T) * static_cast<size_t>(keep) * C);
  for (int t = 0; t < T; ++t) {
    const float* src = x + static_cast<size_t>(t) * static_cast<size_t>(N) * C;
    const std::vector<int32_t> codes = quantize_values(model.input_quant(), src, static_cast<size_t>(keep) * C);
    std::copy(codes.begin(), codes.end(),
              q_x.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * static_cast<size_t>(keep) * C));
  }
  std::vector<int32_t> q_h0;
  if (h0) {
    q_h0.resize(model.cells.size() * static_cast<size_t>(keep) * H);
    for (size_t cell = 0; cell < model.cells.size(); ++cell) {
      const float* src = h0 + cell * static_cast<size_t>(N) * H;
      const std::vector<int32_t> codes =
          quantize_values(model.cells[cell].q(GruTensor::h), src, static_cast<size_t>(keep) * H);
      std::copy(codes.begin(), codes.end(),
                q_h0.begin() + static_cast<std::ptrdiff_t>(cell * static_cast<size_t>(keep) * H));
    }
  }
  write_golden_vectors(path, model, q_x.data(), T, keep, h0 ? q_h0.data() : nullptr, options);
}

GoldenVectorsOptions golden_options_for_artifact(const std::string& artifact_json_path) {
  GoldenVectorsOptions options;
  options.artifact_sha256 = sha256_file_hex(artifact_json_path);
  options.artifact_tensor_file_sha256 = sha256_file_hex(recorded_artifact_tensor_path(artifact_json_path));
  return options;
}

}  // namespace qgru
