// Gate activations (qgru/fixed/activation.h, qgru/runtime/activation_tables.h) checked exhaustively over
// every input code against an independent long-double reference, plus the artifact round trip and the
// refusal of malformed artifact data.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/base/error.h"
#include "qgru/fixed/activation.h"
#include "qgru/fixed/activation_buckets.h"
#include "qgru/runtime/activation_tables.h"
#include "qgru/quant/activation_generation.h"

namespace {

using qgru::ActivationFunction;
using qgru::ActivationImpl;
using qgru::TensorQuant;

TensorQuant make_quant(int bits, bool is_unsigned, bool symmetric, int shift, int32_t zp) {
  TensorQuant quant;
  quant.bits = bits;
  quant.is_unsigned = is_unsigned;
  quant.symmetric = symmetric;
  quant.shift = shift;
  quant.zp = zp;
  return quant;
}

// The int8 preset's gate output tensors: sigmoid into UINT (scale 2^-bits covers [0, 1)), tanh into symmetric INT
// (scale 2^-(bits-1) covers [-1, 1)).
TensorQuant sigmoid_output(int bits) { return make_quant(bits, true, false, bits, 0); }
TensorQuant tanh_output(int bits) { return make_quant(bits, false, true, bits - 1, 0); }
TensorQuant output_for(ActivationFunction function, int bits) {
  return function == ActivationFunction::Sigmoid ? sigmoid_output(bits) : tanh_output(bits);
}

// The correctly rounded output code, computed independently of the library: long double, round half
// away from zero by hand, then clamp.
int32_t reference_code(ActivationFunction function, const TensorQuant& input, const TensorQuant& output, int64_t q_in) {
  const long double x = std::ldexp(static_cast<long double>(q_in - input.zp), -input.shift);
  const long double y = function == ActivationFunction::Sigmoid ? 1.0L / (1.0L + std::exp(-x)) : std::tanh(x);
  const long double scaled = std::ldexp(y, output.shift);
  const long double rounded = (scaled < 0 ? -std::floor(-scaled + 0.5L) : std::floor(scaled + 0.5L)) + output.zp;
  if (rounded < output.qmin()) return output.qmin();
  if (rounded > output.qmax()) return output.qmax();
  return static_cast<int32_t>(rounded);
}

// The Pwl data read the way the view documents it (segment by linear scan, the line in long double, which
// holds |q_b * q + term_c| < 2^53 exactly), independently of evaluate_activation's integer code.
int32_t reference_pwl(const qgru::ActivationTables& tables, int64_t q_in) {
  size_t segment = 0;
  while (segment + 1 < tables.pwl_threshold.size() && tables.pwl_threshold[segment + 1] <= q_in) ++segment;
  const long double scaled =
      std::ldexp(static_cast<long double>(tables.pwl_q_b[segment]) * static_cast<long double>(q_in) +
                     static_cast<long double>(tables.pwl_term_c[segment]),
                 -tables.pwl_shift[segment]);
  const long double rounded = scaled < 0 ? -std::floor(-scaled + 0.5L) : std::floor(scaled + 0.5L);
  if (rounded < tables.output.qmin()) return tables.output.qmin();
  if (rounded > tables.output.qmax()) return tables.output.qmax();
  return static_cast<int32_t>(rounded);
}

struct Measured {
  int64_t max_lsb = 0;
  double mean_lsb = 0.0;
};

// Every input code: the evaluated activation against the long-double reference; the Pwl integer
// evaluation against its long-double reading (exactly); the data inside the bounds that make the
// evaluation overflow-free; and the library's own measurement agreeing with this one.
Measured check_exhaustively(const qgru::ActivationTables& tables, bool expect_monotone = true) {
  const qgru::ActivationView view = tables.view();
  if (tables.impl == ActivationImpl::Pwl) {
    REQUIRE(!tables.pwl_threshold.empty());
    CHECK(tables.segments == static_cast<int>(tables.pwl_threshold.size()));
    CHECK(tables.pwl_threshold.front() == tables.input.qmin());
    for (size_t i = 0; i < tables.pwl_threshold.size(); ++i) {
      if (i > 0) CHECK(tables.pwl_threshold[i] > tables.pwl_threshold[i - 1]);
      CHECK(tables.pwl_shift[i] >= 0);
      CHECK(tables.pwl_shift[i] <= qgru::kActivationPwlMaxShift);
      CHECK(std::llabs(tables.pwl_term_c[i]) <= qgru::kActivationPwlMaxTermC);
    }
  }
  Measured measured;
  double sum = 0.0;
  int64_t first_bad_pwl = std::numeric_limits<int64_t>::min();
  int64_t first_decrease = std::numeric_limits<int64_t>::min();
  int32_t previous = std::numeric_limits<int32_t>::min();
  // The device copies' bucket index (activation_buckets.h) must find the same segment for every code.
  const qgru::PwlBuckets buckets = tables.impl == ActivationImpl::Pwl ? qgru::pwl_buckets(view) : qgru::PwlBuckets{};
  const qgru::ActivationView bucketed = qgru::with_pwl_buckets(view, buckets);
  int64_t first_bucket_mismatch = std::numeric_limits<int64_t>::min();
  for (int64_t q_in = tables.input.qmin(); q_in <= tables.input.qmax(); ++q_in) {
    const int32_t got = qgru::evaluate_activation(view, static_cast<int32_t>(q_in));
    if (tables.impl == ActivationImpl::Pwl && first_bucket_mismatch == std::numeric_limits<int64_t>::min() &&
        (qgru::find_pwl_segment(bucketed, static_cast<int32_t>(q_in)) != qgru::find_pwl_segment(view, static_cast<int32_t>(q_in)) ||
         qgru::evaluate_activation(bucketed, static_cast<int32_t>(q_in)) != got)) {
      first_bucket_mismatch = q_in;
    }
    if (got < previous && first_decrease == std::numeric_limits<int64_t>::min()) first_decrease = q_in;
    previous = got;
    if (tables.impl == ActivationImpl::Pwl && got != reference_pwl(tables, q_in) &&
        first_bad_pwl == std::numeric_limits<int64_t>::min()) {
      first_bad_pwl = q_in;
    }
    const int64_t lsb = std::llabs(int64_t{got} - reference_code(tables.function, tables.input, tables.output, q_in));
    measured.max_lsb = std::max(measured.max_lsb, lsb);
    sum += static_cast<double>(lsb);
  }
  measured.mean_lsb = sum / static_cast<double>(int64_t{tables.input.qmax()} - tables.input.qmin() + 1);
  // sigmoid and tanh increase: a larger gate input must never give a smaller gate output. The generator
  // keeps the breakpoints monotone when a nudge of at most 1 LSB does it, which is the case at the
  // default segment counts; far coarser fits (tens of LSB) may step down at a breakpoint.
  if (expect_monotone) CHECK_MESSAGE(first_decrease == std::numeric_limits<int64_t>::min(),
                "the output decreases at q_in = " << first_decrease);
  CHECK_MESSAGE(first_bad_pwl == std::numeric_limits<int64_t>::min(),
                "integer Pwl evaluation differs from its long-double reading at q_in = " << first_bad_pwl);
  CHECK_MESSAGE(first_bucket_mismatch == std::numeric_limits<int64_t>::min(),
                "the bucket index finds another segment or output than the plain search at q_in = " << first_bucket_mismatch);
  const qgru::ActivationError library = qgru::measure_activation_error(tables);
  CHECK(library.max_lsb_error == measured.max_lsb);
  CHECK(library.mean_abs_lsb_error == doctest::Approx(measured.mean_lsb));
  return measured;
}

std::string describe(const qgru::ActivationTables& tables) {
  return std::string(qgru::activation_function_name(tables.function)) + " " +
         qgru::activation_impl_name(tables.impl) + " segments=" + std::to_string(tables.segments) +
         " in=" + qgru::describe_quant(tables.input) + " out=" + qgru::describe_quant(tables.output);
}

}  // namespace

