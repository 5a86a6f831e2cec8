// run_job and the quantize_config.json already in its output folder: checked before the work, and again
// under the folder's lock when the checkpoint is renamed into place; a job that writes nothing checks no
// folder.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gptq_test_util.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/job.h"
#include "qgru/io/safetensors.h"

namespace fs = std::filesystem;
namespace gptq = qgru::gptq;

namespace {

struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("qgru_" + name + "_" + std::to_string(getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

// One layer [N, K] = [8, 64] with seeded weights and activations, held in memory.
struct InMemoryLayer {
  qgru::SafetensorsFile weights;
  gptq::JobOptions job;
  InMemoryLayer() {
    const int64_t N = 8, K = 64, M = 256;
    const auto W = gptq_test::normal_values(static_cast<size_t>(N * K), 7);
    weights.tensors["fc.weight"] = qgru::Tensor::from_vector<float>({N, K}, std::vector<float>(W.begin(), W.end()));
    const auto X = gptq_test::normal_values(static_cast<size_t>(M * K), 8);  // [M, K]: token-major
    job.weights_path = "weights (in memory)";
    job.weights = &weights;
    job.layers.push_back({"fc.weight", {}, ""});
    job.activation_arrays["fc.weight"].emplace_back(
        "activations", qgru::Tensor::from_vector<float>({M, K}, std::vector<float>(X.begin(), X.end())));
    job.gptq.group_size = 32;
  }
};

std::string config_with_bits(int bits) {
  gptq::QuantizeConfig config;
  config.bits = bits;
  return gptq::quantize_config_json(config);
}

}  // namespace

TEST_CASE("a quantize_config.json another writer puts in the folder during the work is never replaced") {
  const Scratch scratch("gptq_folder_race");
  InMemoryLayer layer;
  layer.job.output_path = scratch.path("fc.safetensors");
  const std::string config_path = scratch.path("quantize_config.json");
  const std::string theirs = config_with_bits(8);  // 8-bit checkpoints; this job writes 4-bit ones
  std::string error;
  try {
    // The folder is empty when the job starts (the early check passes); the other writer's config lands
    // after the layer is quantized, before the checkpoint is written.
    gptq::run_job(layer.job, [&](const gptq::LayerReport&) { qgru::write_file_atomic(config_path, theirs); });
  } catch (const qgru::Error& e) {
    error = e.what();
  }
  CHECK(error.find(config_path + " describes the checkpoints already in that folder (bits") == 0);
  CHECK(error.find(layer.job.output_path + " would change how they are read") != std::string::npos);
  CHECK_FALSE(fs::exists(layer.job.output_path));
  CHECK(qgru::read_file_text(config_path) == theirs);
  CHECK(std::distance(fs::directory_iterator(scratch.dir), fs::directory_iterator()) == 1);  // no temporary
}

TEST_CASE("a job that writes nothing ignores the quantize_config.json of the working folder") {
  const Scratch scratch("gptq_in_memory_cwd");
  qgru::write_file_atomic(scratch.path("quantize_config.json"), config_with_bits(8));
  const fs::path before = fs::current_path();
  fs::current_path(scratch.dir);
  InMemoryLayer layer;  // output_path empty: the checkpoint only in memory
  qgru::SafetensorsFile checkpoint;
  layer.job.checkpoint = &checkpoint;
  std::string error;
  try {
    gptq::run_job(layer.job);
  } catch (const qgru::Error& e) {
    error = e.what();
  }
  fs::current_path(before);
  CHECK(error.empty());
  CHECK(checkpoint.tensors.count("fc.qweight") == 1);
  CHECK(std::distance(fs::directory_iterator(scratch.dir), fs::directory_iterator()) == 1);
}
