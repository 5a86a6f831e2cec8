// The verify report as a self-contained HTML page (qgru/verify/html_report.h).
#include "qgru/verify/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "qgru/base/atomic_file.h"
#include "qgru/fixed/activation.h"
#include "qgru/runtime/activation_tables.h"
#include "qgru/version.h"
#include "qgru/quant/activation_generation.h"
#include "html_page.h"
#include "svg_plot.h"

namespace qgru {
namespace {

using svg::escape;
using svg::format_number;

// Background class of an SQNR cell: >= 30 dB good, >= 15 dB fair, else poor.
const char* sqnr_class(double sqnr) {
  if (std::isnan(sqnr)) return "poor";
  if (sqnr >= 30) return "good";
  if (sqnr >= 15) return "fair";
  return "poor";
}

std::string metric_cells(const ErrorMetrics& m) {
  std::ostringstream out;
  const double sqnr = m.sqnr_db();
  out << "<td class=\"num\">" << format_number(m.max_abs_error) << "</td><td class=\"num\">"
      << format_number(m.mean_abs_error()) << "</td><td class=\"num\">" << format_number(m.nmse())
      << "</td><td class=\"num " << sqnr_class(sqnr) << "\">" << format_number(sqnr) << "</td><td class=\"num\">"
      << format_number(m.cosine()) << "</td><td class=\"num\">" << m.count << "</td>";
  return out.str();
}

const char* kMetricHeader =
    "<th>max abs error</th><th>mean abs error</th><th>NMSE</th><th>SQNR (dB)</th><th>cosine</th><th>values</th>";

using html::cell_id;

std::string cell_title(const QuantizedGru& model, int layer, int direction) {
  return html::cell_title(layer, direction, model.num_directions);
}

std::vector<double> per_step_sqnr(const std::vector<ErrorMetrics>& steps) {
  std::vector<double> values;
  values.reserve(steps.size());
  for (const ErrorMetrics& m : steps) values.push_back(m.sqnr_db());
  return values;
}

std::vector<double> step_axis(size_t count) {
  std::vector<double> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<double>(i);
  return x;
}

// --- activations ------------------------------------------------------------------------------------------

struct ActivationPlotData {
  std::vector<double> x, y_int, y_true;
  // Error envelopes per bucket of input codes (min and max over the bucket, at its first input).
  std::vector<double> err_x, err_true_lo, err_true_hi, err_round_lo, err_round_hi;
  double max_abs_error = 0;      // in real output units, against the true function
  double max_lsb_vs_true = 0;    // in output LSB, against the true function
};

// Evaluate the artifact's activation over every input code; keep at most ~kMaxPoints points per curve.
// The error curves keep each bucket's smallest and largest error, so that no spike disappears.
ActivationPlotData sample_activation(const ActivationTables& tables) {
  constexpr int64_t kMaxPoints = 600;        // curve points
  constexpr int64_t kMaxErrorBuckets = 160;  // error envelope buckets (wide enough to read as a band)
  const ActivationView view = tables.view();
  const TensorQuant& in = tables.input;
  const TensorQuant& out = tables.output;
  const int64_t first = in.qmin(), last = in.qmax();
  const int64_t count = last - first + 1;
  const int64_t stride = std::max<int64_t>(1, (count + kMaxPoints - 1) / kMaxPoints);
  const int64_t bucket = std::max<int64_t>(1, (count + kMaxErrorBuckets - 1) / kMaxErrorBuckets);
  ActivationPlotData d;
  for (int64_t q = first; q <= last; ++q) {
    const int32_t code = static_cast<int32_t>(q);
    const int32_t q_out = evaluate_activation(view, code);
    const double x = in.dequantize(code);
    const double f = activation_reference(tables.function, x);
    const double err_true = static_cast<double>(q_out) - (out.to_steps(f) + out.zp);  // output LSB
    const double err_round = static_cast<double>(q_out - activation_reference_code(tables.function, in, out, code));
    d.max_lsb_vs_true = std::max(d.max_lsb_vs_true, std::fabs(err_true));
    d.max_abs_error = std::max(d.max_abs_error, std::fabs(out.dequantize(q_out) - f));
    if ((q - first) % stride == 0 || q == last) {  // a curve point
      d.x.push_back(x);
      d.y_int.push_back(out.dequantize(q_out));
      d.y_true.push_back(f);
    }
    if ((q - first) % bucket == 0) {  // a new error bucket
      d.err_x.push_back(x);
      d.err_true_lo.push_back(err_true);
      d.err_true_hi.push_back(err_true);
      d.err_round_lo.push_back(err_round);
      d.err_round_hi.push_back(err_round);
    }
    d.err_true_lo.back() = std::min(d.err_true_lo.back(), err_true);
    d.err_true_hi.back() = std::max(d.err_true_hi.back(), err_true);
    d.err_round_lo.back() = std::min(d.err_round_lo.back(), err_round);
    d.err_round_hi.back() = std::max(d.err_round_hi.back(), err_round);
  }
  return d;
}

std::string activations_section(const QuantizedGru& model) {
  std::ostringstream out;
  out << "<section id=\"activations\">\n<h2>Activations: the artifact's integer sigmoid/tanh against the true "
         "functions</h2>\n<p class=\"help\">Each gate's table or piecewise-linear approximation is evaluated by the "
         "integer evaluator over every input code of its gate input tensor (dequantized on the x axis) and compared "
         "with the true function. The error plot shows, in output LSB, the integer output minus the exact real-valued "
         "target (blue) and minus the correctly rounded code (orange; 0 for a table), as the band between the "
         "smallest and largest error of the input codes that share one plotted point.</p>\n";
  out << "<table class=\"activations\"><tr><th>layer / direction</th><th>gate</th><th>function</th><th>impl</th>"
         "<th>segments</th><th>input</th><th>output</th><th>max |error| vs rounded (LSB)</th>"
         "<th>mean |error| vs rounded (LSB)</th><th>max |error| vs true (LSB)</th><th>max |error| vs true</th></tr>\n";
  std::ostringstream plots;
  for (const GruCellQuantParams& p : model.cells) {
    for (int g = 0; g < 3; ++g) {
      const ActivationTables& tables = p.activation[static_cast<size_t>(g)];
      const std::string gate = gate_kind_name(static_cast<GateKind>(g));
      const ActivationError error = measure_activation_error(tables);
      const ActivationPlotData d = sample_activation(tables);
      const std::string function = activation_function_name(tables.function);
      out << "<tr class=\"activation-row\"><td>" << escape(cell_title(model, p.layer, p.direction)) << "</td><td>"
          << gate << "</td><td>" << function << "</td><td>" << activation_impl_name(tables.impl) << "</td><td class=\"num\">"
          << (tables.impl == ActivationImpl::Pwl ? std::to_string(tables.pwl_threshold.size()) : std::string("-"))
          << "</td><td>" << escape(describe_quant(tables.input)) << "</td><td>" << escape(describe_quant(tables.output))
          << "</td><td class=\"num\">" << error.max_lsb_error << "</td><td class=\"num\">"
          << format_number(error.mean_abs_lsb_error) << "</td><td class=\"num\">" << format_number(d.max_lsb_vs_true)
          << "</td><td class=\"num\">" << format_number(d.max_abs_error) << "</td></tr>\n";

      const std::string id = cell_id(p.layer, p.direction) + "-" + gate;
      svg::Chart curve;
      curve.id = "plot-act-" + id;
      curve.title = cell_title(model, p.layer, p.direction) + ": " + gate + " (" + function + ", " +
                    activation_impl_name(tables.impl) + ")";
      curve.note = "input " + describe_quant(tables.input) + ", output " + describe_quant(tables.output);
      curve.x_label = gate + " input (dequantized)";
      curve.y_label = function + "(x)";
      curve.width = 560;
      curve.series.push_back({"integer", svg::palette(0), d.x, d.y_int, svg::SeriesStyle::Line, false, 2.0, {}});
      curve.series.push_back({"true " + function, "#222222", d.x, d.y_true, svg::SeriesStyle::Line, true, 1.2, {}});
      plots << svg::render(curve);

      svg::Chart err;
      err.id = "plot-acterr-" + id;
      err.title = gate + " error (output LSB)";
      err.note = "max " + std::to_string(error.max_lsb_error) + " LSB vs correctly rounded, " +
                 format_number(d.max_lsb_vs_true) + " LSB vs the true function";
      err.x_label = gate + " input (dequantized)";
      err.y_label = "error (LSB)";
      err.width = 560;
      svg::Series vs_true{"vs true", svg::palette(0), d.err_x, d.err_true_hi, svg::SeriesStyle::Band, false, 0.8, {}};
      vs_true.y_low = d.err_true_lo;
      svg::Series vs_rounded{"vs rounded", svg::palette(1), d.err_x, d.err_round_hi, svg::SeriesStyle::Band, false, 0.8, {}};
      vs_rounded.y_low = d.err_round_lo;
      err.series.push_back(std::move(vs_true));
      err.series.push_back(std::move(vs_rounded));
      plots << svg::render(err);
    }
  }
  out << "</table>\n<div class=\"plots\">\n" << plots.str() << "</div>\n</section>\n";
  return out.str();
}

// --- histograms -------------------------------------------------------------------------------------------

std::string histogram_chart(const TensorStats& stats, const GruCellQuantParams& p, GruTensor tensor,
                            const std::string& id, const std::string& title) {
  const TensorQuant& q = p.q(tensor);
  const FloatRange& range = p.range[static_cast<size_t>(tensor)];
  const double grid_lo = q.dequantize(q.qmin()), grid_hi = q.dequantize(q.qmax());
  double lo = std::min({grid_lo, range.first, stats.count ? stats.min : 0.0});
  double hi = std::max({grid_hi, range.second, stats.count ? stats.max : 0.0});
  if (!(hi > lo)) hi = lo + 1;
  const double pad = (hi - lo) * 0.04;
  lo -= pad, hi += pad;
  constexpr int kBins = 120;
  const double width = (hi - lo) / kBins;
  std::vector<double> counts(kBins, 0.0), edges(kBins + 1);
  for (int i = 0; i <= kBins; ++i) edges[static_cast<size_t>(i)] = lo + width * i;
  auto add = [&](double value, double n) {
    const int bin = std::clamp(static_cast<int>(std::floor((value - lo) / width)), 0, kBins - 1);
    counts[static_cast<size_t>(bin)] += n;
  };
  const std::vector<uint64_t>& bins = stats.histogram.bins();
  const double fine = stats.histogram.bin_width();
  for (size_t k = 0; k < bins.size(); ++k) {
    if (bins[k]) add(stats.histogram.bin_lower(static_cast<int>(k)) + fine / 2, static_cast<double>(bins[k]));
  }
  if (stats.zero_count) add(0.0, static_cast<double>(stats.zero_count));

  svg::Chart chart;
  chart.id = id;
  chart.title = title;
  chart.note = describe_quant(q) + ", " + std::to_string(stats.count) + " values, observed [" +
               format_number(stats.min) + ", " + format_number(stats.max) + "]";
  chart.x_label = "value";
  chart.y_label = "count (log)";
  chart.log_y = true;
  chart.width = 560;
  chart.height = 250;
  chart.series.push_back({"", svg::palette(0), edges, counts, svg::SeriesStyle::Steps, false, 1.0, {}});
  chart.markers.push_back({range.first, "range min " + format_number(range.first), "#d62728", true});
  chart.markers.push_back({range.second, "range max " + format_number(range.second), "#d62728", true});
  chart.markers.push_back({grid_lo, "grid min " + format_number(grid_lo), "#2ca02c", false});
  chart.markers.push_back({grid_hi, "grid max " + format_number(grid_hi), "#2ca02c", false});
  // The grid: every code when there are few, else every 2^k-th code (at most ~128 marks).
  const html::GridMarks marks = html::grid_marks(q, 128);
  chart.rug = marks.values;
  chart.rug_label = "grid step 2^" + std::to_string(-q.shift) +
                    (marks.every > 1 ? ", one mark per " + std::to_string(marks.every) + " codes" : "");
  return svg::render(chart);
}

std::string histograms_section(const QuantizedGru& model, const CalibrationStats& stats) {
  std::ostringstream out;
  out << "<section id=\"histograms\">\n<h2>Calibration histograms</h2>\n<p class=\"help\">The float values seen "
         "during calibration (log counts), the range chosen from them (red, dashed) and the power-of-two grid of "
         "the tensor's codes (green: the representable range and, along the bottom, the code grid).</p>\n";
  for (const GruCellQuantParams& p : model.cells) {
    out << "<h3>" << escape(cell_title(model, p.layer, p.direction)) << "</h3>\n<div class=\"plots\">\n";
    for (GruTensor tensor : kObservedGruTensors) {
      const TensorStats& s = stats.at(p.layer, p.direction, tensor);
      out << histogram_chart(s, p, tensor, "plot-hist-" + cell_id(p.layer, p.direction) + "-" + gru_tensor_name(tensor),
                             gru_tensor_name(tensor));
    }
    out << "</div>\n";
  }
  out << "</section>\n";
  return out.str();
}

}  // namespace

std::string verify_report_html(const GruVerifyReport& report, const QuantizedGru& model,
                               const HtmlReportOptions& options) {
  std::ostringstream out;
  out << html::page_begin(options.title);
  out << "<p class=\"lead\">The float model and its fixed-point artifact on the same inputs. The integer run "
         "follows its own state (no teacher forcing), so the figures include the drift of h over time. "
         "SQNR = 10·log10(Σ float² / Σ (int − float)²); cells: green ≥ 30 dB, yellow ≥ 15 dB, red below.</p>\n";
  out << html::meta_list(
      {{"model", options.model_path},
       {"artifact", options.artifact_path},
       {"input", options.input_path},
       {"config", model.config.name},
       {"shape", "C = " + std::to_string(model.input_size) + ", H = " + std::to_string(model.hidden_size) + ", " +
                     std::to_string(model.num_layers) + " layer(s), " + std::to_string(model.num_directions) +
                     " direction(s)"},
       {"data", "T = " + std::to_string(report.T) + " steps, N = " + std::to_string(report.N) + " sequences"},
       {"qgru", QGRU_VERSION_STRING}});

  // Summary.
  out << "<section id=\"summary\">\n<h2>Summary</h2>\n<table class=\"metrics\"><tr><th>tensor</th>" << kMetricHeader
      << "</tr>\n";
  out << "<tr class=\"summary-row\" data-tensor=\"output\"><td>output</td>" << metric_cells(report.output) << "</tr>\n";
  out << "<tr class=\"summary-row\" data-tensor=\"h_n\"><td>h_n</td>" << metric_cells(report.h_n) << "</tr>\n";
  out << "</table>\n</section>\n";

  // Output SQNR over time.
  out << "<section id=\"output-sqnr\">\n<h2>Output SQNR over time steps</h2>\n";
  svg::Chart output_chart;
  output_chart.id = "plot-output-sqnr";
  output_chart.title = "output: SQNR per time step";
  output_chart.x_label = "time step t";
  output_chart.y_label = "SQNR (dB)";
  output_chart.width = 760;
  output_chart.integer_x = true;
  output_chart.series.push_back({"output", svg::palette(0), step_axis(report.output_per_step.size()),
                                 per_step_sqnr(report.output_per_step), svg::SeriesStyle::Line, false, 2.0, {}});
  out << svg::render(output_chart) << "</section>\n";

  // Per layer and direction.
  for (int l = 0; l < model.num_layers; ++l) {
    for (int d = 0; d < model.num_directions; ++d) {
      const std::string id = cell_id(l, d);
      out << "<section id=\"cell-" << id << "\" class=\"cell\">\n<h2>" << escape(cell_title(model, l, d)) << "</h2>\n";
      out << "<table class=\"metrics\"><tr><th>tensor</th><th>quantization</th>" << kMetricHeader << "</tr>\n";
      svg::Chart chart;
      chart.id = "plot-sqnr-" + id;
      chart.title = cell_title(model, l, d) + ": SQNR per time step";
      chart.x_label = "time step t (input index)";
      chart.y_label = "SQNR (dB)";
      chart.width = 760;
      chart.height = 300;
      chart.integer_x = true;
      chart.note = "steps where a tensor is exact (SQNR = inf, e.g. x of layer 0) are left out of its line";
      size_t series = 0;
      for (const TensorComparison& c : report.tensors) {
        if (c.layer != l || c.direction != d) continue;
        const std::string name = gru_tensor_name(c.tensor);
        out << "<tr class=\"tensor-row\" data-tensor=\"" << name << "\"><td>" << name << "</td><td>"
            << escape(describe_quant(model.cell(l, d).q(c.tensor))) << "</td>" << metric_cells(c.overall) << "</tr>\n";
        chart.series.push_back({name, svg::palette(series++), step_axis(c.per_step.size()), per_step_sqnr(c.per_step),
                                svg::SeriesStyle::Line, false, 1.5, {}});
      }
      out << "</table>\n" << svg::render(chart) << "</section>\n";
    }
  }

  out << activations_section(model);
  if (options.stats) out << histograms_section(model, *options.stats);
  out << html::page_end("The integer algorithm is described in docs/FIXED_POINT.md.");
  return out.str();
}

void write_verify_report_html(const std::string& path, const GruVerifyReport& report, const QuantizedGru& model,
                              const HtmlReportOptions& options) {
  write_file_atomic(path, verify_report_html(report, model, options));
}

}  // namespace qgru
