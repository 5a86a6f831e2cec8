#pragma once
// The input's quantization shared by the executors (the fast CPU executor, the runtime C API's streaming frames,
// the CUDA executor): TensorQuant::quantize over an array, vectorized where the CPU allows. Its own header, so that
// a caller that only quantizes does not include the fast executor (qgru/runtime/fast_executor.h).
#include <cstddef>
#include <cstdint>

#include "qgru/runtime/quantized_gru.h"

namespace qgru {

// TensorQuant::quantize of values[0, count) into codes (the same codes: round half away from zero, saturation,
// NaN -> zp), by the fast path's vector kernel where the CPU has AVX2 and |quant.shift| <= 60, else one value at
// a time by quantize_input_code (qgru/runtime/code_maps.h, QGRU_HD: the CUDA executor's device quantization).
// For a streaming frame of 256 values: a few dozen ns instead of microseconds.
void quantize_fast(const TensorQuant& quant, const float* values, size_t count, int32_t* codes);

}  // namespace qgru
