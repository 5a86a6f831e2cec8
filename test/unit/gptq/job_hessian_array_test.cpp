// run_job with a Hessian held in memory (JobOptions::hessian_arrays, the Python package's qgru.Hessian): the
// same chunks accumulated outside the job give the checkpoint, the errors and the token count of the job that
// reads the chunks itself, one matrix serves several layers unchanged, and a wrong matrix or two sources for
// one layer are refused with one line naming the layer.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gptq_test_util.h"
#include "job_error.h"
#include "qgru/base/error.h"
#include "qgru/gptq/hessian.h"
#include "qgru/gptq/job.h"
#include "qgru/io/safetensors.h"

using qgru::Tensor;
namespace gptq = qgru::gptq;
using gptq_test::job_error;

namespace {

constexpr int64_t kK = 64;
constexpr int64_t kN = 16;

Tensor f32_tensor(const std::vector<int64_t>& shape, const std::vector<double>& values) {
  std::vector<float> floats(values.begin(), values.end());
  return Tensor::from_vector<float>(shape, floats);
}

// Two layers reading the same input (as q and k do), and two activation chunks of that input [M, K].
struct Case {
  qgru::SafetensorsFile weights;
  std::vector<std::pair<std::string, Tensor>> chunks;
  Case() {
    weights.tensors["q.weight"] = f32_tensor({kN, kK}, gptq_test::normal_values(kN * kK, 11));
    weights.tensors["k.weight"] = f32_tensor({kN, kK}, gptq_test::normal_values(kN * kK, 12));
    // Correlated features (rank 6 plus noise), token-major: X [K, M] transposed.
    for (int chunk = 0; chunk < 2; ++chunk) {
      const int64_t M = chunk == 0 ? 150 : 77;
      const std::vector<double> X = gptq_test::activations_kmajor(kK, M, 6, 40 + chunk);
      std::vector<double> rows(static_cast<size_t>(M * kK));
      for (int64_t k = 0; k < kK; ++k) {
        for (int64_t t = 0; t < M; ++t) rows[static_cast<size_t>(t * kK + k)] = X[static_cast<size_t>(k * M + t)];
      }
      chunks.emplace_back("chunk" + std::to_string(chunk), f32_tensor({M, kK}, rows));
    }
  }
};

gptq::JobOptions base_job(const Case& c, qgru::SafetensorsFile& checkpoint) {
  gptq::JobOptions job;
  job.weights_path = "weights (in memory)";
  job.weights = &c.weights;
  job.gptq.group_size = 32;
  job.checkpoint = &checkpoint;
  for (const char* tensor : {"q.weight", "k.weight"}) job.layers.push_back({tensor, {}, ""});
  return job;
}

}  // namespace

TEST_CASE("a Hessian accumulated outside the job equals the job's own accumulation, for every layer that shares it") {
  const Case c;
  for (const char* order : {"natural", "act-order", "group-aware"}) {
    CAPTURE(order);
    qgru::SafetensorsFile from_rows, from_matrix;
    gptq::JobOptions by_rows = base_job(c, from_rows);
    gptq::set_column_order(by_rows.gptq, order);
    for (const char* tensor : {"q.weight", "k.weight"}) by_rows.activation_arrays[tensor] = c.chunks;
    const std::vector<gptq::LayerReport> reports_rows = gptq::run_job(by_rows);

    gptq::HessianAccumulator accumulator(kK);
    for (const auto& [name, chunk] : c.chunks) accumulator.add_tensor(chunk, false, name);
    const auto shared = std::make_shared<const std::vector<double>>(accumulator.hessian());
    const std::vector<double> before = *shared;
    gptq::JobOptions by_matrix = base_job(c, from_matrix);
    gptq::set_column_order(by_matrix.gptq, order);
    for (const char* tensor : {"q.weight", "k.weight"}) {
      by_matrix.hessian_arrays[tensor] = {"H", shared, accumulator.tokens()};
    }
    const std::vector<gptq::LayerReport> reports_matrix = gptq::run_job(by_matrix);

    REQUIRE(from_rows.tensors.size() == 8);  // qweight, qzeros, scales, g_idx of both layers
    REQUIRE(from_matrix.tensors.size() == from_rows.tensors.size());
    for (const auto& entry : from_rows.tensors) {
      const std::string& name = entry.first;  // not a structured binding: CAPTURE's lambda takes it (C++17)
      CAPTURE(name);
      REQUIRE(from_matrix.tensors.count(name) == 1);
      CHECK(from_matrix.tensors.at(name).shape == entry.second.shape);
      CHECK(from_matrix.tensors.at(name).bytes == entry.second.bytes);
    }
    REQUIRE(reports_matrix.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(reports_matrix[i].tokens == 227);
      CHECK(reports_matrix[i].tokens == reports_rows[i].tokens);
      CHECK(reports_matrix[i].gptq_error == reports_rows[i].gptq_error);
      CHECK(reports_matrix[i].rtn_error == reports_rows[i].rtn_error);
      CHECK(reports_matrix[i].gptq_error < reports_matrix[i].rtn_error);  // GPTQ's feedback did something
    }
    CHECK(*shared == before);  // the job reads the shared matrix and never writes it
  }
}

