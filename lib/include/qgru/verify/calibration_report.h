#pragma once
// The calibration report (`qgru calibrate --html`): one self-contained HTML page (no script, no network, every
// plot an inline SVG written here) that shows, for every observed tensor of every layer and direction, the
// histogram of its values and the range each range method would pick, so that a user can see which method
// fits which tensor.
//
// Every method is scored the same way: its range maps to the power-of-two grid quantize derives
// (quant_from_range under the tensor's bits from the config), and the grid is scored on the histogram by
// grid_fit (qgru/calib/range_methods.h): the fraction of values that saturate and the expected squared error
// per value (Δ²/12 inside, the squared distance to the edge code when clipped), also given as
// SQNR = 10·log10(E[x²] / error). The best method of a tensor is the one with the smallest error.
//
// Elements (stable ids and classes, for tests and readers):
//   #summary                     table.summary: one tr.summary-row per tensor (data-tensor="l<l>-d<d>-<tensor>"),
//                                one td per method with the SQNR; td.best: the smallest error of the row,
//                                td.chosen: the method quantize would use with the config
//   section.tensor#tensor-l<l>-d<d>-<tensor>
//                                svg#plot-calib-l<l>-d<d>-<tensor>: the log-count histogram with one
//                                g.range-marker per method (data-name = the method): its range as a bar, its
//                                grid as a line with the codes as ticks; and table.methods with one
//                                tr.method-row per method carrying the figures at full precision in data-min,
//                                data-max, data-shift, data-zp, data-clipped-low, data-clipped-high (fractions)
//                                and data-mse
#include <string>
#include <vector>

#include "qgru/calib/calibration_stats.h"
#include "qgru/calib/range_methods.h"
#include "qgru/calib/range_selection.h"
#include "qgru/gru_tensors.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/base/tensor_quant.h"
#include "qgru/search/range_search.h"

namespace qgru {

struct MethodEvaluation {
  std::string method;  // canonical form, e.g. "percentile:99.99+pow2"
  RangeChoice choice;  // the method's range and how it was found
  TensorQuant grid;    // the grid quantize derives from the range under the tensor's spec
  GridFit fit;         // how that grid fits the histogram
  // 10·log10(fit.mean_square / fit.mse): +inf when the grid is exact on every value, -inf with no signal.
  double sqnr_db() const;
};

// The methods the report compares: minmax, ema, kl, percentile (99.99), mse, each plain then +pow2, followed
// by each method of `extra` that is not among them (parsed and written in canonical form; duplicates once).
// Throws qgru::Error for an unknown method in `extra`.
std::vector<std::string> report_methods(const std::vector<std::string>& extra);

// Every method of `methods` on one tensor: select_range with `spec`, the grid quant_from_range derives from
// the range, and grid_fit on the tensor's histogram (exact zeros counted when the statistics include them).
// The tensor must have been observed. Errors name the tensor and the method.
std::vector<MethodEvaluation> evaluate_range_methods(const CalibrationStats& stats, int layer, int direction,
                                                     GruTensor tensor, const TensorQuant& spec,
                                                     const std::vector<std::string>& methods);

// Positions of the evaluations with the smallest error (fit.mse); several when they tie exactly.
std::vector<size_t> best_methods(const std::vector<MethodEvaluation>& evaluations);

// The method `qgru quantize --config` uses for a tensor: the config's method for it, else the statistics'
// default method, unless override_method (quantize --range-method) is given; canonical form ("search" as it is).
std::string quantize_method(const CalibrationStats& stats, const BitwidthConfig& config, GruTensor tensor,
                            const std::string& override_method = "");

struct CalibrationReportOptions {
  std::string title = "qgru calibration report";
  std::vector<std::string> stats_sources;  // the statistics file(s), shown in the header
  std::string config_source = "int8";      // shown in the header
  const BitwidthConfig* config = nullptr;  // bits per tensor and quantize's method; null: the int8 preset
  std::string range_method;                // quantize --range-method: overrides the config's methods
  // A range search's result (quantize --range-method search --html): a "search" column with the ranges it
  // chose and section#range-search with the start methods' output SQNR, the history and the widenings.
  const RangeSearchResult* range_search = nullptr;
};

std::string calibration_report_html(const CalibrationStats& stats, const CalibrationReportOptions& options);

}  // namespace qgru