TEST_CASE("an 8-bit gate activation stays within 1 LSB (pwl) and is exact (table) for every input code") {
  const int segments = qgru::default_pwl_segments(8);
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (int shift_in = 3; shift_in <= 7; ++shift_in) {
      for (int32_t zp_in : {-37, -5, 0, 1, 64}) {
        const TensorQuant input = make_quant(8, false, false, shift_in, zp_in);
        const TensorQuant output = output_for(function, 8);
        const auto table = qgru::generate_activation(function, ActivationImpl::Table, 0, input, output);
        const auto pwl = qgru::generate_activation(function, ActivationImpl::Pwl, segments, input, output);
        CAPTURE(describe(pwl));
        CHECK(table.table.size() == 256);
        CHECK(check_exhaustively(table).max_lsb == 0);
        CHECK(pwl.segments <= segments);
        CHECK(check_exhaustively(pwl).max_lsb <= 1);
      }
    }
  }
}

TEST_CASE("small and odd widths: tables exact, pwl within 1 LSB with the default segment count") {
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (int bits_in : {2, 3, 4, 6, 10, 12}) {
      for (int bits_out : {2, 4, 8}) {
        const TensorQuant input = make_quant(bits_in, false, false, bits_in - 3, bits_in > 3 ? 1 : 0);
        const TensorQuant output = output_for(function, bits_out);
        const auto table = qgru::generate_activation(function, ActivationImpl::Table, 0, input, output);
        const auto pwl =
            qgru::generate_activation(function, ActivationImpl::Pwl, qgru::default_pwl_segments(bits_out), input, output);
        CAPTURE(describe(pwl));
        CHECK(check_exhaustively(table).max_lsb == 0);
        CHECK(check_exhaustively(pwl).max_lsb <= 1);
      }
    }
  }
}

