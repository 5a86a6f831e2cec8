#pragma once
// The FloatGruObserver of calibration: for each step of each (layer, direction) it observes every tensor of
// kObservedGruTensors into a CalibrationStats. x is the cell's input; h is h_new of each step (the initial
// h0 is never observed). Padded steps of a batch with sequence lengths are not observed. A NaN or Inf is an
// error naming the data file, the tensor and (t, n, c).
#include <string>
#include <vector>

#include "qgru/calib/calibration_stats.h"
#include "qgru/model/float_gru.h"

namespace qgru {

class CalibrationObserver : public FloatGruObserver {
 public:
  explicit CalibrationObserver(CalibrationStats& stats) : stats_(stats) {}
  // The data file being run (named in errors).
  void set_source(std::string source) { source_ = std::move(source); }
  void on_step(const FloatStepView& step) override;

 private:
  CalibrationStats& stats_;
  std::string source_ = "calibration data";
  std::vector<float> gathered_;  // the valid rows of one tensor at a step with padded rows
};

}  // namespace qgru
