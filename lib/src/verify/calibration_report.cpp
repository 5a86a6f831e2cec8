// The calibration report as a self-contained HTML page (qgru/verify/calibration_report.h).
#include "qgru/verify/calibration_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "html_page.h"
#include "qgru/base/error.h"
#include "qgru/version.h"
#include "qgru/quant/bitwidth_presets.h"
#include "svg_plot.h"

namespace qgru {
namespace {

using svg::escape;
using svg::format_number;

constexpr const char* kBaseMethods[] = {"minmax", "ema", "kl", "percentile", "mse"};
constexpr int kPlotBins = 200;     // histogram bars per plot (the statistics hold 2^17 fine bins)
constexpr int64_t kGridMarks = 64;  // grid ticks per range row

const char* kExtraStyle = R"(
td.best { background: #e3f4e1; font-weight: bold; }
td.chosen, tr.chosen td.method { box-shadow: inset 0 0 0 2px #8c2d04; }
tr.best td { background: #eef8ec; }
td.method { font-family: "DejaVu Sans Mono", monospace; white-space: nowrap; }
table.summary td:nth-child(-n+2) { white-space: nowrap; }
span.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; vertical-align: middle; }
section.tensor { margin-bottom: 18px; }
)";

// Full precision for data-* attributes (round-trips a double).
std::string exact(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

std::string percent(double fraction) { return fraction == 0 ? "0" : format_number(100.0 * fraction) + "%"; }

std::string decibels(double db) {
  if (std::isinf(db)) return db > 0 ? "exact" : "-inf";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", db);
  return buffer;
}

std::string spec_text(const TensorQuant& spec) {
  return std::string(spec.is_unsigned ? "u" : "i") + std::to_string(spec.bits) + (spec.symmetric ? " sym" : " asym");
}

std::string tensor_id(int layer, int direction, GruTensor tensor) {
  return html::cell_id(layer, direction) + "-" + gru_tensor_name(tensor);
}

// One colour per base method (minmax, ema, kl, percentile, mse, then others); +pow2 shares its base's.
std::string method_color(const std::string& method) {
  if (is_range_search_method(method)) return svg::palette(6);
  const std::string base = parse_range_method(method).name;
  for (size_t i = 0; i < std::size(kBaseMethods); ++i) {
    if (base == kBaseMethods[i]) return svg::palette(i);
  }
  return svg::palette(5);
}

bool contains(const std::vector<size_t>& positions, size_t i) {
  return std::find(positions.begin(), positions.end(), i) != positions.end();
}

struct TensorView {
  int layer, direction;
  GruTensor tensor;
  const TensorStats* stats;
  TensorQuant spec;
  std::string chosen;  // quantize's method
  std::vector<MethodEvaluation> evaluations;
  std::vector<size_t> best;
};

std::string histogram_svg(const TensorView& v, const std::string& title) {
  const TensorStats& s = *v.stats;
  double lo = s.min, hi = s.max;
  for (const MethodEvaluation& e : v.evaluations) {
    lo = std::min({lo, e.choice.min, e.grid.dequantize(e.grid.qmin())});
    hi = std::max({hi, e.choice.max, e.grid.dequantize(e.grid.qmax())});
  }
  if (!(hi > lo)) lo -= 0.5, hi += 0.5;
  const double pad = (hi - lo) * 0.03;
  lo -= pad, hi += pad;
  // Every observed value, exact zeros included (they are drawn whether or not methods count them).
  const std::vector<double> counts = histogram_view(s, lo, hi, kPlotBins, false, true);
  std::vector<double> edges(counts.size() + 1);
  for (size_t i = 0; i < edges.size(); ++i) edges[i] = lo + (hi - lo) * static_cast<double>(i) / kPlotBins;

  svg::Chart chart;
  chart.id = "plot-calib-" + tensor_id(v.layer, v.direction, v.tensor);
  chart.title = title;
  chart.note = spec_text(v.spec) + ". Bars: each method's range; line + ticks: its grid (s = shift); "
               "* smallest error; bold: quantize's method";
  chart.x_label = "value";
  chart.y_label = "count (log)";
  chart.log_y = true;
  chart.width = 880;
  chart.height = 240;
  chart.series.push_back({"", "#7f7f7f", edges, counts, svg::SeriesStyle::Steps, false, 1.0, {}});
  for (size_t i = 0; i < v.evaluations.size(); ++i) {
    const MethodEvaluation& e = v.evaluations[i];
    svg::RangeRow row;
    row.name = e.method;
    row.label = e.method + " s=" + std::to_string(e.grid.shift) + (contains(v.best, i) ? " *" : "");
    row.lo = e.choice.min;
    row.hi = e.choice.max;
    row.grid_lo = e.grid.dequantize(e.grid.qmin());
    row.grid_hi = e.grid.dequantize(e.grid.qmax());
    row.ticks = html::grid_marks(e.grid, kGridMarks).values;
    row.color = method_color(e.method);
    row.emphasis = e.method == v.chosen;
    if (row.emphasis) {
      const std::string label = "quantize (" + e.method + "): " + format_number(e.choice.min);
      chart.markers.push_back({e.choice.min, label, "#8c2d04", true});
      chart.markers.push_back({e.choice.max, format_number(e.choice.max), "#8c2d04", true});
    }
    chart.range_rows.push_back(std::move(row));
  }
  return svg::render(chart);
}

std::string methods_table(const TensorView& v) {
  std::ostringstream out;
  out << "<table class=\"methods\"><tr><th>method</th><th>range min</th><th>range max</th><th>shift</th><th>zp</th>"
         "<th>grid (representable)</th><th>clipped below</th><th>clipped above</th><th>error (MSE per value)</th>"
         "<th>SQNR (dB)</th><th></th></tr>\n";
  for (size_t i = 0; i < v.evaluations.size(); ++i) {
    const MethodEvaluation& e = v.evaluations[i];
    const bool best = contains(v.best, i), chosen = e.method == v.chosen;
    const double total = std::max(e.fit.total, 1.0);
    std::string note;
    if (best) note = "smallest error";
    if (chosen) note += std::string(note.empty() ? "" : "; ") + "quantize's method";
    out << "<tr class=\"method-row" << (best ? " best" : "") << (chosen ? " chosen" : "") << "\" data-method=\""
        << escape(e.method) << "\" data-min=\"" << exact(e.choice.min) << "\" data-max=\"" << exact(e.choice.max)
        << "\" data-shift=\"" << e.grid.shift << "\" data-zp=\"" << e.grid.zp << "\" data-clipped-low=\""
        << exact(e.fit.clipped_low / total) << "\" data-clipped-high=\"" << exact(e.fit.clipped_high / total)
        << "\" data-mse=\"" << exact(e.fit.mse) << "\">";
    out << "<td class=\"method\" title=\"" << escape(e.choice.detail) << "\"><span class=\"swatch\" style=\"background:"
        << method_color(e.method) << "\"></span>" << escape(e.method) << "</td>";
    out << "<td class=\"num\">" << format_number(e.choice.min) << "</td><td class=\"num\">" << format_number(e.choice.max)
        << "</td><td class=\"num\">" << e.grid.shift << "</td><td class=\"num\">" << e.grid.zp << "</td><td class=\"num\">["
        << format_number(e.grid.dequantize(e.grid.qmin())) << ", " << format_number(e.grid.dequantize(e.grid.qmax()))
        << "]</td><td class=\"num\">" << percent(e.fit.clipped_low / total) << "</td><td class=\"num\">"
        << percent(e.fit.clipped_high / total) << "</td><td class=\"num\">" << format_number(e.fit.mse)
        << "</td><td class=\"num\">" << decibels(e.sqnr_db()) << "</td><td>" << note << "</td></tr>\n";
  }
  out << "</table>\n";
  return out.str();
}

std::string tensor_section(const CalibrationStats& stats, const TensorView& v) {
  const TensorStats& s = *v.stats;
  const std::string where = html::cell_title(v.layer, v.direction, stats.num_directions);
  const std::string name = gru_tensor_name(v.tensor);
  std::ostringstream out;
  out << "<section class=\"tensor\" id=\"tensor-" << tensor_id(v.layer, v.direction, v.tensor) << "\">\n<h3>"
      << escape(where) << ": " << name << " <small>(" << spec_text(v.spec) << ")</small></h3>\n";
  if (s.count == 0) {
    out << "<p class=\"help\">Not observed: no values, no range.</p>\n</section>\n";
    return out.str();
  }
  out << "<p class=\"help\">" << s.count << " values (" << s.zero_count << " exact zeros, "
      << (stats.include_zeros ? "counted" : "not counted") << " by the methods), observed [" << format_number(s.min)
      << ", " << format_number(s.max) << "], EMA [" << format_number(s.ema.min) << ", " << format_number(s.ema.max)
      << "]; quantize's method: " << escape(v.chosen) << ".</p>\n";
  out << histogram_svg(v, where + ": " + name) << methods_table(v) << "</section>\n";
  return out.str();
}

// The range the search chose for one tensor, scored on the histogram like the methods.
MethodEvaluation searched_range_evaluation(const CalibrationStats& stats, const RangeSearchResult& search, int layer,
                                           int direction, GruTensor tensor, const TensorQuant& spec) {
  MethodEvaluation e;
  e.method = kRangeSearchMethodName;
  const FloatRange& range =
      search.ranges.at(static_cast<size_t>(layer * search.num_directions + direction))[static_cast<size_t>(tensor)];
  e.choice = {range.first, range.second, e.method, "chosen by the range search on the model's output error"};
  e.grid = quant_from_range(range.first, range.second, spec.bits, spec.is_unsigned, spec.symmetric).quant;
  e.fit = grid_fit(stats.at(layer, direction, tensor), e.grid, stats.include_zeros);
  return e;
}

// The search's account: every start method's output SQNR, the accepted changes, the 16-bit widenings.
std::string range_search_section(const RangeSearchResult& search) {
  std::ostringstream out;
  out << "<section id=\"range-search\">\n<h2>Range search: output SQNR on " << search.sequences
      << " held-in calibration sequences</h2>\n<p class=\"help\">Ranges chosen by the error of the quantized "
         "model's output against the float model (fast integer executor), by coordinate descent over tensors from "
         "the best single method (docs/CALIBRATION.md). Start " << escape(search.start_method) << " "
      << decibels(search.start_sqnr_db) << " dB, searched " << decibels(search.sqnr_db) << " dB after "
      << search.evaluations << " evaluations (" << search.passes << " pass(es), stopped: " << escape(search.stopped_by)
      << ").</p>\n<table class=\"search-starts\"><tr><th>start method</th><th>output SQNR (dB)</th></tr>\n";
  for (const auto& [method, db] : search.method_sqnr_db) {
    out << "<tr><td>" << escape(method) << "</td><td class=\"num" << (method == search.start_method ? " best" : "")
        << "\">" << decibels(db) << "</td></tr>\n";
  }
  out << "</table>\n<table class=\"search-history\"><tr><th>evaluation</th><th>pass</th><th>tensor</th>"
         "<th>candidate</th><th>shift</th><th>zp</th><th>range</th><th>output SQNR (dB)</th></tr>\n";
  for (const RangeSearchStep& step : search.history) {
    if (step.pass == 0) continue;
    out << "<tr class=\"search-step\"><td class=\"num\">" << step.evaluation << "</td><td class=\"num\">" << step.pass
        << "</td><td>layer " << step.layer << (step.direction < 0 ? std::string(" (directions shared)")
                                                : " direction " + std::to_string(step.direction))
        << ": " << gru_tensor_name(step.tensor) << "</td><td>" << escape(step.candidate) << "</td><td class=\"num\">"
        << step.shift << "</td><td class=\"num\">" << step.zp << "</td><td>[" << format_number(step.min) << ", "
        << format_number(step.max) << "]</td><td class=\"num\">" << decibels(step.sqnr_db) << "</td></tr>\n";
  }
  out << "</table>\n";
  if (!search.widening.empty()) {
    out << "<table class=\"search-widening\"><tr><th>widened to 16 bits</th><th>output SQNR (dB)</th>"
           "<th>gain (dB)</th></tr>\n";
    const WideningResult* best = search.best_widening();
    for (const WideningResult& w : search.widening) {
      out << "<tr><td>" << gru_tensor_name(w.tensor) << "</td>";
      if (w.possible) {
        out << "<td class=\"num" << (&w == best ? " best" : "") << "\">" << decibels(w.sqnr_db)
            << "</td><td class=\"num\">" << decibels(w.gain_db) << "</td></tr>\n";
      } else {
        out << "<td colspan=\"2\">" << escape(w.reason) << "</td></tr>\n";
      }
    }
    out << "</table>\n";
  }
  out << "</section>\n";
  return out.str();
}

}  // namespace

double MethodEvaluation::sqnr_db() const {
  if (fit.mse == 0) return fit.mean_square > 0 ? std::numeric_limits<double>::infinity() : std::nan("");
  if (fit.mean_square == 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(fit.mean_square / fit.mse);
}

std::vector<std::string> report_methods(const std::vector<std::string>& extra) {
  std::vector<std::string> methods;
  for (const char* base : kBaseMethods) {
    const RangeMethod plain = parse_range_method(base);
    methods.push_back(plain.text());
    methods.push_back(parse_range_method(plain.text() + "+pow2").text());
  }
  for (const std::string& method : extra) {
    const std::string text = parse_range_method(method).text();
    if (std::find(methods.begin(), methods.end(), text) == methods.end()) methods.push_back(text);
  }
  return methods;
}

std::vector<MethodEvaluation> evaluate_range_methods(const CalibrationStats& stats, int layer, int direction,
                                                     GruTensor tensor, const TensorQuant& spec,
                                                     const std::vector<std::string>& methods) {
  const TensorStats& tensor_stats = stats.at(layer, direction, tensor);
  std::vector<MethodEvaluation> evaluations;
  for (const std::string& method : methods) {
    try {
      MethodEvaluation e;
      e.choice = select_range(stats, layer, direction, tensor, method, spec);
      e.method = e.choice.method;
      e.grid = quant_from_range(e.choice.min, e.choice.max, spec.bits, spec.is_unsigned, spec.symmetric).quant;
      e.fit = grid_fit(tensor_stats, e.grid, stats.include_zeros);
      evaluations.push_back(std::move(e));
    } catch (const Error& error) {
      throw Error("layer " + std::to_string(layer) + " direction " + std::to_string(direction) + " " +
                  gru_tensor_name(tensor) + ", method " + method + ": " + error.what());
    }
  }
  return evaluations;
}

std::vector<size_t> best_methods(const std::vector<MethodEvaluation>& evaluations) {
  std::vector<size_t> best;
  double smallest = std::numeric_limits<double>::infinity();
  for (const MethodEvaluation& e : evaluations) smallest = std::min(smallest, e.fit.mse);
  for (size_t i = 0; i < evaluations.size(); ++i) {
    if (evaluations[i].fit.mse == smallest) best.push_back(i);
  }
  return best;
}

std::string quantize_method(const CalibrationStats& stats, const BitwidthConfig& config, GruTensor tensor,
                            const std::string& override_method) {
  const std::string& configured = config.range_method_of(tensor);
  const std::string& method = !override_method.empty() ? override_method : configured.empty() ? stats.method : configured;
  return is_range_search_method(method) ? method : parse_range_method(method).text();
}

std::string calibration_report_html(const CalibrationStats& stats, const CalibrationReportOptions& options) {
  const BitwidthConfig preset = options.config ? BitwidthConfig{} : load_bitwidth_config("int8");
  const BitwidthConfig& config = options.config ? *options.config : preset;

  // Every tensor's evaluations first: the summary needs them all.
  std::vector<std::string> extra = {stats.method};
  for (GruTensor tensor : kObservedGruTensors) extra.push_back(quantize_method(stats, config, tensor, options.range_method));
  // The search is no histogram method: its column shows the ranges it chose, when a result is given.
  extra.erase(std::remove_if(extra.begin(), extra.end(), is_range_search_method), extra.end());
  std::vector<std::string> methods = report_methods(extra);
  const RangeSearchResult* search = options.range_search;
  std::vector<TensorView> views;
  for (int l = 0; l < stats.num_layers; ++l) {
    for (int d = 0; d < stats.num_directions; ++d) {
      for (GruTensor tensor : kObservedGruTensors) {
        TensorView v{l, d, tensor, &stats.at(l, d, tensor), config.spec(tensor),
                     quantize_method(stats, config, tensor, options.range_method), {}, {}};
        if (v.stats->count > 0) {
          v.evaluations = evaluate_range_methods(stats, l, d, tensor, v.spec, methods);
          if (search != nullptr) v.evaluations.push_back(searched_range_evaluation(stats, *search, l, d, tensor, v.spec));
          v.best = best_methods(v.evaluations);
        }
        views.push_back(std::move(v));
      }
    }
  }
  if (search != nullptr) methods.push_back(kRangeSearchMethodName);

  std::ostringstream out;
  out << html::page_begin(options.title, kExtraStyle);
  out << "<p class=\"lead\">Each observed tensor's calibration histogram and the range every method picks from "
         "it. A range maps to the power-of-two grid quantize derives under the tensor's bit width (shift s, zero "
         "point zp); each grid is scored on the histogram, the same way for every method: the fraction of values "
         "that saturate and the expected squared error per value (Δ²/12 inside the grid, the squared distance to "
         "the edge code beyond it), also as SQNR = 10·log10(E[x²] / error). Green: the smallest error of the "
         "tensor; outlined: the method quantize uses with this config. The score is a guide measured on the "
         "calibration data; qgru verify measures the quantized model.</p>\n";
  int64_t sequences = stats.total_sequences();
  std::string sources;
  for (const std::string& source : options.stats_sources) sources += (sources.empty() ? "" : ", ") + source;
  out << html::meta_list(
      {{"statistics", sources},
       {"model", stats.model_path},
       {"shape", "C = " + std::to_string(stats.input_size) + ", H = " + std::to_string(stats.hidden_size) + ", " +
                     std::to_string(stats.num_layers) + " layer(s), " + std::to_string(stats.num_directions) +
                     " direction(s)"},
       {"data", std::to_string(stats.data_files.size()) + " file(s), " + std::to_string(sequences) + " sequences"},
       {"statistics' method", stats.method},
       {"exact zeros", stats.include_zeros ? "counted by the methods" : "not counted (--exclude-zeros)"},
       {"config", config.name + (options.config_source != config.name ? " (" + options.config_source + ")" : "")},
       {"qgru", QGRU_VERSION_STRING}});

  // Summary: tensors × methods.
  out << "<section id=\"summary\">\n<h2>Summary: SQNR on the histogram (dB) per tensor and method</h2>\n"
         "<p class=\"help\">Green: the smallest error of the row (ties all green); outlined: quantize's method "
         "with config " << escape(config.name) << ". Hover a cell for its range and shift; follow a tensor to "
         "its histogram and table.</p>\n<table class=\"summary\"><tr><th>tensor</th><th>bits</th>";
  for (const std::string& method : methods) {  // "+pow2" on a line of its own keeps the columns narrow
    std::string header = escape(method);
    for (const char* part : {"+pow2", "99."}) {
      const size_t at = header.find(part);
      if (at != std::string::npos) header.insert(at, "<br>");
    }
    out << "<th>" << header << "</th>";
  }
  out << "</tr>\n";
  for (const TensorView& v : views) {
    const std::string id = tensor_id(v.layer, v.direction, v.tensor);
    out << "<tr class=\"summary-row\" data-tensor=\"" << id << "\"><td><a href=\"#tensor-" << id << "\">"
        << escape(html::cell_title(v.layer, v.direction, stats.num_directions)) << ": " << gru_tensor_name(v.tensor)
        << "</a></td><td>" << spec_text(v.spec) << "</td>";
    for (size_t i = 0; i < v.evaluations.size(); ++i) {
      const MethodEvaluation& e = v.evaluations[i];
      const bool best = contains(v.best, i), chosen = e.method == v.chosen;
      std::string classes = "num";
      if (best) classes += " best";
      if (chosen) classes += " chosen";
      out << "<td class=\"" << classes << "\" data-method=\"" << escape(e.method) << "\" title=\"" << escape(e.method)
          << ": [" << format_number(e.choice.min) << ", " << format_number(e.choice.max) << "], shift " << e.grid.shift
          << "\">" << decibels(e.sqnr_db()) << "</td>";
    }
    if (v.evaluations.empty()) out << "<td colspan=\"" << methods.size() << "\">not observed</td>";
    out << "</tr>\n";
  }
  out << "</table>\n</section>\n";
  if (search != nullptr) out << range_search_section(*search);

  for (int l = 0; l < stats.num_layers; ++l) {
    for (int d = 0; d < stats.num_directions; ++d) {
      out << "<section class=\"cell\" id=\"cell-" << html::cell_id(l, d) << "\">\n<h2>"
          << escape(html::cell_title(l, d, stats.num_directions)) << "</h2>\n";
      for (const TensorView& v : views) {
        if (v.layer == l && v.direction == d) out << tensor_section(stats, v);
      }
      out << "</section>\n";
    }
  }
  out << html::page_end("Range methods and the power-of-two choice are described in docs/CALIBRATION.md.");
  return out.str();
}

}  // namespace qgru
