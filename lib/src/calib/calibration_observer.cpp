#include "qgru/calib/calibration_observer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qgru/base/error.h"

namespace qgru {

namespace {

struct ObservedValues {
  const float* values;
  int width;  // values per batch row
};

ObservedValues view_of(const FloatStepView& step, GruTensor tensor) {
  const int H = step.hidden_size;
  switch (tensor) {
    case GruTensor::x: return {step.x, step.input_size};
    case GruTensor::h: return {step.h_new, H};
    case GruTensor::weight_ih_linear: return {step.weight_ih_linear, 3 * H};
    case GruTensor::weight_hh_linear: return {step.weight_hh_linear, 3 * H};
    case GruTensor::update_gate_input: return {step.update_gate_input, H};
    case GruTensor::update_gate_output: return {step.update_gate_output, H};
    case GruTensor::reset_gate_input: return {step.reset_gate_input, H};
    case GruTensor::reset_gate_output: return {step.reset_gate_output, H};
    case GruTensor::new_gate_input: return {step.new_gate_input, H};
    case GruTensor::new_gate_output: return {step.new_gate_output, H};
    default: break;
  }
  throw Error(std::string("internal: tensor ") + gru_tensor_name(tensor) + " is not observed");
}

}  // namespace

void CalibrationObserver::on_step(const FloatStepView& step) {
  // Padded rows (t past the row's length) are not observed: only the valid rows, gathered, or nothing at a
  // step where every row is padding (the EMA then skips the step).
  std::vector<int> valid_rows;
  for (int n = 0; n < step.batch; ++n) {
    if (row_is_valid(step.lengths, step.t, n)) valid_rows.push_back(n);
  }
  if (valid_rows.empty()) return;
  for (GruTensor tensor : kObservedGruTensors) {
    ObservedValues view = view_of(step, tensor);
    if (view.values != nullptr && valid_rows.size() < static_cast<size_t>(step.batch)) {
      gathered_.resize(valid_rows.size() * static_cast<size_t>(view.width));
      for (size_t r = 0; r < valid_rows.size(); ++r) {
        std::copy_n(view.values + static_cast<size_t>(valid_rows[r]) * view.width, view.width,
                    gathered_.begin() + static_cast<std::ptrdiff_t>(r * static_cast<size_t>(view.width)));
      }
      view.values = gathered_.data();
    }
    if (view.values == nullptr) {
      throw Error(std::string("internal: the float GRU step view has no ") + gru_tensor_name(tensor));
    }
    const int64_t size = static_cast<int64_t>(valid_rows.size()) * view.width;
    for (int64_t i = 0; i < size; ++i) {
      if (!std::isfinite(view.values[i])) {
        const int64_t n = valid_rows[static_cast<size_t>(i / view.width)];
        const int64_t c = i % view.width;
        throw Error(source_ + ": non-finite value " + std::to_string(view.values[i]) + " in " +
                    gru_tensor_name(tensor) + " of layer " + std::to_string(step.layer) + " direction " +
                    std::to_string(step.direction) + " at (t=" + std::to_string(step.t) + ", n=" +
                    std::to_string(n) + ", c=" + std::to_string(c) + ")" +
                    (tensor == GruTensor::x && step.layer == 0 ? " of the input data" : ""));
      }
    }
    stats_.at(step.layer, step.direction, tensor).observe_step(view.values, size);
  }
}

}  // namespace qgru
