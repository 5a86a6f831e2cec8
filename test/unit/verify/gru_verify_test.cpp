// verify_gru on the linear_before_reset = 0 cell: its figures are the float cell's against the integer one
// (the same SQNR as running both), and a float model of the other cell is refused instead of compared.
#include <doctest/doctest.h>

#include <string>

#include "qgru/base/error.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/verify/gru_verify.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

TEST_CASE("verify compares the linear_before_reset = 0 cell with a float model of the other cell") {
  test::CalibratedCase c = test::calibrated_case(4, 9, 2, 2, 6, 3, load_bitwidth_config("int8"), 5u, {},
                                                 /*linear_before_reset=*/false);
  const GruVerifyReport report = verify_gru(c.model, c.quantized, c.x.data(), c.T, c.N, nullptr, GruVerifyOptions{});
  const QuantGruResult q = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  CHECK(report.output.sqnr_db() == doctest::Approx(test::sqnr_db(c.float_result.output, q.output)).epsilon(1e-9));
  CHECK(report.output.sqnr_db() > 20.0);
  FloatGruModel other = c.model;
  other.linear_before_reset = true;
  CHECK_THROWS_WITH_AS(verify_gru(other, c.quantized, c.x.data(), c.T, c.N, nullptr, GruVerifyOptions{}),
                       "the float model is the linear_before_reset = 1 GRU cell and the artifact the "
                       "linear_before_reset = 0 one: they describe different GRUs",
                       Error);
}

}  // namespace
}  // namespace qgru
