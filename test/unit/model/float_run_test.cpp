// Sequence files and the float run as one call: shapes checked against the model with exact messages,
// batch-first layouts, outputs written together or not at all.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <map>

#include "pytorch_reference.h"
#include "qgru/io/npy.h"
#include "qgru/io/safetensors.h"
#include "qgru/model/float_run.h"
#include "qgru/io/sequence_io.h"
#include "qgru/import/load_float_gru.h"

namespace fs = std::filesystem;

namespace {

// A fresh folder under the system temporary directory, removed at the end of the test.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name) {
    path = fs::temp_directory_path() / ("qgru_model_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> iota_values(size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(i) * 0.25f;
  return values;
}

// A random PyTorch-layout GRU in dir/m.safetensors, x [T, N, C] in dir/x.npy and h0 [L*D, N, H] in dir/h0.npy
// (seeds seed, seed + 1, seed + 2).
struct WrittenRun {
  std::map<std::string, qgru::Tensor> sd;
  std::vector<float> x, h0;
  qgru::FloatRunOptions options;  // reads the three files, writes dir/y.npy and dir/hn.npy
};
WrittenRun write_run_files(const ScratchDir& dir, const qgru_test::GruShape& shape, int T, int N, uint32_t seed) {
  WrittenRun run;
  run.sd = qgru_test::random_pytorch_gru(shape, seed, "rnn.");
  qgru::SafetensorsFile file;
  file.tensors = run.sd;
  qgru::write_safetensors(dir.file("m.safetensors"), file);
  run.x = qgru_test::random_values(static_cast<size_t>(T * N * shape.C), seed + 1);
  run.h0 = qgru_test::random_values(static_cast<size_t>(shape.L * shape.D * N * shape.H), seed + 2);
  qgru::write_npy(dir.file("x.npy"), qgru::Tensor::from_vector<float>({T, N, shape.C}, run.x));
  qgru::write_npy(dir.file("h0.npy"), qgru::Tensor::from_vector<float>({shape.L * shape.D, N, shape.H}, run.h0));
  run.options.model_path = dir.file("m.safetensors");
  run.options.input_path = dir.file("x.npy");
  run.options.h0_path = dir.file("h0.npy");
  run.options.output_path = dir.file("y.npy");
  run.options.hn_path = dir.file("hn.npy");
  return run;
}

}  // namespace

TEST_CASE("sequence input: C must match the model, rank 3, T and N positive, float and finite") {
  ScratchDir dir("sequence_input");
  const std::string x = dir.file("x.npy");
  qgru::write_npy(x, qgru::Tensor::from_vector<float>({5, 2, 7}, iota_values(70)));
  CHECK(error_of([&] { qgru::read_sequence_input(x, 8, false); }) ==
        x + ": expected [T, N, 8] with C = 8, got [5, 2, 7]");
  CHECK(error_of([&] { qgru::read_sequence_input(x, 8, true); }) ==
        x + ": expected [N, T, 8] (batch-first) with C = 8, got [5, 2, 7]");
  const auto batch = qgru::read_sequence_input(x, 7, false);
  CHECK(batch.T == 5);
  CHECK(batch.N == 2);
  CHECK(batch.C == 7);
  CHECK(batch.values == iota_values(70));

  qgru::write_npy(x, qgru::Tensor::from_vector<float>({10, 7}, iota_values(70)));
  CHECK(error_of([&] { qgru::read_sequence_input(x, 7, false); }) == x + ": expected [T, N, 7] with C = 7, got [10, 7]");
  qgru::write_npy(x, qgru::Tensor::from_vector<float>({0, 2, 7}, {}));
  CHECK(error_of([&] { qgru::read_sequence_input(x, 7, false); }) ==
        x + ": expected [T, N, 7] with C = 7 with T >= 1 and N >= 1, got [0, 2, 7]");
  qgru::write_npy(x, qgru::Tensor::from_vector<int64_t>({1, 1, 2}, {1, 2}));
  CHECK(error_of([&] { qgru::read_sequence_input(x, 2, false); }) ==
        x + ": expected a float array (float32, float64, float16, bfloat16), got I64");
  qgru::write_npy(x, qgru::Tensor::from_vector<double>({1, 1, 2}, {1.0, std::numeric_limits<double>::quiet_NaN()}));
  CHECK(error_of([&] { qgru::read_sequence_input(x, 2, false); }) ==
        x + ": element 1 is NaN (as float32); inputs must be finite");
  qgru::write_npy(x, qgru::Tensor::from_vector<double>({1, 1, 2}, {1e300, 0.0}));
  CHECK(error_of([&] { qgru::read_sequence_input(x, 2, false); }) ==
        x + ": element 0 is infinite (as float32); inputs must be finite");
}

TEST_CASE("batch-first input is transposed to time-major, and the output back") {
  ScratchDir dir("batch_first");
  const std::string x = dir.file("x.npy");
  // [N=2, T=3, C=2]: value = 100 n + 10 t + c.
  std::vector<float> ntc;
  for (int n = 0; n < 2; ++n)
    for (int t = 0; t < 3; ++t)
      for (int c = 0; c < 2; ++c) ntc.push_back(static_cast<float>(100 * n + 10 * t + c));
  qgru::write_npy(x, qgru::Tensor::from_vector<float>({2, 3, 2}, ntc));
  const auto batch = qgru::read_sequence_input(x, 2, true);
  REQUIRE(batch.T == 3);
  REQUIRE(batch.N == 2);
  for (int t = 0; t < 3; ++t)
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 2; ++c) CHECK(batch.values[static_cast<size_t>((t * 2 + n) * 2 + c)] == 100 * n + 10 * t + c);
  const qgru::Tensor back = qgru::sequence_output_tensor(batch.values, 3, 2, 2, true);
  CHECK(back.shape == std::vector<int64_t>{2, 3, 2});
  CHECK(qgru::tensor_to_f32(back) == ntc);
  CHECK(qgru::sequence_output_tensor(batch.values, 3, 2, 2, false).shape == std::vector<int64_t>{3, 2, 2});
}

