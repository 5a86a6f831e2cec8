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

  std::string wrong_count = text;
  const size_t at = wrong_count.find("\"count\":120");
  REQUIRE(at != std::string::npos);
  wrong_count.replace(at, 11, "\"count\":121");
  const std::string count_error = error_of(wrong_count);
  CHECK(count_error.find("stats.json: tensors[0] (layer 0, direction 0, x)") == 0);
  CHECK(count_error.find("histogram holds 114 values, expected count - zero_count = 115") != std::string::npos);

  std::string wrong_schema = text;
  wrong_schema.replace(wrong_schema.find("qgru.calibration_stats"), 22, "qgru.quantized_model__");
  CHECK(error_of(wrong_schema).find("stats.json: schema:") == 0);

  std::string wrong_version = text;
  wrong_version.replace(wrong_version.find("\"schema_version\": 1"), 19, "\"schema_version\": 9");
  CHECK(error_of(wrong_version).find("9 is not supported") != std::string::npos);

  std::string wrong_method = text;
  wrong_method.replace(wrong_method.find("\"kl+pow2\""), 9, "\"entropy\"");
  CHECK(error_of(wrong_method).find("stats.json: method.name: method 'entropy' is not one of") == 0);

  std::string missing = text;
  const size_t tensor = missing.find("\"tensor\":\"new_gate_output\"");
  REQUIRE(tensor != std::string::npos);
  missing.replace(tensor, 26, "\"tensor\":\"new_gate_input\"");
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
