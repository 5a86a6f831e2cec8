#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "qgru/base/error.h"
#include "qgru/calib/calibration_stats.h"

using qgru::CalibrationStats;
using qgru::GruTensor;

namespace {

CalibrationStats filled_stats(unsigned seed) {
  CalibrationStats stats = CalibrationStats::for_shape(2, 2, 5, 3);
  stats.model_path = "model.safetensors";
  stats.model_sha256 = std::string(64, 'a');
  stats.method = "kl+pow2";
  stats.data_files.push_back({"a.npy", std::string(64, 'b'), 7, 4});
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (auto& tensor : stats.tensors) {
    for (int t = 0; t < 6; ++t) {
      std::vector<float> values(20);
      for (auto& v : values) v = normal(rng);
      values[3] = 0.0f;
      tensor.observe_step(values.data(), static_cast<int64_t>(values.size()));
    }
  }
  return stats;
}

void check_same(const CalibrationStats& a, const CalibrationStats& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(qgru::same_order_independent_stats(a.tensors[i], b.tensors[i]));
    CHECK(a.tensors[i].ema.min == b.tensors[i].ema.min);
    CHECK(a.tensors[i].ema.max == b.tensors[i].ema.max);
    CHECK(a.tensors[i].ema.first_min == b.tensors[i].ema.first_min);
  }
}

