#pragma once
// Choosing the float range of one observed tensor from calibration statistics.
#include <string>

#include "qgru/calib/calibration_stats.h"
#include "qgru/gru_tensors.h"
#include "qgru/base/tensor_quant.h"

namespace qgru {

struct RangeChoice {
  double min = 0, max = 0;
  std::string method;  // the method used, resolved (e.g. "percentile:99.99+pow2")
  std::string detail;  // how the range was found (threshold, KL, pow2 candidates, ...)
};

// method: "" (the stats' default method), "minmax", "ema", "kl", "percentile" or "percentile:99.9", "mse",
// "bounds" ([0,1] for sigmoid outputs, [-1,1] for tanh output and h; other tensors fall back to minmax),
// optionally with a "+pow2" suffix for the power-of-two aware choice (pow2_choice.h). spec gives bits,
// is_unsigned and symmetric of the tensor (its shift/zp are ignored). Unknown methods and tensors that were
// never observed are refused with a one-line qgru::Error.
RangeChoice select_range(const CalibrationStats& stats, int layer, int direction, GruTensor tensor,
                         const std::string& method, const TensorQuant& spec);

// select_range, then the quantization of the chosen range under spec's bit width (quant_from_range), as
// quantize will make it. A method that fails or a range no shift can represent (values of 1e30) is a qgru::Error
// that names `source` (the statistics' file, or the data they come from), the tensor and the observed range.
struct RangeQuantChoice {
  RangeChoice range;
  RangeQuantResult quant;
};
RangeQuantChoice select_range_quant(const CalibrationStats& stats, int layer, int direction, GruTensor tensor,
                                    const std::string& method, const TensorQuant& spec, const std::string& source);

// The x range of layer `layer` as quantize makes it: x is one space shared by the layer's directions (their
// artifact x parameters are equal, docs/FIXED_POINT.md §5), so the range is the union of the ranges `method` gives
// for each direction's x (qgru::quantize_gru takes the same union of its range provider's answers), and its
// quantization. With one direction it is select_range_quant. `range.method` names the method; `range.detail` the
// directions' ranges.
RangeQuantChoice select_layer_x_range_quant(const CalibrationStats& stats, int layer, const std::string& method,
                                           const TensorQuant& spec, const std::string& source);

// Parsed method: name in {minmax, ema, kl, percentile, mse, bounds}.
struct RangeMethod {
  std::string name;
  double percentile = 99.99;
  bool pow2 = false;
  std::string text() const;  // canonical form, e.g. "percentile:99.9+pow2"
};
RangeMethod parse_range_method(const std::string& method);  // throws qgru::Error on an unknown method

}  // namespace qgru
