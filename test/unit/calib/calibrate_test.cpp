// run_calibration on the bundled example model (examples/digits) with small data written here.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/calib/calibrate.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/io/npy.h"
#include "quant_test_support.h"

namespace fs = std::filesystem;

namespace {

const std::string kModel = std::string(QGRU_SOURCE_DIR) + "/examples/digits/gru.safetensors";

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / "qgru_calibrate_test") {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string write_sequences(const TempDir& dir, const std::string& name, int T, int N, int C, float base) {
  std::vector<float> values(static_cast<size_t>(T * N * C));
  for (size_t i = 0; i < values.size(); ++i) values[i] = base + static_cast<float>(i % 17) / 16.0f;
  const std::string path = dir.file(name);
  qgru::write_npy(path, qgru::Tensor::from_vector<float>({T, N, C}, values));
  return path;
}

}  // namespace

TEST_CASE("calibration reads --data files, then the sorted folder, and stops at --max-samples") {
  if (!fs::exists(kModel)) {
    MESSAGE("examples/digits/gru.safetensors not present; skipped");
    return;
  }
  TempDir dir;
  fs::create_directories(dir.path / "folder");
  write_sequences(dir, "folder/b.npy", 4, 3, 8, 0.0f);
  write_sequences(dir, "folder/a.npy", 5, 2, 8, 0.5f);
  write_sequences(dir, "folder/ignored.txt", 1, 1, 8, 0.0f);
  const std::string first = write_sequences(dir, "first.npy", 3, 4, 8, -0.5f);
  qgru::CalibrateOptions options;
  options.model_path = kModel;
  options.data_paths = {first};
  options.data_dir = dir.file("folder");
  const auto files = qgru::calibration_data_files(options);
  REQUIRE(files.size() == 3);
  CHECK(files[0] == first);
  CHECK(fs::path(files[1]).filename() == "a.npy");
  CHECK(fs::path(files[2]).filename() == "b.npy");

  options.max_samples = 5;  // 4 from first.npy, 1 from a.npy, none from b.npy
  const qgru::CalibrationStats stats = qgru::run_calibration(options);
  REQUIRE(stats.data_files.size() == 2);
  CHECK(stats.data_files[0].sequences == 4);
  CHECK(stats.data_files[1].sequences == 1);
  CHECK(stats.data_files[1].time_steps == 5);
  CHECK(stats.total_sequences() == 5);
  CHECK(stats.data_files[0].sha256.size() == 64);
  CHECK(stats.at(0, 0, qgru::GruTensor::x).count == static_cast<uint64_t>((3 * 4 + 5 * 1) * 8));
  CHECK(stats.at(0, 0, qgru::GruTensor::x).min == -0.5);
}

TEST_CASE("calibration data with the wrong C or rank is refused naming the file and shape") {
  if (!fs::exists(kModel)) return;
  TempDir dir;
  qgru::CalibrateOptions options;
  options.model_path = kModel;
  options.data_paths = {write_sequences(dir, "wide.npy", 2, 2, 9, 0.0f)};
  CHECK_THROWS_WITH(qgru::run_calibration(options),
                    (dir.file("wide.npy") + ": calibration data has C = 9 (shape [2, 2, 9]), the model's input_size is 8").c_str());
  const std::string flat = dir.file("flat.npy");
  qgru::write_npy(flat, qgru::Tensor::from_vector<float>({4, 8}, std::vector<float>(32, 0.0f)));
  options.data_paths = {flat};
  CHECK_THROWS_WITH(qgru::run_calibration(options),
                    (flat + ": calibration data has shape [4, 8], expected [T, N, C] with C = 8").c_str());
  options.data_paths = {};
  CHECK_THROWS_AS(qgru::run_calibration(options), qgru::Error);
  options.method = "entropy";
  options.data_paths = {flat};
  CHECK_THROWS_WITH(qgru::run_calibration(options),
                    "method 'entropy' is not one of minmax, ema, kl, percentile[:P], mse, bounds (each optionally +pow2)");
}

TEST_CASE("statistics ignore padded steps: what lies past a row's length changes nothing") {
  const qgru::FloatGruModel model = qgru::test::random_float_gru(3, 4, 2, 2, 31);
  const int T = 6, N = 3, C = 3;
  const std::vector<int32_t> lengths = {6, 2, 4};
  std::vector<float> x = qgru::test::random_input(static_cast<size_t>(T) * N * C, 32);
  std::vector<float> garbage = x;
  for (int n = 0; n < N; ++n) {
    for (int t = lengths[static_cast<size_t>(n)]; t < T; ++t) {
      for (int c = 0; c < C; ++c) garbage[(static_cast<size_t>(t) * N + n) * C + c] = 1000.0f;  // padding far off
    }
  }
  auto stats_of = [&](const std::vector<float>& data, const int32_t* l) {
    qgru::CalibrationStats stats = qgru::CalibrationStats::for_shape(2, 2, C, 4);
    qgru::observe_sequences(model, data, T, N, "x.npy", stats, l);
    return qgru::serialize_calibration_stats(stats);
  };
  CHECK(stats_of(x, lengths.data()) == stats_of(garbage, lengths.data()));
  CHECK(stats_of(x, nullptr) != stats_of(garbage, nullptr));  // without lengths the padding is observed
}
