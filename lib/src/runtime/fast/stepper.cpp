// The fast path's streaming cell (FastQuantGru::make_stepper; qgru/runtime/stream_step.h).
#include "time_loop.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "fast_kernels.h"
#include "qgru/base/error.h"

namespace qgru::fast {

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

std::unique_ptr<GruCellStepper> make_fast_stepper(const QuantizedGru& model, const std::vector<PackedCell>& cells, int N) {
  return std::make_unique<FastStepper>(model, cells, N);
}

}  // namespace qgru::fast
