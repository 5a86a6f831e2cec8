// The fast executor's plan (lib/src/runtime/fast/fast_plan.h): what fast_path_support chooses once per matrix and
// cell, that FastQuantGru runs the plan it is given (no second packing), and that a refusal has no plan.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "../../../lib/src/runtime/fast/fast_plan.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/fast_executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/stream_step.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

// Whether a kernel table entry is set (doctest cannot print function pointers).
template <class Fn>
bool is_set(Fn fn) {
  return fn != nullptr;
}

std::vector<FastIsa> plan_levels_here() {
  std::vector<FastIsa> levels;
  if (cpu_has_avx2()) levels.push_back(FastIsa::Avx2);
  if (cpu_has_avx512_vnni()) levels.push_back(FastIsa::Avx512Vnni);
  if (levels.size() < 2) MESSAGE("fast_plan_test: only ", levels.size(), " of the two levels run on this CPU");
  return levels;
}

TEST_CASE("fast plan: the int8 preset's kernels per level, chosen once") {
  // int8 codes for x, h and the weights, K well below the int32 bound: both levels take their int8 GEMMs and the
  // int32 cell (fast_kernels.h, cell_fits_int32), whose x terms run out of the time loop.
  const test::CalibratedCase c = test::calibrated_case(/*C=*/24, /*H=*/32, /*L=*/2, /*D=*/2, /*T=*/5, /*N=*/2,
                                                       load_bitwidth_config("int8"), 31u);
  for (FastIsa isa : plan_levels_here()) {
    FastExecutorOptions o;
    o.isa = isa;
    const FastPathSupport s = fast_path_support(c.quantized, o);
    REQUIRE(s.supported);
    REQUIRE(s.plan.get() != nullptr);
    CHECK(s.plan->isa == isa);
    REQUIRE(s.plan->cells.size() == c.quantized.cells.size());
    const bool vnni = isa == FastIsa::Avx512Vnni;
    for (const fast::PackedCell& pc : s.plan->cells) {
      CAPTURE(pc.kernels.name);
      CHECK(std::string(pc.kernels.name) == (vnni ? "avx512 int32" : "avx2 int32"));
      CHECK(is_set(pc.kernels.cell));
      CHECK(is_set(pc.kernels.cell_xterms));
      CHECK(is_set(pc.kernels.x_terms));
      // H = 32 = R's K: the batch-1 recurrence in registers on the VNNI layout only
      CHECK(is_set(pc.kernels.small_recurrence) == vnni);
      for (const fast::PackedMatrix* m : {&pc.W, &pc.R}) {
        CHECK(m->out_int32);
        CHECK(m->int8_packed);
        CHECK(is_set(m->gemm32));
        CHECK_FALSE(is_set(m->gemm64));
        CHECK(is_set(m->gemv));
        CHECK(is_set(m->gemv_part));
        CHECK(m->form == (vnni ? fast::OperandForm::U8 : fast::OperandForm::Int16));
      }
    }
    CHECK(s.plan->layer0_u8_rows == vnni);
    // The executor made from this support runs this very plan, and gives the reference's codes.
    const FastQuantGru fast(c.quantized, s, o);
    CHECK(fast.support().plan.get() == s.plan.get());
    const QuantGruResult ref = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
    const QuantGruResult got = fast.run(c.x.data(), c.T, c.N, nullptr);
    CHECK(got.output_codes == ref.output_codes);
    CHECK(got.h_n_codes == ref.h_n_codes);
  }
}

TEST_CASE("fast plan: 16-bit activations take int64 sums or the two-plane GEMM, never the int32 cell") {
  const test::CalibratedCase c = test::calibrated_case(/*C=*/20, /*H=*/16, /*L=*/1, /*D=*/1, /*T=*/4, /*N=*/3,
                                                       load_bitwidth_config("int16-activations"), 17u);
  const QuantGruResult ref = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  for (FastIsa isa : plan_levels_here()) {
    FastExecutorOptions o;
    o.isa = isa;
    const FastPathSupport s = fast_path_support(c.quantized, o);
    REQUIRE(s.supported);
    const fast::PackedCell& pc = s.plan->cells[0];
    CAPTURE(pc.kernels.name);
    CHECK_FALSE(is_set(pc.kernels.x_terms));  // no int32 cell: its operand products reach 2^32
    CHECK_FALSE(is_set(pc.kernels.small_recurrence));
    CHECK(is_set(pc.kernels.cell));
    CHECK((!is_set(pc.R.gemv_part) || pc.R.out_int32));
    if (isa == FastIsa::Avx512Vnni) CHECK(pc.W.form == fast::OperandForm::Planes);  // 16-bit x codes, int8 weights
    CHECK(FastQuantGru(c.quantized, s, o).run(c.x.data(), c.T, c.N, nullptr).output_codes == ref.output_codes);
  }
}

TEST_CASE("fast plan: a refusal has its reason and no plan; FastQuantGru then runs the reference") {
  const test::CalibratedCase c = test::calibrated_case(/*C=*/8, /*H=*/16, /*L=*/1, /*D=*/1, /*T=*/3, /*N=*/2,
                                                       load_bitwidth_config("int8"), 5u);
  FastExecutorOptions o;
  o.allow_simd = false;
  const FastPathSupport s = fast_path_support(c.quantized, o);
  CHECK_FALSE(s.supported);
  CHECK(s.plan.get() == nullptr);
  CHECK(s.reason == "SIMD disabled by the caller");
  const FastQuantGru fast(c.quantized, s, o);
  CHECK_FALSE(fast.support().supported);
  CHECK(fast.make_stepper(2).get() == nullptr);
  const QuantGruResult ref = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  CHECK(fast.run(c.x.data(), c.T, c.N, nullptr).output_codes == ref.output_codes);
}

}  // namespace
}  // namespace qgru
