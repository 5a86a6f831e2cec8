// The device-vs-CPU comparison of `qgru verify --device cuda` and the GPU self-test: equal codes pass, one
// changed code or a float beyond the tolerance fails and is located, a size difference fails.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "qgru/verify/device_compare.h"

namespace qgru {
namespace {

QuantGruResult codes_result() {
  QuantGruResult r;
  r.T = 3;
  r.N = 2;
  r.output_codes.resize(3 * 2 * 2 * 4);  // D = 2, H = 4
  for (size_t i = 0; i < r.output_codes.size(); ++i) r.output_codes[i] = static_cast<int32_t>(i % 17) - 8;
  r.h_n_codes.assign(2 * 2 * 4, 5);
  return r;
}

TEST_CASE("a single changed integer code is a located mismatch") {
  const QuantGruResult cpu = codes_result();
  QuantGruResult device = cpu;
  CodeComparison same = compare_quant_codes(cpu, device, 4, 2);
  CHECK(same.equal());
  CHECK(same.compared == 48 + 16);
  // t = 2, n = 1, direction 1, unit 3: row (2·2 + 1) = 5, column 4 + 3.
  device.output_codes[5 * 8 + 7] += 1;
  const CodeComparison one = compare_quant_codes(cpu, device, 4, 2);
  CHECK(!one.equal());
  CHECK(one.mismatches == 1);
  CHECK(one.first.find("output t=2 n=1 direction=1 unit=3") != std::string::npos);
  device = cpu;
  device.h_n_codes[9] = 0;  // cell 1, n = 0, unit 1
  CHECK(compare_quant_codes(cpu, device, 4, 2).first.find("h_n cell=1 n=0 unit=1") != std::string::npos);
  device = cpu;
  device.output_codes.pop_back();
  CHECK(!compare_quant_codes(cpu, device, 4, 2).equal());
  CHECK(!compare_quant_codes(QuantGruResult{}, QuantGruResult{}, 4, 2).equal());  // nothing compared is no pass
}

TEST_CASE("float results pass within the tolerance and fail beyond it or on NaN") {
  FloatGruResult cpu;
  cpu.T = 2;
  cpu.N = 1;
  cpu.output = {0.5f, -0.25f, 0.125f, 0.0f};
  cpu.h_n = {0.125f, 0.0f};
  FloatGruResult device = cpu;
  device.output[1] += 5e-5f;
  FloatComparison c = compare_float_outputs(cpu, device, 2, 1);
  CHECK(c.within());
  CHECK(c.max_abs_diff == doctest::Approx(5e-5).epsilon(1e-3));
  device.output[2] += 2e-4f;
  c = compare_float_outputs(cpu, device, 2, 1);
  CHECK(!c.within());
  CHECK(c.worst.find("output t=1 n=0 direction=0 unit=0") != std::string::npos);
  device = cpu;
  device.h_n[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK(!compare_float_outputs(cpu, device, 2, 1).within());
  const std::string text = device_comparison_text("cuda", CodeComparison{10, 0, ""}, compare_float_outputs(cpu, cpu, 2, 1));
  CHECK(text.find("equal code for code") != std::string::npos);
  CHECK(text.find("within") != std::string::npos);
  CHECK(device_comparison_json("cuda", CodeComparison{10, 1, "x"}, c)["passed"] == false);
}

}  // namespace
}  // namespace qgru
