// The host side of qgru/runtime/code_maps.h: each map from the model's parameters.
#include "qgru/runtime/code_maps.h"

#include <cmath>

#include "qgru/runtime/cell_quant_params.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

InputQuantizer input_quantizer(const TensorQuant& quant) {
  InputQuantizer q;
  q.steps_per_unit = std::ldexp(1.0, quant.shift);
  q.mantissa = quant.mantissa;
  q.zp = quant.zp;
  q.qmin = quant.qmin();
  q.qmax = quant.qmax();
  return q;
}

HToNextXMap h_to_next_x_map(const QuantizedGru& model, int layer, int direction) {
  const TensorQuant& h = model.cell(layer, direction).q(GruTensor::h);
  const TensorQuant& next_x = model.cell(layer + 1, 0).q(GruTensor::x);
  HToNextXMap m;
  m.h_zp = h.zp;
  m.x_zp = next_x.zp;
  m.x_qmin = next_x.qmin();
  m.x_qmax = next_x.qmax();
  if (h.power_of_two() && next_x.power_of_two()) {
    m.pure_shift = 1;
    m.shift = h.shift - next_x.shift;
  } else {
    const MultiplierRescale r = h_to_next_x_rescale(h, next_x);
    m.pure_shift = 0;
    m.multiplier = r.multiplier;
    m.shift = r.shift;
  }
  return m;
}

CodeDequantizer code_dequantizer(const TensorQuant& quant) {
  CodeDequantizer d;
  d.zp = quant.zp;
  d.mantissa = quant.mantissa;
  d.unit = std::ldexp(1.0, -quant.shift);
  return d;
}

}  // namespace qgru
