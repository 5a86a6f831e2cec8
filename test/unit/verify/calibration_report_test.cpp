// The calibration report: every method's range, grid and score agree with the calib area's functions and
// with a direct float64 computation on the raw values; the page has one section, one svg and one range marker
// per method and tensor, the figures it shows are the evaluations' own, and nothing is external.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/calib/range_methods.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/verify/calibration_report.h"
#include "qgru/quant/bitwidth_presets.h"
#include "../../../lib/src/verify/svg_plot.h"
#include "html_checks.h"

namespace qgru {
namespace {

using test::check_self_contained;
using test::count;

// Raw values per tensor, kept to compute the figures directly.
struct Synthetic {
  CalibrationStats stats;
  std::vector<std::vector<float>> raw;  // per stats.tensors entry
};

// One layer, `directions` directions; each tensor gets its own distribution: a Gaussian core, a sparse far
// outlier tail, and exact zeros, over 8 steps (so the EMA clips the outliers).
Synthetic synthetic(int directions, unsigned seed) {
  Synthetic s;
  s.stats = CalibrationStats::for_shape(1, directions, 4, 3);
  s.stats.model_path = "m.safetensors";
  s.stats.method = "ema";
  s.stats.data_files.push_back({"d.npy", std::string(64, 'c'), 8, 500});
  s.raw.resize(s.stats.tensors.size());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < s.stats.tensors.size(); ++i) {
    const double scale = 0.25 * static_cast<double>(i % 5 + 1);
    std::normal_distribution<double> core(0.1 * static_cast<double>(i % 3), scale);
    std::uniform_real_distribution<double> pick(0.0, 1.0);
    for (int t = 0; t < 8; ++t) {
      std::vector<float> step;
      for (int n = 0; n < 2000; ++n) {
        const double u = pick(rng);
        step.push_back(static_cast<float>(u < 0.05 ? 0.0 : u < 0.9995 ? core(rng) : 12.0 * scale * (pick(rng) + 0.5)));
      }
      s.stats.tensors[i].observe_step(step.data(), static_cast<int64_t>(step.size()));
      s.raw[i].insert(s.raw[i].end(), step.begin(), step.end());
    }
  }
  return s;
}

// The score's definition evaluated on the raw values (exact zeros count, error 0).
double direct_mse(const std::vector<float>& values, const TensorQuant& grid, double& clipped_fraction) {
  const double step = grid.scale();
  const double low_edge = grid.dequantize(grid.qmin()), high_edge = grid.dequantize(grid.qmax());
  double error = 0, clipped = 0;
  for (float f : values) {
    const double v = f;
    if (v == 0.0) continue;
    const double code = std::round(v * std::ldexp(1.0, grid.shift)) + grid.zp;
    if (code > grid.qmax()) {
      error += (v - high_edge) * (v - high_edge), clipped += 1;
    } else if (code < grid.qmin()) {
      error += (low_edge - v) * (low_edge - v), clipped += 1;
    } else {
      error += step * step / 12.0;
    }
  }
  clipped_fraction = clipped / static_cast<double>(values.size());
  return error / static_cast<double>(values.size());
}

TEST_CASE("report_methods: the five methods plain and +pow2, then the extra ones once, canonical") {
  const std::vector<std::string> methods =
      report_methods({"percentile", "percentile:99.9", "bounds+pow2", "ema", "bounds+pow2"});
  const std::vector<std::string> expected = {"minmax", "minmax+pow2", "ema", "ema+pow2", "kl", "kl+pow2",
                                             "percentile:99.99", "percentile:99.99+pow2", "mse", "mse+pow2",
                                             "percentile:99.9", "bounds+pow2"};
  CHECK(methods == expected);
  CHECK_THROWS_AS(report_methods({"entropy"}), Error);
}

TEST_CASE("each method's evaluation is select_range's range, quant_from_range's grid and the direct score") {
  const Synthetic s = synthetic(1, 3);
  const BitwidthConfig config = load_bitwidth_config("int8");
  const std::vector<std::string> methods = report_methods({});
  for (GruTensor tensor : {GruTensor::x, GruTensor::update_gate_output, GruTensor::new_gate_output}) {
    CAPTURE(std::string(gru_tensor_name(tensor)));
    const TensorQuant spec = config.spec(tensor);
    const std::vector<MethodEvaluation> evaluations = evaluate_range_methods(s.stats, 0, 0, tensor, spec, methods);
    REQUIRE(evaluations.size() == methods.size());
    const TensorStats& t = s.stats.at(0, 0, tensor);
    const std::vector<float>& raw = s.raw[static_cast<size_t>(observed_tensor_index(tensor))];
    for (size_t i = 0; i < evaluations.size(); ++i) {
      const MethodEvaluation& e = evaluations[i];
      CAPTURE(e.method);
      CHECK(e.method == methods[i]);
      const RangeChoice choice = select_range(s.stats, 0, 0, tensor, methods[i], spec);
      CHECK(e.choice.min == choice.min);
      CHECK(e.choice.max == choice.max);
      const TensorQuant grid = quant_from_range(choice.min, choice.max, spec.bits, spec.is_unsigned, spec.symmetric).quant;
      CHECK(e.grid.shift == grid.shift);
      CHECK(e.grid.zp == grid.zp);
      double clipped = 0;
      const double mse = direct_mse(raw, e.grid, clipped);
      CHECK(e.fit.mse == doctest::Approx(mse).epsilon(1e-3));
      CHECK(e.fit.clipped_fraction() == doctest::Approx(clipped).epsilon(1e-9));
      double square = 0;
      for (float v : raw) square += static_cast<double>(v) * v;
      CHECK(e.sqnr_db() == doctest::Approx(10 * std::log10(square / static_cast<double>(raw.size()) / mse)).epsilon(1e-3));
    }
    // minmax covers every value: nothing clips; ema and percentile clip the outliers.
    CHECK(evaluations[0].choice.min == t.min);
    CHECK(evaluations[0].choice.max == t.max);
    CHECK(evaluations[0].fit.clipped_fraction() == 0);
    // The best: exactly the evaluations with the smallest error.
    const std::vector<size_t> best = best_methods(evaluations);
    REQUIRE(!best.empty());
    for (size_t i = 0; i < evaluations.size(); ++i) CHECK(evaluations[i].fit.mse >= evaluations[best[0]].fit.mse);
    for (size_t b : best) CHECK(evaluations[b].fit.mse == evaluations[best[0]].fit.mse);
  }
}

TEST_CASE("quantize's method: the config's for the tensor, else the statistics' default") {
  Synthetic s = synthetic(1, 5);
  s.stats.method = "percentile";
  BitwidthConfig config = load_bitwidth_config("int8");
  CHECK(quantize_method(s.stats, config, GruTensor::h) == "ema");
  config.range_method = "";
  CHECK(quantize_method(s.stats, config, GruTensor::h) == "percentile:99.99");
  config.of(GruTensor::h).range_method = "kl+pow2";
  CHECK(quantize_method(s.stats, config, GruTensor::h) == "kl+pow2");
}

TEST_CASE("the page: one section, svg and table per tensor, one range marker and row per method") {
  const Synthetic s = synthetic(2, 9);
  BitwidthConfig config = load_bitwidth_config("int8");
  config.of(GruTensor::h).range_method = "percentile:99.9+pow2";  // a method outside the standard ten
  CalibrationReportOptions options;
  options.stats_sources = {"st<ats>.json"};
  options.config = &config;
  const std::string html = calibration_report_html(s.stats, options);
  const size_t tensors = 2 * kObservedGruTensors.size();
  const size_t methods = 11;

  check_self_contained(html);
  CHECK(html.find("st&lt;ats&gt;.json") != std::string::npos);

  CHECK(count(html, "<section class=\"tensor\"") == tensors);
  CHECK(count(html, "<svg ") == tensors);
  CHECK(count(html, "</svg>") == tensors);
  CHECK(count(html, "id=\"plot-calib-l0-d1-new_gate_output\"") == 1);
  CHECK(count(html, "id=\"tensor-l0-d0-x\"") == 1);
  CHECK(count(html, "class=\"range-marker\"") == tensors * methods);
  CHECK(count(html, "<table class=\"methods\">") == tensors);
  CHECK(count(html, "class=\"summary-row\"") == tensors);
  // The extra method: a summary cell, a table row and a range marker per tensor.
  CHECK(count(html, "data-method=\"percentile:99.9+pow2\"") == 2 * tensors);
  CHECK(count(html, "data-name=\"percentile:99.9+pow2\"") == tensors);
  // Quantize's method is marked once per tensor in the summary and once in the tensor's table.
  const std::regex chosen_cell("<td class=\"num( best)? chosen\" data-method=\"([^\"]+)\"");
  std::vector<std::string> chosen;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), chosen_cell); it != std::sregex_iterator(); ++it) {
    chosen.push_back((*it)[2].str());
  }
  REQUIRE(chosen.size() == tensors);
  for (size_t i = 0; i < tensors; ++i) {
    CHECK(chosen[i] == (i % kObservedGruTensors.size() == 1 ? "percentile:99.9+pow2" : "ema"));  // h is second
  }
  CHECK(count(html, " chosen\" data-method=") == 2 * tensors);

  // The rows' full-precision figures are the evaluations' own.
  const std::vector<std::string> list = report_methods({"ema", "percentile:99.9+pow2"});
  const std::vector<MethodEvaluation> evaluations =
      evaluate_range_methods(s.stats, 0, 1, GruTensor::weight_hh_linear, config.spec(GruTensor::weight_hh_linear), list);
  const size_t section = html.find("id=\"tensor-l0-d1-weight_hh_linear\"");
  REQUIRE(section != std::string::npos);
  const std::string part = html.substr(section, html.find("</section>", section) - section);
  const std::regex row("<tr class=\"method-row[^\"]*\" data-method=\"([^\"]+)\" data-min=\"([^\"]+)\" data-max=\"([^\"]+)\" "
                       "data-shift=\"([^\"]+)\" data-zp=\"([^\"]+)\" data-clipped-low=\"([^\"]+)\" "
                       "data-clipped-high=\"([^\"]+)\" data-mse=\"([^\"]+)\"");
  size_t rows = 0;
  for (auto it = std::sregex_iterator(part.begin(), part.end(), row); it != std::sregex_iterator(); ++it, ++rows) {
    REQUIRE(rows < evaluations.size());
    const MethodEvaluation& e = evaluations[rows];
    const std::smatch& m = *it;
    CHECK(m[1].str() == e.method);
    CHECK(std::strtod(m[2].str().c_str(), nullptr) == e.choice.min);
    CHECK(std::strtod(m[3].str().c_str(), nullptr) == e.choice.max);
    CHECK(std::atoi(m[4].str().c_str()) == e.grid.shift);
    CHECK(std::atoi(m[5].str().c_str()) == e.grid.zp);
    CHECK(std::strtod(m[6].str().c_str(), nullptr) + std::strtod(m[7].str().c_str(), nullptr) ==
          doctest::Approx(e.fit.clipped_fraction()).epsilon(1e-12));
    CHECK(std::strtod(m[8].str().c_str(), nullptr) == e.fit.mse);
  }
  CHECK(rows == methods);
}

