#pragma once
// The float-equivalent of a quantized GRU: the float model whose weights are the artifact's weights as the
// integer executor holds them, each dequantized from its integer code and its channel's power-of-two shift,
//   W[c, k] = q_W[c, k] · 2^-shift_W[c]     R, bw, br likewise (symmetric per output channel: zp 0)
// (qgru/base/tensor_quant.h). Every such value is exactly a float32: a code has at most 16 bits (bit widths
// are 2..16, qgru/runtime/bitwidth_config.h), fewer than float32's 24-bit significand, and the artifact
// reader confines shifts to [-80, 80], inside float32's normal exponent range [-126, 127]; the conversion
// checks it anyway.
//
// What the float-equivalent does not hold (docs/ONNX.md "What the export does not model"): the quantization
// of x, h and every intermediate tensor, the integer sigmoid/tanh tables, and the rounding of the biases into
// the GEMM accumulators' scale (shift_bw_to_gemm_x, shift_br_to_gemm_h).
#include <string>

#include "qgru/model/float_gru.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

// Cells in the artifact's order (layer * num_directions + direction), source_layout "qgru artifact".
// linear_before_reset is the artifact's cell (true for every version 1 artifact; version 2 names it,
// docs/FIXED_POINT.md §3a); artifacts of a cell variant the export does not know are refused before this is
// called (require_exportable_cell_variant).
FloatGruModel dequantized_float_gru(const QuantizedGru& model);

// The artifact JSON's cell variant, checked before an export: version 1 artifacts hold the
// linear_before_reset = 1 cell only, version 2 names its cell in a top-level boolean "linear_before_reset". A later
// version, or another key naming a variant, is refused in one line naming the file and the variant (the export
// writes linear_before_reset from the variant, so it must know it).
void require_exportable_cell_variant(const std::string& json_text, const std::string& source);

}  // namespace qgru