TEST_CASE("an unsigned input and an asymmetric output with a zero point are handled") {
  // Input codes 0..255 with zp 100; sigmoid output as signed asymmetric 8-bit with zp -128.
  const TensorQuant input = make_quant(8, true, false, 5, 100);
  const TensorQuant output = make_quant(8, false, false, 8, -128);
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    const auto table = qgru::generate_activation(function, ActivationImpl::Table, 0, input, output);
    const auto pwl = qgru::generate_activation(function, ActivationImpl::Pwl, 16, input, output);
    CAPTURE(describe(pwl));
    CHECK(check_exhaustively(table).max_lsb == 0);
    CHECK(check_exhaustively(pwl).max_lsb <= 1);
  }
}

TEST_CASE("the default segment count keeps every output width 2..16 within 1 LSB") {
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (int bits_out = 2; bits_out <= 16; ++bits_out) {
      std::vector<TensorQuant> inputs = {make_quant(8, false, false, 4, 3), make_quant(8, false, false, 6, -11)};
      if (bits_out % 4 == 0) inputs.push_back(make_quant(16, false, false, 12, -37));  // 16-bit inputs cost more
      for (const TensorQuant& input : inputs) {
        const auto pwl = qgru::generate_activation(function, ActivationImpl::Pwl, qgru::default_pwl_segments(bits_out),
                                                   input, output_for(function, bits_out));
        CAPTURE(describe(pwl));
        CHECK(check_exhaustively(pwl).max_lsb <= 1);
      }
    }
  }
}

// 16-bit outputs: the max error per segment count, exhaustively, for 8- and 16-bit inputs. The bounds
// asserted here are the figures stated next to default_pwl_segments().
TEST_CASE("16-bit pwl error shrinks with the segment count and stays within the documented bounds") {
  struct Bound {
    int segments;
    int64_t max_lsb;
  };
  const Bound bounds[] = {{16, 125}, {32, 27}, {64, 7}, {128, 2}};
  std::string figures;  // one line per configuration: the max error for each segment count
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (int bits_in : {8, 16}) {
      for (int shift_in : {bits_in - 4, bits_in - 3}) {
        const TensorQuant input = make_quant(bits_in, false, false, shift_in, bits_in == 16 ? -300 : 3);
        const TensorQuant output = output_for(function, 16);
        int64_t previous = std::numeric_limits<int64_t>::max();
        figures += std::string("\n  ") + qgru::activation_function_name(function) + " in=" +
                   qgru::describe_quant(input) + " out=16 bits, max LSB at 16/32/64/128 segments:";
        for (const Bound& bound : bounds) {
          const auto pwl = qgru::generate_activation(function, ActivationImpl::Pwl, bound.segments, input, output);
          CAPTURE(describe(pwl));
          const Measured measured = check_exhaustively(pwl, bound.max_lsb <= 2);
          figures += " " + std::to_string(measured.max_lsb);
          CHECK(measured.max_lsb <= bound.max_lsb);
          CHECK(measured.max_lsb <= previous);
          previous = measured.max_lsb;
        }
      }
    }
  }
  if (std::getenv("QGRU_TEST_VERBOSE")) MESSAGE("16-bit pwl errors:" << figures);
}