TEST_CASE("initial state must be [L*D, N, H]") {
  ScratchDir dir("h0");
  const std::string h0 = dir.file("h0.npy");
  qgru::write_npy(h0, qgru::Tensor::from_vector<float>({2, 3, 4}, iota_values(24)));
  CHECK(qgru::read_initial_state(h0, 2, 3, 4) == iota_values(24));
  CHECK(error_of([&] { qgru::read_initial_state(h0, 1, 3, 4); }) ==
        h0 + ": expected h0 [L*D, N, H] = [1, 3, 4], got [2, 3, 4]");
}

TEST_CASE("float run writes y and h_n equal to the executor's, and nothing when an input is bad") {
  ScratchDir dir("float_run");
  const qgru_test::GruShape shape{3, 5, 2, 2};
  const int T = 4, N = 3;
  const WrittenRun written = write_run_files(dir, shape, T, N, 200);
  const auto& sd = written.sd;
  const auto& x = written.x;
  const auto& h0 = written.h0;
  qgru::FloatRunOptions options = written.options;
  const auto summary = qgru::run_float_files(options);
  const auto model = qgru::float_gru_from_tensors(sd, qgru::WeightLayout::Auto, "memory");
  const auto expected = qgru::run_float_gru(model, x.data(), T, N, h0.data());
  const qgru::Tensor y = qgru::read_npy(dir.file("y.npy"));
  const qgru::Tensor hn = qgru::read_npy(dir.file("hn.npy"));
  CHECK(y.shape == std::vector<int64_t>{T, N, 2 * shape.H});
  CHECK(hn.shape == std::vector<int64_t>{4, N, shape.H});
  CHECK(qgru::tensor_to_f32(y) == expected.output);
  CHECK(qgru::tensor_to_f32(hn) == expected.h_n);
  CHECK(summary.output_shape == y.shape);
  CHECK(summary.min <= summary.mean);
  CHECK(summary.mean <= summary.max);
  CHECK(summary.min < summary.max);

  // A wrong-shape h0: the error names it and neither output appears.
  fs::remove(dir.file("y.npy"));
  fs::remove(dir.file("hn.npy"));
  qgru::write_npy(dir.file("h0.npy"), qgru::Tensor::from_vector<float>({1, N, shape.H}, iota_values(15)));
  CHECK(error_of([&] { qgru::run_float_files(options); }) ==
        dir.file("h0.npy") + ": expected h0 [L*D, N, H] = [4, 3, 5], got [1, 3, 5]");
  CHECK_FALSE(fs::exists(dir.file("y.npy")));
  CHECK_FALSE(fs::exists(dir.file("hn.npy")));
}

TEST_CASE("float run hands the sequence lengths and h0 to a device executor, whose outputs it writes") {
  ScratchDir dir("float_run_device");
  const qgru_test::GruShape shape{3, 4, 1, 2};
  const int T = 5, N = 3;
  const WrittenRun run = write_run_files(dir, shape, T, N, 210);
  const std::vector<int32_t> lengths{5, 0, 2};
  qgru::write_npy(dir.file("lengths.npy"), qgru::Tensor::from_vector<int32_t>({N}, lengths));

  // The executor a --device cuda run installs, stood in for by the CPU executor: it must be handed the file's
  // lengths and h0.
  std::vector<int32_t> seen_lengths;
  bool saw_h0 = false;
  qgru::FloatRunOptions options = run.options;
  options.lengths_path = dir.file("lengths.npy");
  options.device_executor_name = "stand-in";
  options.device_executor = [&](const qgru::FloatGruModel& model, const float* in, int T_, int N_, const float* h0_in,
                                const int32_t* lengths_in) {
    if (lengths_in != nullptr) seen_lengths.assign(lengths_in, lengths_in + N_);
    saw_h0 = h0_in != nullptr;
    return qgru::run_float_gru(model, in, T_, N_, h0_in, nullptr, lengths_in);
  };
  const auto summary = qgru::run_float_files(options);
  CHECK(summary.executor == "stand-in");
  CHECK(seen_lengths == lengths);
  CHECK(saw_h0);
  const auto model = qgru::float_gru_from_tensors(run.sd, qgru::WeightLayout::Auto, "memory");
  const auto expected = qgru::run_float_gru(model, run.x.data(), T, N, run.h0.data(), nullptr, lengths.data());
  CHECK(qgru::tensor_to_f32(qgru::read_npy(dir.file("y.npy"))) == expected.output);
  CHECK(qgru::tensor_to_f32(qgru::read_npy(dir.file("hn.npy"))) == expected.h_n);
  // Row 1 has length 0: every output of it is padding (0), and its h_n is its h0.
  const qgru::Tensor y = qgru::read_npy(dir.file("y.npy"));
  const std::vector<float> y_values = qgru::tensor_to_f32(y);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < shape.D * shape.H; ++j) CHECK(y_values[static_cast<size_t>((t * N + 1) * shape.D * shape.H + j)] == 0.0f);
  const std::vector<float> hn_values = qgru::tensor_to_f32(qgru::read_npy(dir.file("hn.npy")));
  for (int cell = 0; cell < shape.L * shape.D; ++cell)
    for (int j = 0; j < shape.H; ++j) {
      const size_t i = static_cast<size_t>((cell * N + 1) * shape.H + j);
      CHECK(hn_values[i] == run.h0[i]);
    }
}