TEST_CASE("the accumulator's Hessian is 2·X·Xᵀ of every chunk's rows (plain float64 sums)") {
  const Case c;
  gptq::HessianAccumulator accumulator(kK);
  std::vector<double> plain(static_cast<size_t>(kK * kK), 0.0);
  for (const auto& [name, chunk] : c.chunks) {
    accumulator.add_tensor(chunk, false, name);
    const std::vector<float> rows = qgru::tensor_to_f32(chunk);
    const int64_t M = chunk.shape[0];
    for (int64_t i = 0; i < kK; ++i) {
      for (int64_t j = 0; j < kK; ++j) {
        double sum = 0.0;
        for (int64_t t = 0; t < M; ++t) {
          sum += static_cast<double>(rows[static_cast<size_t>(t * kK + i)]) * rows[static_cast<size_t>(t * kK + j)];
        }
        plain[static_cast<size_t>(i * kK + j)] += 2.0 * sum;
      }
    }
  }
  const std::vector<double> H = accumulator.hessian();
  double largest_error = 0.0, largest = 0.0;
  for (size_t i = 0; i < H.size(); ++i) {
    largest_error = std::max(largest_error, std::abs(H[i] - plain[i]));
    largest = std::max(largest, std::abs(plain[i]));
  }
  CHECK(largest_error <= 1e-12 * largest);  // float64 sums of 227 products, in another order
  CHECK(accumulator.tokens() == 227);
}

TEST_CASE("an in-memory Hessian that is wrong, missing, or given beside another source is refused naming the layer") {
  const Case c;
  qgru::SafetensorsFile checkpoint;
  gptq::HessianAccumulator accumulator(kK);
  for (const auto& [name, chunk] : c.chunks) accumulator.add_tensor(chunk, false, name);
  const std::vector<double> good = accumulator.hessian();

  const auto job_with = [&](std::vector<double> H) {
    gptq::JobOptions job = base_job(c, checkpoint);
    job.layers.resize(1);
    job.hessian_arrays["q.weight"] = {"qgru.Hessian", std::make_shared<const std::vector<double>>(std::move(H)), 0};
    return job;
  };
  CHECK(job_error(job_with(std::vector<double>(static_cast<size_t>(kK * (kK - 1)), 1.0))) ==
        "qgru.Hessian (Hessian of 'q.weight'): Hessian holds 4032 values, expected [64, 64] (K from the weight)");
  std::vector<double> negative = good;
  negative[static_cast<size_t>(5 * kK + 5)] = -1.0;
  CHECK(job_error(job_with(negative)).find("qgru.Hessian (Hessian of 'q.weight'): Hessian diagonal entry [5, 5] is "
                                          "-1.0") == 0);
  std::vector<double> not_finite = good;
  not_finite[7] = std::numeric_limits<double>::quiet_NaN();
  CHECK(job_error(job_with(not_finite)).find("qgru.Hessian (Hessian of 'q.weight'): Hessian ") == 0);
  CHECK(job_error(job_with(not_finite)).find("finite") != std::string::npos);

  gptq::JobOptions both = job_with(good);
  both.activation_arrays["q.weight"] = c.chunks;
  CHECK(job_error(both) == "gptq: layer 'q.weight' is given more than one of activations, a Hessian file and a "
                          "Hessian in memory; give one");
  gptq::JobOptions none = base_job(c, checkpoint);
  CHECK(job_error(none) == "gptq: layer 'q.weight' has neither activations nor a Hessian");
  gptq::JobOptions empty = job_with(good);
  empty.hessian_arrays["q.weight"].H.reset();
  CHECK(job_error(empty) == "qgru.Hessian: no Hessian matrix (for 'q.weight')");
  CHECK(checkpoint.tensors.empty());  // nothing was produced by any refused job
}
