#include "qgru/runtime/quantize_input.h"

#include "fast/fast_kernels.h"
#include "qgru/runtime/code_maps.h"
#include "qgru/runtime/fast_executor.h"

namespace qgru {

void quantize_fast(const TensorQuant& quant, const float* values, size_t count, int32_t* codes) {
  if (cpu_has_avx2() && quant.power_of_two() && quant.shift >= -60 && quant.shift <= 60) {  // the kernel's contract: exact
    fast::quantize_f32_avx2(values, count, quant.shift, quant.zp, quant.qmin(), quant.qmax(), codes);
    return;
  }
  const InputQuantizer q = input_quantizer(quant);  // the QGRU_HD function the CUDA executor quantizes with too
  for (size_t i = 0; i < count; ++i) codes[i] = quantize_input_code(q, values[i]);
}

}  // namespace qgru
