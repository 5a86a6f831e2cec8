#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "qgru/verify/verify_report.h"

namespace {

// Step 0: reference (1, -2), test (1.5, -2): error (0.5, 0). Step 1: reference (0, 0), test (0, 0).
// Step 2: reference (3, 4), test (-3, -4): the sign flipped, cosine -1.
qgru::GruVerifyReport three_step_report() {
  qgru::GruVerifyReport report;
  report.T = 3;
  report.N = 1;
  report.output_per_step.resize(3);
  report.output_per_step[0].add(1.0, 1.5);
  report.output_per_step[0].add(-2.0, -2.0);
  report.output_per_step[1].add(0.0, 0.0);
  report.output_per_step[1].add(0.0, 0.0);
  report.output_per_step[2].add(3.0, -3.0);
  report.output_per_step[2].add(4.0, -4.0);
  for (const qgru::ErrorMetrics& step : report.output_per_step) report.output.merge(step);
  qgru::TensorComparison h;
  h.tensor = qgru::GruTensor::h;
  h.per_step = report.output_per_step;
  h.overall = report.output;
  report.tensors.push_back(h);
  return report;
}

}  // namespace

TEST_CASE("the JSON report lacking per-step error figures other than SQNR") {
  const nlohmann::json json = qgru::verify_report_json(three_step_report());
  for (const nlohmann::json& entry : {json.at("output"), json.at("tensors").at(0)}) {
    const nlohmann::json& steps = entry.at("per_step");
    for (const char* figure : {"count", "max_abs_error", "mean_abs_error", "nmse", "sqnr_db", "cosine"}) {
      REQUIRE(steps.at(figure).size() == 3);
    }
    // Closed forms per step, computed by hand from the values above.
    CHECK(steps["count"][0] == 2);
    CHECK(steps["max_abs_error"][0].get<double>() == doctest::Approx(0.5));
    CHECK(steps["mean_abs_error"][0].get<double>() == doctest::Approx(0.25));
    CHECK(steps["nmse"][0].get<double>() == doctest::Approx(0.25 / 5.0));
    CHECK(steps["sqnr_db"][0].get<double>() == doctest::Approx(10.0 * std::log10(5.0 / 0.25)));
    CHECK(steps["cosine"][0].get<double>() == doctest::Approx((1.5 + 4.0) / std::sqrt(5.0 * 6.25)));
    // An exact match: SQNR +inf (written as text), NMSE 0, cosine 1 (both all zero).
    CHECK(steps["sqnr_db"][1] == "inf");
    CHECK(steps["nmse"][1].get<double>() == 0.0);
    CHECK(steps["cosine"][1].get<double>() == 1.0);
    CHECK(steps["max_abs_error"][2].get<double>() == doctest::Approx(8.0));
    CHECK(steps["nmse"][2].get<double>() == doctest::Approx(4.0));
    CHECK(steps["cosine"][2].get<double>() == doctest::Approx(-1.0));
    // The SQNR array kept for older readers is the same column.
    CHECK(entry.at("per_step_sqnr_db") == steps.at("sqnr_db"));
  }
  // The overall figures are not the mean of the steps' (max over steps, sums over all values).
  CHECK(json["output"]["max_abs_error"].get<double>() == doctest::Approx(8.0));
}
