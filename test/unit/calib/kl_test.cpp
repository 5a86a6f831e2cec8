// KL calibration against the independent NumPy reference (scripts/kl_reference.py, committed expectations in
// test/data/calib/kl_cases.json).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qgru/calib/range_methods.h"

namespace {

const std::string kDataDir = std::string(QGRU_TEST_DATA_DIR) + "/calib/";

nlohmann::json load_cases() {
  std::ifstream in(kDataDir + "kl_cases.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in)["cases"];
}

std::vector<float> load_samples(const std::string& file, size_t count) {
  std::ifstream in(kDataDir + file, std::ios::binary);
  REQUIRE(in.good());
  std::vector<float> values(count);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(float)));
  REQUIRE(static_cast<size_t>(in.gcount()) == count * sizeof(float));
  return values;
}

}  // namespace

TEST_CASE("kl search on the reference histograms finds NumPy's i* and KL") {
  const auto cases = load_cases();
  REQUIRE(cases.size() == 5);
  for (const auto& c : cases) {
    CAPTURE(c["name"].get<std::string>());
    std::vector<double> bins;
    for (const auto& count : c["abs_histogram"]) bins.push_back(count.get<double>());
    REQUIRE(bins.size() == static_cast<size_t>(qgru::kKlBins));
    const qgru::KlSearch search = qgru::kl_search(bins, c["levels"].get<int>());
    CHECK(search.clip_bins == c["expected_clip_bins"].get<int>());
    CHECK(search.divergence == doctest::Approx(c["expected_kl"].get<double>()).epsilon(1e-9));
  }
}

TEST_CASE("kl range from observed samples lands within one bin of the NumPy threshold") {
  for (const auto& c : load_cases()) {
    const std::string name = c["name"].get<std::string>();
    CAPTURE(name);
    const auto samples = load_samples(c["samples_file"].get<std::string>(), c["samples"].get<size_t>());
    qgru::TensorStats stats;
    for (size_t i = 0; i < samples.size(); i += 100) stats.observe_step(samples.data() + i, 100);
    CHECK(stats.min == c["min"].get<double>());
    CHECK(stats.max == c["max"].get<double>());
    qgru::TensorQuant spec;
    spec.bits = c["bits"].get<int>();
    spec.is_unsigned = name == "one_sided";
    CHECK(qgru::kl_levels(stats, spec) == c["levels"].get<int>());
    const qgru::MethodRange range = qgru::kl_range(stats, spec, true);
    const double absmax = c["absmax"].get<double>();
    const double bin_width = absmax / qgru::kKlBins;
    const double expected = c["expected_threshold"].get<double>();
    const double threshold = std::max(-range.min, range.max);
    // The range is the threshold clamped to the data.
    CHECK(threshold <= std::min(expected, absmax) + 1.0001 * bin_width);
    CHECK(threshold >= std::min(expected, absmax) - 1.0001 * bin_width);
    MESSAGE(name << ": " << range.detail << " (NumPy T=" << expected << ")");
  }
}

TEST_CASE("kl divergence is +inf when a clipped-in outlier meets an empty level") {
  // P = [1, 0, 0, 0+5]: the last bin holds the outliers, its level has no counts of its own.
  const std::vector<double> bins = {1, 0, 0, 0, 5};
  CHECK(std::isinf(qgru::kl_divergence_for_clip(bins, 4, 2)));
  // Without clipping every bin quantizes onto itself (levels >= bins): KL 0.
  CHECK(qgru::kl_divergence_for_clip(bins, 5, 8) == 0.0);
}

TEST_CASE("kl ties go to the larger clip") {
  // A flat histogram: every candidate with as many levels as bins per level is lossless.
  const std::vector<double> flat(64, 3.0);
  const qgru::KlSearch search = qgru::kl_search(flat, 16);
  CHECK(search.clip_bins == 64);
  CHECK(search.divergence == doctest::Approx(0.0));
}
