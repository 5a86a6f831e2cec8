#pragma once
// The verify report as one self-contained HTML page for people: no script, no network, every plot an
// inline SVG written here.
//
// Sections (each element has a stable id/class so that tests and readers can find it):
//   #summary            table.metrics: the output and h_n rows
//   #output-sqnr        svg#plot-output-sqnr: SQNR of the output per time step
//   #cell-l<l>-d<d>     per layer/direction: table.metrics (one tr.tensor-row per compared tensor) and
//                       svg#plot-sqnr-l<l>-d<d>: SQNR per time step of every tensor
//   #activations        per cell and gate: svg#plot-act-l<l>-d<d>-<gate> (the integer activation over every
//                       input code against the true sigmoid/tanh) and svg#plot-acterr-l<l>-d<d>-<gate> (its
//                       error in output LSB), and table.activations with the exhaustive error figures
//   #histograms         (when calibration statistics are given) svg#plot-hist-l<l>-d<d>-<tensor>: the
//                       calibrated histogram with the chosen range and the power-of-two grid marked
#include <string>

#include "qgru/calib/calibration_stats.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/verify/gru_verify.h"

namespace qgru {

struct HtmlReportOptions {
  std::string title = "qgru verify report";
  std::string model_path, artifact_path, input_path;  // shown in the header
  const CalibrationStats* stats = nullptr;             // optional: the histograms section
};

std::string verify_report_html(const GruVerifyReport& report, const QuantizedGru& model,
                               const HtmlReportOptions& options);

// Written atomically.
void write_verify_report_html(const std::string& path, const GruVerifyReport& report, const QuantizedGru& model,
                              const HtmlReportOptions& options);

}  // namespace qgru