std::string error_of(const std::string& text) {
  try {
    qgru::parse_calibration_stats(text, "stats.json");
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "";
}

// text with its first `from` replaced by `to`; `from` must occur (a replacement that found nothing would test
// nothing).
std::string replace_first(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "no '" << from << "' in the serialized statistics");
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("stats JSON round trip keeps every count, range, EMA and histogram bit for bit") {
  const CalibrationStats stats = filled_stats(7);
  const CalibrationStats read = qgru::parse_calibration_stats(qgru::serialize_calibration_stats(stats), "mem");
  CHECK(read.num_layers == 2);
  CHECK(read.num_directions == 2);
  CHECK(read.input_size == 5);
  CHECK(read.hidden_size == 3);
  CHECK(read.method == "kl+pow2");
  CHECK(read.model_sha256 == stats.model_sha256);
  REQUIRE(read.data_files.size() == 1);
  CHECK(read.data_files[0].sequences == 4);
  check_same(stats, read);
}

TEST_CASE("stats file written atomically reads back") {
  const auto dir = std::filesystem::temp_directory_path() / "qgru_calib_stats_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "stats.json").string();
  const CalibrationStats stats = filled_stats(8);
  qgru::write_calibration_stats(path, stats);
  check_same(stats, qgru::read_calibration_stats(path));
  std::filesystem::remove_all(dir);
}

TEST_CASE("truncated or inconsistent stats are refused with one line naming the file and entry") {
  const std::string text = qgru::serialize_calibration_stats(filled_stats(9));
  const std::string truncated = error_of(text.substr(0, text.size() / 2));
  CHECK(truncated.find("stats.json: not valid JSON") == 0);
  CHECK(truncated.find('\n') == std::string::npos);

  const std::string count_error = error_of(replace_first(text, "\"count\":120", "\"count\":121"));
  CHECK(count_error.find("stats.json: tensors[0] (layer 0, direction 0, x)") == 0);
  CHECK(count_error.find("histogram holds 114 values, expected count - zero_count = 115") != std::string::npos);

  const std::string wrong_schema = replace_first(text, "qgru.calibration_stats", "qgru.quantized_model__");
  CHECK(error_of(wrong_schema).find("stats.json: schema:") == 0);

  const std::string wrong_version = replace_first(text, "\"schema_version\": 1", "\"schema_version\": 9");
  CHECK(error_of(wrong_version).find("9 is not supported") != std::string::npos);

  const std::string wrong_method = replace_first(text, "\"kl+pow2\"", "\"entropy\"");
  CHECK(error_of(wrong_method).find("stats.json: method.name: method 'entropy' is not one of") == 0);

  const std::string missing = replace_first(text, "\"tensor\":\"new_gate_output\"", "\"tensor\":\"new_gate_input\"");
  CHECK(error_of(missing).find("appears twice") != std::string::npos);
}

TEST_CASE("stats for another model shape are refused naming the file and the mismatch") {
  const CalibrationStats stats = filled_stats(10);
  CHECK_NOTHROW(qgru::check_stats_match_model(stats, 2, 2, 5, 3, "s.json"));
  CHECK_THROWS_WITH(qgru::check_stats_match_model(stats, 2, 2, 5, 4, "s.json"),
                    "s.json: calibration statistics are for another model: hidden_size (H) 3 in the statistics, 4 in the model");
  CHECK_THROWS_WITH(qgru::check_stats_match_model(stats, 1, 2, 5, 3, "s.json"),
                    "s.json: calibration statistics are for another model: num_layers 2 in the statistics, 1 in the model");
  CHECK_THROWS_AS(stats.at(0, 0, GruTensor::W), qgru::Error);
}

TEST_CASE("merging stats of another model is refused") {
  CalibrationStats a = filled_stats(1);
  CalibrationStats b = CalibrationStats::for_shape(2, 1, 5, 3);
  CHECK_THROWS_WITH(qgru::merge_calibration_stats({a, b}, {"a.json", "b.json"}),
                    "b.json (merged with a.json): calibration statistics are for another model: num_directions 1 in "
                    "the statistics, 2 in the model");
  CalibrationStats c = filled_stats(2);
  c.model_sha256 = std::string(64, 'c');
  CHECK_THROWS_AS(qgru::merge_calibration_stats({a, c}, {"a.json", "c.json"}), qgru::Error);
}

TEST_CASE("stats with unobserved tensors round-trip with null ranges") {
  const CalibrationStats empty = CalibrationStats::for_shape(1, 1, 2, 3);
  const std::string text = qgru::serialize_calibration_stats(empty);
  CHECK(text.find("\"min\":null") != std::string::npos);
  const CalibrationStats read = qgru::parse_calibration_stats(text, "empty.json");
  for (const auto& tensor : read.tensors) {
    CHECK(tensor.count == 0);
    CHECK(tensor.histogram.total() == 0);
  }
}

TEST_CASE("histogram runs that overlap or leave the bins are refused") {
  CalibrationStats stats = CalibrationStats::for_shape(1, 1, 1, 1);
  const std::vector<float> one = {0.5f};
  for (auto& tensor : stats.tensors) tensor.observe_step(one.data(), 1);
  const std::string text = qgru::serialize_calibration_stats(stats);
  // Every tensor holds one value: its runs are [[first_bin, 1]].
  const size_t runs = text.find("\"runs\":[[");
  REQUIRE(runs != std::string::npos);
  const size_t runs_end = text.find("]]", runs) + 2;
  auto with_runs = [&](const std::string& replacement) {
    std::string changed = text;
    changed.replace(runs, runs_end - runs, "\"runs\":" + replacement);
    return changed;
  };
  CHECK(error_of(with_runs("[[131072,1]]")).find("lie outside 0..131071") != std::string::npos);
  const std::string message = error_of(with_runs("[[5,1],[5,1]]"));
  CHECK(message.find("stats.json: tensors[0] (layer 0, direction 0, x).histogram.runs[1]") == 0);
  CHECK(message.find("overlap") != std::string::npos);
}

TEST_CASE("stats claiming more layers than their entries are refused by the entry count, before allocating") {
  // 40 entries (2 layers x 2 directions x 10 tensors) under a header claiming 64 layers: 1280 histograms of
  // 1 MiB would be allocated if the shape were trusted; the count is compared first and names both figures.
  const std::string text = qgru::serialize_calibration_stats(filled_stats(11));
  const std::string error = error_of(replace_first(text, "\"num_layers\": 2", "\"num_layers\": 64"));
  CHECK(error.find("stats.json: tensors: 40 entries, expected 1280 (64 layers x 2 directions x 10 tensors)") == 0);
  CHECK(error.find("entries are missing") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);
}
