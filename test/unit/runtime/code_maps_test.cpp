// The QGRU_HD code maps (qgru/runtime/code_maps.h) the CUDA executor's device flow runs, against the CPU path's own
// functions, exhaustively over codes: requantize_h_code against requantize_h_to_next_x for every h code of every cell
// pair (8- and 16-bit, power-of-two and multiplier scales, 1..3 layers, both directions), dequantize_code against
// TensorQuant::dequantize for every code, and quantize_input_code against TensorQuant::quantize at every rounding
// boundary of every code (the float just below, at and above (k + 1/2)·scale) plus NaN, infinities, zeros and the
// float extremes, on the models' x parameters and on synthetic ones (shifts -32..40, zero points, real mantissas).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qgru/base/tensor_quant.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/code_maps.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantize_input.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

BitwidthConfig config_of(const std::string& preset, bool multiplier_scales) {
  BitwidthConfig config = load_bitwidth_config(preset);
  if (multiplier_scales) {
    for (TensorBitwidth& t : config.tensors) t.multiplier_scale = true;
  }
  return config;
}

// Floats around every rounding boundary of every code of `q`, and the special values.
std::vector<float> boundary_inputs(const TensorQuant& q) {
  std::vector<float> xs = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min()};
  const double scale = q.scale();
  for (int64_t k = int64_t{q.qmin()} - 2; k <= int64_t{q.qmax()} + 1; ++k) {
    const double boundary = (static_cast<double>(k - q.zp) + 0.5) * scale;
    const float at = static_cast<float>(boundary);
    xs.push_back(std::nextafter(at, -std::numeric_limits<float>::infinity()));
    xs.push_back(at);
    xs.push_back(std::nextafter(at, std::numeric_limits<float>::infinity()));
    xs.push_back(static_cast<float>(static_cast<double>(k - q.zp) * scale));  // a code's own value
  }
  return xs;
}

// quantize_input_code and quantize_fast against TensorQuant::quantize; the number of inputs compared.
size_t check_quantizer(const TensorQuant& q) {
  const std::vector<float> xs = boundary_inputs(q);
  const InputQuantizer map = input_quantizer(q);
  std::vector<int32_t> fast(xs.size());
  quantize_fast(q, xs.data(), xs.size(), fast.data());
  size_t differing = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const int32_t expected = q.quantize(xs[i]);
    if (quantize_input_code(map, xs[i]) != expected || fast[i] != expected) {
      if (differing++ == 0) {
        FAIL_CHECK("quantize " << describe_quant(q) << " mantissa " << q.mantissa << " x=" << xs[i] << ": expected "
                               << expected << ", got " << quantize_input_code(map, xs[i]) << " / fast " << fast[i]);
      }
    }
  }
  CHECK(differing == 0);
  return xs.size();
}

TEST_CASE("code maps: requantize_h_code and dequantize_code equal the CPU path's functions over every code") {
  for (const char* preset : {"int8", "int16-activations", "int16"}) {
    for (const bool multiplier : {false, true}) {
      for (const int L : {1, 3}) {  // 3: two layer pairs to requantize; 1: the last layer alone
        CAPTURE(preset);
        CAPTURE(multiplier);
        CAPTURE(L);
        const test::CalibratedCase c = test::calibrated_case(3, 5, L, 2, 4, 2, config_of(preset, multiplier), 31u + L);
        const QuantizedGru& model = c.quantized;
        size_t compared = 0;
        for (int l = 0; l < L; ++l) {
          for (int d = 0; d < 2; ++d) {
            const TensorQuant& h = model.cell(l, d).q(GruTensor::h);
            const CodeDequantizer deq = code_dequantizer(h);
            for (int32_t q = h.qmin(); q <= h.qmax(); ++q) {
              const float expected = static_cast<float>(h.dequantize(q));
              if (dequantize_code(deq, q) != expected) FAIL_CHECK("dequantize l" << l << ".d" << d << " code " << q);
              ++compared;
            }
            if (l + 1 == L) continue;
            const HToNextXMap map = h_to_next_x_map(model, l, d);
            for (int32_t q = h.qmin(); q <= h.qmax(); ++q) {
              const int32_t expected = requantize_h_to_next_x(model, l, d, q);
              if (requantize_h_code(map, q) != expected) {
                FAIL_CHECK("requantize l" << l << ".d" << d << " code " << q << ": expected " << expected << ", got "
                                          << requantize_h_code(map, q));
              }
              ++compared;
            }
          }
          compared += check_quantizer(model.cell(l, 0).q(GruTensor::x));
        }
        CHECK(compared > 0);
      }
    }
  }
}

TEST_CASE("code maps: a multiplier-scale model's requantization takes the multiplier branch") {
  const test::CalibratedCase c = test::calibrated_case(3, 5, 2, 1, 4, 2, config_of("int8", true), 7u);
  CHECK(h_to_next_x_map(c.quantized, 0, 0).pure_shift == 0);
  const test::CalibratedCase p = test::calibrated_case(3, 5, 2, 1, 4, 2, config_of("int8", false), 7u);
  CHECK(h_to_next_x_map(p.quantized, 0, 0).pure_shift == 1);
}

TEST_CASE("code maps: quantize_input_code equals TensorQuant::quantize at every boundary of synthetic spaces") {
  size_t compared = 0;
  for (const int bits : {8, 16}) {
    for (const bool is_unsigned : {false, true}) {
      for (const int shift : {-32, -5, 0, 3, 7, 15, 24, 40}) {
        for (const double mantissa : {1.0, 0.5, 0.7071067811865476, 0.999}) {
          TensorQuant q;
          q.bits = bits;
          q.is_unsigned = is_unsigned;
          q.shift = shift;
          q.mantissa = mantissa;
          q.zp = is_unsigned ? (bits == 8 ? 17 : 30000) : (bits == 8 ? -3 : 1234);
          CAPTURE(describe_quant(q));
          compared += check_quantizer(q);
        }
      }
    }
  }
  CHECK(compared > 1000000);
}

}  // namespace
}  // namespace qgru
