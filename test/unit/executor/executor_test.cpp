// The executor chooser (qgru/runtime/executor.h): what it picks, the fallbacks it reports with their reasons, and
// that what it picks computes the reference executor's codes.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/executor.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

test::CalibratedCase small_case() {
  return test::calibrated_case(/*C=*/12, /*H=*/32, /*L=*/2, /*D=*/2, /*T=*/6, /*N=*/3, load_bitwidth_config("int8"), 7u);
}

// The reference executor's codes, the specification every chosen executor must meet.
void check_same_codes(const Executor& executor, const test::CalibratedCase& c) {
  const QuantGruResult reference = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  const QuantGruResult got = executor.run(c.x.data(), c.T, c.N, nullptr);
  CHECK(got.output_codes == reference.output_codes);
  CHECK(got.h_n_codes == reference.h_n_codes);
  std::vector<int32_t> q_x = quantize_values(c.quantized.input_quant(), c.x.data(), c.x.size());
  const QuantGruResult from_codes = executor.run_codes(q_x.data(), c.T, c.N, nullptr);
  CHECK(from_codes.output_codes == reference.output_codes);
}

TEST_CASE("executor chooser: the CPU's fast executor where the fast path applies, named by its level") {
  const test::CalibratedCase c = small_case();
  const FastPathSupport support = fast_path_support(c.quantized);
  const std::unique_ptr<Executor> executor = make_executor(c.quantized, ExecutorRequest{});
  CHECK_FALSE(executor->on_device());
  if (support.supported) {
    CHECK(executor->name() == "fast (" + support.isa + ")");
    CHECK(executor->fallbacks().empty());
  } else {  // a CPU without AVX2: the reference, with the fast path's reason
    CHECK(executor->name() == "reference (fast path: " + support.reason + ")");
    REQUIRE(executor->fallbacks().size() == 1);
  }
  CHECK(executor->make_stepper(c.N) != nullptr);
  check_same_codes(*executor, c);
}

TEST_CASE("executor chooser: the reference on request, and when the fast path refuses, with the reason") {
  const test::CalibratedCase c = small_case();
  ExecutorRequest reference;
  reference.executor = "reference";
  const std::unique_ptr<Executor> asked = make_executor(c.quantized, reference);
  CHECK(asked->name() == "reference");
  CHECK(asked->fallbacks().empty());
  check_same_codes(*asked, c);

  ExecutorRequest no_simd;
  no_simd.fast.allow_simd = false;
  const std::unique_ptr<Executor> refused = make_executor(c.quantized, no_simd);
  CHECK(refused->name() == "reference (fast path: SIMD disabled by the caller)");
  REQUIRE(refused->fallbacks().size() == 1);
  CHECK(refused->fallbacks()[0].from == "fast");
  CHECK(refused->fallbacks()[0].to == "reference");
  CHECK(refused->fallbacks()[0].reason == "SIMD disabled by the caller");
  check_same_codes(*refused, c);
}

TEST_CASE("executor chooser: --device and --executor words") {
  CHECK(parse_executor_device("cpu") == ExecutorDevice::Cpu);
  CHECK(parse_executor_device("cuda") == ExecutorDevice::Cuda);
  CHECK(parse_executor_device("auto") == ExecutorDevice::Auto);
  CHECK_THROWS_WITH_AS(parse_executor_device("gpu"), "--device gpu: expected cpu, cuda or auto", Error);
  const test::CalibratedCase c = small_case();
  ExecutorRequest bogus;
  bogus.executor = "fastest";
  CHECK_THROWS_WITH_AS(make_executor(c.quantized, bogus), "--executor fastest: expected fast or reference", Error);
}

TEST_CASE("executor chooser: auto takes the device when usable, else the CPU with the reason; cuda refuses") {
  const test::CalibratedCase c = small_case();
  ExecutorRequest automatic;
  automatic.device = ExecutorDevice::Auto;
  const std::unique_ptr<Executor> chosen = make_executor(c.quantized, automatic);
  ExecutorRequest cuda;
  cuda.device = ExecutorDevice::Cuda;
  if (chosen->on_device()) {  // a usable GPU: both requests give the CUDA executor (its codes: the GPU self-test)
    CHECK(chosen->name() == "cuda");
    CHECK(make_executor(c.quantized, cuda)->on_device());
    return;
  }
  REQUIRE_FALSE(chosen->fallbacks().empty());
  CHECK(chosen->fallbacks()[0].from == "cuda");
  CHECK(chosen->fallbacks()[0].to == "cpu");
  CHECK_FALSE(chosen->fallbacks()[0].reason.empty());
  check_same_codes(*chosen, c);
  // cuda asked for and not usable: an ExecutorError saying why (not built, or no usable device).
  bool refused = false;
  try {
    make_executor(c.quantized, cuda);
  } catch (const ExecutorError& e) {
    refused = true;
    CHECK(e.kind() == (executor_cuda_built() ? ExecutorError::Kind::NoDevice : ExecutorError::Kind::NotBuilt));
    CHECK(e.reason() == chosen->fallbacks()[0].reason);
  }
  CHECK(refused);
}

}  // namespace
}  // namespace qgru