TEST_CASE("extreme scales and zero points stay overflow-free: the integer evaluation equals its exact reading") {
  struct Case {
    TensorQuant input;
    TensorQuant output;
  };
  const Case cases[] = {
      // 16-bit unsigned input at the far end of its codes, 16-bit unsigned output with a large zero point.
      {make_quant(16, true, false, 12, 65535), make_quant(16, true, false, 14, 40000)},
      {make_quant(16, true, false, 12, 0), make_quant(16, false, false, 15, -32768)},
      // Coarse input (one code = 1.0): steep slopes, about 2^15 output codes per input code.
      {make_quant(16, false, false, 0, 0), make_quant(16, false, true, 15, 0)},
      // Fine input (x within +-2^-4): almost linear, small slopes and large shifts.
      {make_quant(16, false, false, 19, 1000), make_quant(16, false, true, 15, 0)},
      // Negative input shift: x = (q - zp) * 4, saturated almost everywhere.
      {make_quant(8, false, false, -2, 5), make_quant(16, true, false, 16, 0)},
  };
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (const Case& c : cases) {
      const auto pwl = qgru::generate_activation(function, ActivationImpl::Pwl, qgru::default_pwl_segments(16), c.input,
                                                 c.output);
      CAPTURE(describe(pwl));
      const Measured measured = check_exhaustively(pwl);
      CHECK(measured.max_lsb <= 1);
    }
  }
  // An output scale so fine that one input code spans the whole output range many times over: the target
  // is clamped to the output codes, so slopes stay below 2^17 codes per input code and the fit is exact.
  const auto steep = qgru::generate_activation(ActivationFunction::Tanh, ActivationImpl::Pwl, 16,
                                               make_quant(8, false, false, -8, 0), make_quant(16, false, false, 40, 0));
  CHECK(check_exhaustively(steep).max_lsb == 0);
}

TEST_CASE("out-of-range input codes saturate to the ends of the input range") {
  const TensorQuant input = make_quant(8, false, false, 5, -5);
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (ActivationImpl impl : {ActivationImpl::Table, ActivationImpl::Pwl}) {
      const auto tables = qgru::generate_activation(function, impl, 16, input, output_for(function, 8));
      const qgru::ActivationView view = tables.view();
      const int32_t at_min = qgru::evaluate_activation(view, -128);
      const int32_t at_max = qgru::evaluate_activation(view, 127);
      CHECK(at_min < at_max);
      for (int32_t q_in : {-129, -1000, std::numeric_limits<int32_t>::min()}) CHECK(qgru::evaluate_activation(view, q_in) == at_min);
      for (int32_t q_in : {128, 1000, std::numeric_limits<int32_t>::max()}) CHECK(qgru::evaluate_activation(view, q_in) == at_max);
    }
  }
}

TEST_CASE("fewer segments than stretches still gives valid data; more segments than codes are not used") {
  const TensorQuant input = make_quant(8, false, false, 3, 0);  // x in [-16, 16): both clamps reached
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (int segments : {1, 2, 3, 5}) {
      const auto pwl = qgru::generate_activation(function, ActivationImpl::Pwl, segments, input, output_for(function, 8));
      CAPTURE(describe(pwl));
      CHECK(pwl.segments <= segments);
      check_exhaustively(pwl);
    }
    const TensorQuant tiny = make_quant(3, false, false, 1, 0);
    const auto many = qgru::generate_activation(function, ActivationImpl::Pwl, 1000, tiny, output_for(function, 8));
    CHECK(many.segments <= 8);
    CHECK(check_exhaustively(many).max_lsb == 0);
  }
}

