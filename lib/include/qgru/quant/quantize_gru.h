#pragma once
// `quantize` as one library call: float model + bit-width config + float ranges -> QuantizedGru, with the
// overflow proof done (a config that could overflow is refused before anything is written).
//
// The ranges come through a callback so that this library does not depend on how they were measured
// (the CLI glues calibration statistics to it):
//   range(layer, direction, tensor, range_method, spec) -> [min, max]
// is asked once per observed tensor (qgru::kObservedGruTensors) of every cell; range_method is the
// config's string for that tensor (e.g. "minmax", "ema", "percentile:99.99"), spec its bits / signedness /
// symmetry (shift and zp unset). For x, the ranges of a layer's directions are merged (union), so every
// cell of one layer shares one x space.
#include <functional>
#include <string>
#include <utility>

#include "qgru/model/float_gru.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

using RangeProvider = std::function<std::pair<double, double>(int layer, int direction, GruTensor tensor,
                                                              const std::string& range_method,
                                                              const TensorQuant& spec)>;

QuantizedGru quantize_gru(const FloatGruModel& model, const BitwidthConfig& config, const RangeProvider& range);

// The parameter table `qgru quantize` prints on stdout: per cell, every tensor's type, shift (a range for the
// per-channel weights and biases), zero point and float range, the scalar rescale shifts under their
// docs/FIXED_POINT.md names and the activations' form.
std::string describe_quantized_gru(const QuantizedGru& model);

// Decide the GEMM accumulator types of every cell from config.gemm_accumulator (Auto: int32 when both
// operands fit int8), then prove. Throws qgru::Error with the first failure, prefixed by `what`.
void choose_accumulators_and_prove(QuantizedGru& model, const std::string& what);

}  // namespace qgru
