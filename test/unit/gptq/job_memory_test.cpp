// run_job bounds the memory of a layer's K×K matrices before allocating them or reading any activation:
// K comes from a small file ([8, 262144] F16 is 4 MiB and would ask for 2 TiB).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gptq_test_util.h"
#include "job_error.h"
#include "qgru/base/error.h"
#include "qgru/gptq/job.h"
#include "qgru/io/npy.h"
#include "qgru/io/safetensors.h"

using qgru::DType;
using qgru::Tensor;
namespace gptq = qgru::gptq;
using gptq_test::job_error;

namespace {

struct Scratch {
  std::filesystem::path dir;
  explicit Scratch(const std::string& name) : dir(std::filesystem::temp_directory_path() / ("qgru_" + name)) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

// A weights file with one zero weight [N, K] of `dtype` under "layer.weight".
std::string write_weight(const Scratch& scratch, int64_t N, int64_t K, DType dtype) {
  qgru::SafetensorsFile file;
  Tensor weight;
  weight.dtype = dtype;
  weight.shape = {N, K};
  weight.bytes.assign(static_cast<size_t>(N * K) * qgru::dtype_size(dtype), 0);
  file.tensors["layer.weight"] = std::move(weight);
  const std::string path = scratch.path("w.safetensors");
  qgru::write_safetensors(path, file);
  return path;
}

gptq::JobOptions job_for(const std::string& weights, const std::string& activations, const Scratch& scratch) {
  gptq::JobOptions options;
  options.weights_path = weights;
  options.layers.push_back({"layer.weight", {activations}, ""});
  options.output_path = scratch.path("out.safetensors");
  return options;
}

}  // namespace

TEST_CASE("hessian_bytes_needed counts four K×K float64 matrices (five when H is saved) and saturates") {
  CHECK(gptq::hessian_bytes_needed(64, false) == 4u * 64u * 64u * 8u);
  CHECK(gptq::hessian_bytes_needed(64, true) == 5u * 64u * 64u * 8u);
  CHECK(gptq::hessian_bytes_needed(int64_t{1} << 20, false) == uint64_t{1} << 45);
  CHECK(gptq::hessian_bytes_needed(int64_t{1} << 31, false) == UINT64_MAX);  // 2^62 · 32 bytes
  CHECK(gptq::hessian_bytes_needed(int64_t{1} << 33, false) == UINT64_MAX);  // K·K alone overflows
}

TEST_CASE("a layer over the memory bound is refused naming the tensor, before any activation is read") {
  const Scratch scratch("gptq_job_memory_bound");
  const std::string weights = write_weight(scratch, 8, 4096, DType::F32);  // 128 KiB asking for 512 MiB
  // The activation file does not exist: reading it first would give a different message.
  gptq::JobOptions options = job_for(weights, scratch.path("absent.npy"), scratch);
  options.max_hessian_bytes = uint64_t{64} << 20;
  const std::string error = job_error(options);
  CHECK(error.find(weights + ": tensor 'layer.weight' is [8, 4096]: GPTQ needs") == 0);
  CHECK(error.find("(512.0 MiB for K = 4096), more than the 64.0 MiB allowed") != std::string::npos);
  CHECK(!std::filesystem::exists(options.output_path));
}

TEST_CASE("K that no machine could hold is refused under the default bound (physical memory)") {
  const Scratch scratch("gptq_job_memory_default");
  const std::string weights = write_weight(scratch, 8, int64_t{1} << 18, DType::F16);  // 4 MiB: 2 TiB of H
  const gptq::JobOptions options = job_for(weights, scratch.path("absent.npy"), scratch);
  const std::string error = job_error(options);
  CHECK(error.find(weights + ": tensor 'layer.weight' is [8, 262144]: GPTQ needs") == 0);
  CHECK(error.find("(2.0 TiB for K = 262144)") != std::string::npos);
  CHECK(error.find("of memory this machine has") != std::string::npos);
}

TEST_CASE("the memory bound is inclusive: a layer needing exactly the bound runs, one byte less is refused") {
  const Scratch scratch("gptq_job_memory_edge");
  const int64_t N = 8, K = 64, M = 256;
  const std::string weights = write_weight(scratch, N, K, DType::F32);
  const std::vector<double> X = gptq_test::activations_kmajor(K, M, 0, 7);  // [K, M]
  std::vector<float> tokens(static_cast<size_t>(M * K));
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t t = 0; t < M; ++t) tokens[static_cast<size_t>(t * K + k)] = static_cast<float>(X[static_cast<size_t>(k * M + t)]);
  }
  const std::string activations = scratch.path("x.npy");
  qgru::write_npy(activations, Tensor::from_vector<float>({M, K}, tokens));
  gptq::JobOptions options = job_for(weights, activations, scratch);
  options.max_hessian_bytes = gptq::hessian_bytes_needed(K, false) - 1;
  CHECK(job_error(options).find("tensor 'layer.weight' is [8, 64]: GPTQ needs") != std::string::npos);
  // A small layer's size in a unit that shows it (4·64·64·8 bytes), not "0.0 GiB".
  CHECK(job_error(options).find("(128.0 KiB for K = 64), more than the 128.0 KiB allowed") != std::string::npos);
  CHECK(!std::filesystem::exists(options.output_path));
  options.max_hessian_bytes = gptq::hessian_bytes_needed(K, false);
  const auto reports = gptq::run_job(options);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].tokens == M);
  CHECK(std::filesystem::exists(options.output_path));
}

TEST_CASE("activations of the wrong width are refused naming the file before the Hessian is allocated") {
  const Scratch scratch("gptq_job_activation_check");
  const std::string weights = write_weight(scratch, 8, 64, DType::F32);
  const std::string activations = scratch.path("x.npy");
  qgru::write_npy(activations, Tensor::from_vector<float>({5, 3}, std::vector<float>(15, 1.0f)));
  const std::string error = job_error(job_for(weights, activations, scratch));
  CHECK(error.find(activations + " (activations of 'layer.weight'): activations have shape [5, 3]") == 0);
  CHECK(error.find("K = 64 (the weight's input size)") != std::string::npos);
}