TEST_CASE("generation refuses a table for a 13-bit input, zero segments and widths beyond 16 bits") {
  const TensorQuant wide = make_quant(13, false, false, 9, 0);
  CHECK_THROWS_AS(qgru::generate_activation(ActivationFunction::Sigmoid, ActivationImpl::Table, 0, wide,
                                            sigmoid_output(8)),
                  qgru::Error);
  CHECK_NOTHROW(qgru::generate_activation(ActivationFunction::Sigmoid, ActivationImpl::Pwl, 16, wide, sigmoid_output(8)));
  const TensorQuant input = make_quant(8, false, false, 5, 0);
  CHECK_THROWS_AS(qgru::generate_activation(ActivationFunction::Tanh, ActivationImpl::Pwl, 0, input, tanh_output(8)),
                  qgru::Error);
  CHECK_THROWS_AS(qgru::generate_activation(ActivationFunction::Tanh, ActivationImpl::Pwl, 16,
                                            make_quant(17, false, false, 12, 0), tanh_output(8)),
                  qgru::Error);
  CHECK_THROWS_AS(qgru::generate_activation(ActivationFunction::Tanh, ActivationImpl::Pwl, 16, input,
                                            make_quant(17, false, true, 16, 0)),
                  qgru::Error);
}

namespace {

struct Artifact {
  nlohmann::json json;
  std::map<std::string, qgru::Tensor> tensors;
};

Artifact write_artifact(const qgru::ActivationTables& tables, const std::string& prefix) {
  Artifact artifact;
  qgru::activation_to_artifact(tables, prefix, artifact.json, artifact.tensors);
  // Through text, as the artifact file stores it.
  artifact.json = nlohmann::json::parse(artifact.json.dump());
  return artifact;
}

// The message of the qgru::Error thrown by reading `artifact`, or "" when none is thrown.
std::string read_error(const Artifact& artifact, const std::string& prefix) {
  try {
    qgru::activation_from_artifact(artifact.json, artifact.tensors, prefix, "model.qgru.json");
  } catch (const qgru::Error& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the artifact round trip gives back the same data and the same output for every code") {
  const TensorQuant input = make_quant(10, false, false, 7, -21);
  for (ActivationFunction function : {ActivationFunction::Sigmoid, ActivationFunction::Tanh}) {
    for (ActivationImpl impl : {ActivationImpl::Table, ActivationImpl::Pwl}) {
      const auto tables = qgru::generate_activation(function, impl, 24, input, output_for(function, 12));
      const Artifact artifact = write_artifact(tables, "gate.update");
      const auto back = qgru::activation_from_artifact(artifact.json, artifact.tensors, "gate.update", "model.qgru.json");
      CAPTURE(describe(tables));
      CHECK(back.function == tables.function);
      CHECK(back.impl == tables.impl);
      CHECK(back.segments == tables.segments);
      CHECK(qgru::describe_quant(back.input) == qgru::describe_quant(tables.input));
      CHECK(back.input.zp == tables.input.zp);
      CHECK(back.output.shift == tables.output.shift);
      CHECK(back.table == tables.table);
      CHECK(back.pwl_threshold == tables.pwl_threshold);
      CHECK(back.pwl_q_b == tables.pwl_q_b);
      CHECK(back.pwl_term_c == tables.pwl_term_c);
      CHECK(back.pwl_shift == tables.pwl_shift);
      const qgru::ActivationView view = tables.view();
      const qgru::ActivationView back_view = back.view();
      for (int32_t q_in = input.qmin(); q_in <= input.qmax(); ++q_in) {
        REQUIRE(qgru::evaluate_activation(back_view, q_in) == qgru::evaluate_activation(view, q_in));
      }
      CHECK(artifact.tensors.count(impl == ActivationImpl::Table ? "gate.update.table" : "gate.update.pwl_term_c") == 1);
    }
  }
}

TEST_CASE("malformed pwl artifact data is refused, naming the file and the tensor") {
  const TensorQuant input = make_quant(8, false, false, 5, -3);
  const auto tables = qgru::generate_activation(ActivationFunction::Sigmoid, ActivationImpl::Pwl, 16, input, sigmoid_output(8));
  REQUIRE(tables.segments >= 4);
  const std::string prefix = "gate.reset";
  CHECK(read_error(write_artifact(tables, prefix), prefix).empty());

  {  // thresholds out of order
    auto bad = tables;
    std::swap(bad.pwl_threshold[1], bad.pwl_threshold[2]);
    const std::string message = read_error(write_artifact(bad, prefix), prefix);
    CHECK(contains(message, "model.qgru.json"));
    CHECK(contains(message, "gate.reset.pwl_threshold"));
    CHECK(contains(message, "strictly increase"));
  }
  {  // a repeated threshold (an empty segment)
    auto bad = tables;
    bad.pwl_threshold[2] = bad.pwl_threshold[1];
    CHECK(contains(read_error(write_artifact(bad, prefix), prefix), "gate.reset.pwl_threshold"));
  }
  {  // the first threshold must be the smallest input code
    auto bad = tables;
    bad.pwl_threshold[0] += 1;
    CHECK(contains(read_error(write_artifact(bad, prefix), prefix), "smallest code"));
  }
  {  // a threshold outside the input code range
    auto bad = tables;
    bad.pwl_threshold.back() = 300;
    CHECK(contains(read_error(write_artifact(bad, prefix), prefix), "outside -128..127"));
  }
  {  // one slope missing
    Artifact artifact = write_artifact(tables, prefix);
    std::vector<int32_t> short_q_b(tables.pwl_q_b.begin(), tables.pwl_q_b.end() - 1);
    artifact.tensors["gate.reset.pwl_q_b"] = qgru::Tensor::from_vector<int32_t>({tables.segments - 1}, short_q_b);
    const std::string message = read_error(artifact, prefix);
    CHECK(contains(message, "gate.reset.pwl_q_b"));
    CHECK(contains(message, "expected [" + std::to_string(tables.segments) + "]"));
  }
  {  // a tensor absent
    Artifact artifact = write_artifact(tables, prefix);
    artifact.tensors.erase("gate.reset.pwl_term_c");
    CHECK(contains(read_error(artifact, prefix), "missing tensor \"gate.reset.pwl_term_c\""));
  }
  {  // a float tensor where integers are expected
    Artifact artifact = write_artifact(tables, prefix);
    artifact.tensors["gate.reset.pwl_shift"] =
        qgru::Tensor::from_vector<float>({tables.segments}, std::vector<float>(static_cast<size_t>(tables.segments), 1.0f));
    CHECK(contains(read_error(artifact, prefix), "gate.reset.pwl_shift"));
  }
  {  // a shift beyond rshift_round's contract
    auto bad = tables;
    bad.pwl_shift[3] = 63;
    CHECK(contains(read_error(write_artifact(bad, prefix), prefix), "gate.reset.pwl_shift\": element 3 = 63"));
  }
  {  // an intercept beyond the overflow-free bound
    auto bad = tables;
    bad.pwl_term_c[0] = int64_t{1} << 53;
    CHECK(contains(read_error(write_artifact(bad, prefix), prefix), "gate.reset.pwl_term_c"));
  }
  {  // a segment count that does not match the tensors
    Artifact artifact = write_artifact(tables, prefix);
    artifact.json["segments"] = tables.segments + 1;
    CHECK(contains(read_error(artifact, prefix), "gate.reset.pwl_threshold"));
    artifact.json["segments"] = 0;
    CHECK(contains(read_error(artifact, prefix), "\"segments\""));
  }
  {  // scalars: unknown names, a missing key, a symmetric tensor with a zero point, a zero point outside the codes
    Artifact artifact = write_artifact(tables, prefix);
    artifact.json["function"] = "relu";
    CHECK(contains(read_error(artifact, prefix), "relu"));
    artifact = write_artifact(tables, prefix);
    artifact.json["impl"] = "spline";
    CHECK(contains(read_error(artifact, prefix), "spline"));
    artifact = write_artifact(tables, prefix);
    artifact.json.erase("output");
    CHECK(contains(read_error(artifact, prefix), "missing key \"output\""));
    artifact = write_artifact(tables, prefix);
    artifact.json["input"]["symmetric"] = true;
    CHECK(contains(read_error(artifact, prefix), "symmetric"));
    artifact = write_artifact(tables, prefix);
    artifact.json["input"]["zp"] = 500;
    CHECK(contains(read_error(artifact, prefix), "\"zp\" = 500"));
    artifact = write_artifact(tables, prefix);
    artifact.json["output"]["bits"] = "8";
    CHECK(contains(read_error(artifact, prefix), "\"bits\" must be an integer"));
  }
}

TEST_CASE("malformed table artifact data is refused: a 13-bit input, a wrong size, codes outside the output") {
  const TensorQuant input = make_quant(8, false, false, 6, 0);
  const auto tables = qgru::generate_activation(ActivationFunction::Tanh, ActivationImpl::Table, 0, input, tanh_output(8));
  const std::string prefix = "gate.new";
  CHECK(read_error(write_artifact(tables, prefix), prefix).empty());
  {
    Artifact artifact = write_artifact(tables, prefix);
    artifact.json["input"]["bits"] = 13;
    const std::string message = read_error(artifact, prefix);
    CHECK(contains(message, "model.qgru.json"));
    CHECK(contains(message, "at most 12 bits"));
  }
  {
    auto bad = tables;
    bad.table.pop_back();
    CHECK(contains(read_error(write_artifact(bad, prefix), prefix), "gate.new.table\" has shape [255], expected [256]"));
  }
  {
    auto bad = tables;
    bad.table[7] = 128;  // tanh output is int8
    CHECK(contains(read_error(write_artifact(bad, prefix), prefix), "gate.new.table\": element 7 = 128"));
  }
}

TEST_CASE("pwl bucket index: the same segment as a linear scan for every code, whatever the thresholds' spacing") {
  // Thresholds by hand (the search reads nothing else): one segment; more segments than buckets; all crowded into one
  // bucket; an 8-bit range (one code a bucket); an unsigned 16-bit range; the range's last code alone a segment.
  struct Case {
    int32_t q_min, q_max;
    std::vector<int32_t> thresholds;
  };
  std::vector<Case> cases = {{-32768, 32767, {-32768}}, {-128, 127, {-128, -1, 0, 5, 127}}, {0, 65535, {0, 100, 101, 65535}}};
  std::vector<int32_t> dense;  // 4096 segments over 65536 codes: 16 a bucket
  for (int32_t t = -32768; t < 32768; t += 16) dense.push_back(t);
  cases.push_back({-32768, 32767, dense});
  std::vector<int32_t> crowded = {-32768};  // 200 segments inside codes 1000 .. 1199, one bucket of 256 codes
  for (int32_t t = 1000; t < 1200; ++t) crowded.push_back(t);
  cases.push_back({-32768, 32767, crowded});
  std::mt19937 rng(5);
  for (int c = 0; c < 20; ++c) {  // random spacings, random ranges of 8 to 17 bits
    const int bits = 8 + static_cast<int>(rng() % 10);
    const int32_t q_min = -(int32_t{1} << (bits - 1)) + static_cast<int32_t>(rng() % 7), q_max = (int32_t{1} << (bits - 1)) - 1;
    std::vector<int32_t> t = {q_min};
    while (t.back() < q_max && t.size() < 4096) t.push_back(t.back() + 1 + static_cast<int32_t>(rng() % (rng() % 2 ? 3 : 900)));
    if (t.back() > q_max) t.pop_back();
    cases.push_back({q_min, q_max, t});
  }
  for (const Case& c : cases) {
    CAPTURE(c.q_min);
    CAPTURE(c.q_max);
    CAPTURE(c.thresholds.size());
    qgru::ActivationView view{};
    view.impl = ActivationImpl::Pwl;
    view.q_in_min = c.q_min;
    view.q_in_max = c.q_max;
    view.num_segments = static_cast<int32_t>(c.thresholds.size());
    view.pwl_threshold = c.thresholds.data();
    const qgru::PwlBuckets buckets = qgru::pwl_buckets(view);
    CHECK(static_cast<int64_t>(buckets.first_segment.size()) <= qgru::kActivationPwlMaxBuckets + 1);
    CHECK(((int64_t{c.q_max} - c.q_min) >> buckets.shift) + 2 == static_cast<int64_t>(buckets.first_segment.size()));
    if (buckets.shift > 0) CHECK(((int64_t{c.q_max} - c.q_min) >> (buckets.shift - 1)) >= qgru::kActivationPwlMaxBuckets);  // fewest codes a bucket
    const qgru::ActivationView bucketed = qgru::with_pwl_buckets(view, buckets);
    size_t segment = 0;
    int64_t first_mismatch = std::numeric_limits<int64_t>::min();
    for (int64_t q = c.q_min; q <= c.q_max; ++q) {
      while (segment + 1 < c.thresholds.size() && c.thresholds[segment + 1] <= q) ++segment;  // the linear scan
      if (qgru::find_pwl_segment(bucketed, static_cast<int32_t>(q)) != static_cast<int32_t>(segment) &&
          first_mismatch == std::numeric_limits<int64_t>::min()) {
        first_mismatch = q;
      }
    }
    CHECK_MESSAGE(first_mismatch == std::numeric_limits<int64_t>::min(), "another segment at q_in = " << first_mismatch);
  }
}