TEST_CASE("a tensor never observed is said so, without a plot, and the rest of the page is whole") {
  Synthetic s = synthetic(1, 13);
  s.stats.at(0, 0, GruTensor::reset_gate_output) = TensorStats{};
  const std::string html = calibration_report_html(s.stats, CalibrationReportOptions{});
  CHECK(count(html, "<section class=\"tensor\"") == kObservedGruTensors.size());
  CHECK(count(html, "<svg ") == kObservedGruTensors.size() - 1);
  CHECK(count(html, "id=\"plot-calib-l0-d0-reset_gate_output\"") == 0);
  CHECK(html.find("Not observed") != std::string::npos);
  CHECK(html.find("not observed</td>") != std::string::npos);
  CHECK(html.find("</html>") != std::string::npos);
}

TEST_CASE("the range strip: the svg grows by its rows, one group per row, on the plot's x axis") {
  svg::Chart chart;
  chart.id = "c";
  chart.height = 200;
  chart.series.push_back({"", "#777777", {0.0, 1.0, 2.0}, {5.0, 7.0}, svg::SeriesStyle::Steps, false, 1.0, {}});
  const std::string plain = svg::render(chart);
  CHECK(plain.find("height=\"200\"") != std::string::npos);
  for (int i = 0; i < 3; ++i) {
    svg::RangeRow row;
    row.name = "m<" + std::to_string(i) + ">";
    row.label = row.name;
    row.lo = -4.0 + i, row.hi = 1.0;  // -4 lies outside the series: the x axis must grow to show it
    row.grid_lo = -4.0, row.grid_hi = 3.0;
    row.ticks = {-4.0, -2.0, 0.0, 2.0};
    chart.range_rows.push_back(row);
  }
  const std::string svg = svg::render(chart);
  CHECK(svg.find("height=\"254\"") != std::string::npos);  // 200 + 2·6 padding + 3·14 rows
  CHECK(count(svg, "class=\"range-marker\"") == 3);
  CHECK(count(svg, "data-name=\"m&lt;1&gt;\"") == 1);
  CHECK(svg.find(">-4<") != std::string::npos);  // a tick label at -4
  CHECK(svg.find("nan") == std::string::npos);
}

}  // namespace
}  // namespace qgru
