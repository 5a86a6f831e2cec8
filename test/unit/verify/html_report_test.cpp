// The HTML verify report: self-contained (no script, no external resource), one svg per plot, one table
// row per compared tensor, figures that are the report's own; and the SVG helper's edge cases (non-finite
// values, empty data, escaping).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../../../lib/src/verify/svg_plot.h"
#include "html_checks.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/artifact.h"
#include "qgru/verify/html_report.h"

namespace qgru {
namespace {

const std::string kData = std::string(QGRU_TEST_DATA_DIR) + "/golden_fixed";

using test::check_self_contained;
using test::count;

// A verify report with known figures, made by hand (no float run needed).
GruVerifyReport synthetic_report(const QuantizedGru& model, int T) {
  GruVerifyReport report;
  report.T = T;
  report.N = 2;
  report.output.add(1.0, 1.01);
  report.h_n.add(2.0, 2.5);
  report.output_per_step.resize(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) report.output_per_step[static_cast<size_t>(t)].add(1.0, 1.0 + 0.01 * (t + 1));
  for (int l = 0; l < model.num_layers; ++l) {
    for (int d = 0; d < model.num_directions; ++d) {
      for (GruTensor tensor : kObservedGruTensors) {
        TensorComparison c;
        c.layer = l;
        c.direction = d;
        c.tensor = tensor;
        c.overall.add(1.0, 1.001);
        c.per_step.resize(static_cast<size_t>(T));
        for (int t = 0; t < T; ++t) c.per_step[static_cast<size_t>(t)].add(1.0, 1.0 + 0.001 * (t + 1));
        report.tensors.push_back(c);
      }
    }
  }
  return report;
}

TEST_CASE("the HTML report has one svg per plot, one row per tensor, and nothing external") {
  const QuantizedGru model = read_artifact(kData + "/random_l2_bidir/model_int8.qgru.json");
  const int cells = model.num_layers * model.num_directions;
  REQUIRE(cells == 4);
  const GruVerifyReport report = synthetic_report(model, 6);
  HtmlReportOptions options;
  options.model_path = "m<odel>.safetensors";
  const std::string html = verify_report_html(report, model, options);

  check_self_contained(html);
  // Escaped user text.
  CHECK(html.find("m&lt;odel&gt;.safetensors") != std::string::npos);
  // One svg per plot: output SQNR, one SQNR plot per cell, two per gate activation (curve and error).
  CHECK(count(html, "<svg ") == 1 + cells + 6 * cells);
  CHECK(count(html, "</svg>") == count(html, "<svg "));
  CHECK(count(html, "id=\"plot-output-sqnr\"") == 1);
  CHECK(count(html, "id=\"plot-sqnr-l1-d1\"") == 1);
  CHECK(count(html, "id=\"plot-act-l0-d1-new_gate\"") == 1);
  CHECK(count(html, "id=\"plot-acterr-l1-d0-update_gate\"") == 1);
  // Table rows: 10 compared tensors per cell, the two summary rows, 3 activations per cell.
  CHECK(count(html, "class=\"tensor-row\"") == 10 * static_cast<size_t>(cells));
  CHECK(count(html, "class=\"summary-row\"") == 2);
  CHECK(count(html, "class=\"activation-row\"") == 3 * static_cast<size_t>(cells));
  // The figures are the report's: h_n max abs error 0.5, SQNR 10·log10(4 / 0.25) = 12.0 dB (a "poor" cell).
  const size_t h_n_row = html.find("data-tensor=\"h_n\"");
  REQUIRE(h_n_row != std::string::npos);
  const std::string row = html.substr(h_n_row, html.find("</tr>", h_n_row) - h_n_row);
  CHECK(row.find(">0.5<") != std::string::npos);
  CHECK(row.find("poor\">12<") != std::string::npos);
  // Without statistics there is no histogram section.
  CHECK(html.find("id=\"histograms\"") == std::string::npos);
  // Table activations are exact: their max error against the correctly rounded code is 0 LSB.
  const size_t act = html.find("class=\"activation-row\"");
  REQUIRE(act != std::string::npos);
  const std::string act_row = html.substr(act, html.find("</tr>", act) - act);
  CHECK(act_row.find("<td>table</td>") != std::string::npos);
}

TEST_CASE("the HTML report plots piecewise-linear activations with their non-zero error") {
  const QuantizedGru model = read_artifact(kData + "/random_l2_bidir/model_int16-activations.qgru.json");
  const GruVerifyReport report = synthetic_report(model, 3);
  const std::string html = verify_report_html(report, model, {});
  CHECK(count(html, "<td>pwl</td>") == 12);
  // A 16-bit input has 65536 codes; the curves are thinned to at most ~1200 points each.
  CHECK(html.size() < 2'000'000);
}

TEST_CASE("svg charts skip non-finite points and say 'no data' when nothing is drawable") {
  svg::Chart chart;
  chart.id = "c";
  chart.title = "t & <u>";
  const double inf = std::numeric_limits<double>::infinity();
  chart.series.push_back({"s", "#000000", {0, 1, 2, 3}, {1.0, inf, std::nan(""), 2.0}, svg::SeriesStyle::Line, false, 1.0, {}});
  const std::string drawn = svg::render(chart);
  CHECK(drawn.find("nan") == std::string::npos);
  CHECK(drawn.find("inf") == std::string::npos);
  CHECK(drawn.find("t &amp; &lt;u&gt;") != std::string::npos);
  CHECK(count(drawn, " M") == 2);  // the line breaks at the two missing points: two sub-paths
  CHECK(drawn.find("no data") == std::string::npos);

  svg::Chart empty;
  empty.id = "e";
  empty.series.push_back({"s", "#000000", {0, 1}, {inf, -inf}, svg::SeriesStyle::Line, false, 1.0, {}});
  CHECK(svg::render(empty).find("no data") != std::string::npos);

  svg::Chart log_chart;
  log_chart.id = "l";
  log_chart.log_y = true;
  log_chart.series.push_back({"", "#000000", {0, 1, 2}, {0.0, 10.0, 1000.0}, svg::SeriesStyle::Steps, false, 1.0, {}});
  const std::string log_svg = svg::render(log_chart);
  CHECK(log_svg.find("nan") == std::string::npos);
  CHECK(log_svg.find(">100<") != std::string::npos);  // a decade tick
}

TEST_CASE("numbers in the report are short and exact where they can be") {
  CHECK(svg::format_number(0) == "0");
  CHECK(svg::format_number(12) == "12");
  CHECK(svg::format_number(0.5) == "0.5");
  CHECK(svg::format_number(1234.4) == "1234");
  CHECK(svg::format_number(1.5e-5) == "1.5e-05");
  CHECK(svg::format_number(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(svg::format_number(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(svg::escape("a\"b'c") == "a&quot;b&#39;c");
}

}  // namespace
}  // namespace qgru
