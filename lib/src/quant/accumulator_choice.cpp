#include "qgru/quant/quantize_gru.h"

#include "qgru/base/error.h"
#include "qgru/runtime/overflow_check.h"

namespace qgru {

void choose_accumulators_and_prove(QuantizedGru& model, const std::string& what) {
  for (GruCellQuantParams& p : model.cells) {
    switch (model.config.gemm_accumulator) {
      case GemmAccumulator::Auto:
        p.gemm_x_int32 = p.q(GruTensor::W).bits <= 8 && codes_fit_int8(p.q(GruTensor::x));
        p.gemm_h_int32 = p.q(GruTensor::R).bits <= 8 && codes_fit_int8(p.q(GruTensor::h));
        break;
      case GemmAccumulator::Int32:
        p.gemm_x_int32 = p.gemm_h_int32 = true;
        break;
      case GemmAccumulator::Int64:
        p.gemm_x_int32 = p.gemm_h_int32 = false;
        break;
    }
  }
  const OverflowProof proof = prove_no_overflow(model);
  if (!proof.ok()) throw Error(what + ": overflow: " + proof.first_failure());
}

}  // namespace qgru
