#pragma once
// Which range method quantize uses for each observed tensor, and a one-line account of it when the config's
// methods (or --range-method) override the statistics' default (`qgru calibrate --method`). Precedence:
// quantize --range-method > the config's per-tensor range_method > the config's top-level range_method >
// the statistics' method. `quantize --scales multiplier` fills in, before this, the per-tensor methods that
// nobody named (a preset's, or none in a config file, so the statistics') with ones that fit exact scales
// (qgru/quant/scale_choice.h): below --range-method and a config file's own methods, above the rest.
#include <string>

#include "qgru/gru_tensors.h"
#include "qgru/runtime/bitwidth_config.h"

namespace qgru {

// The method quantize uses for `tensor`.
std::string resolved_range_method(const BitwidthConfig& config, const std::string& override_method,
                                   const std::string& stats_method, GruTensor tensor);

// "" when every observed tensor uses the statistics' method; else one line naming the methods used, the
// tensors of each, what set them and the statistics' method they override, e.g. "range methods: ema for
// every observed tensor (config 'int8'), overriding the statistics' 'kl' (calibrate --method)".
std::string range_method_precedence_note(const BitwidthConfig& config, const std::string& override_method,
                                         const std::string& stats_method);

}  // namespace qgru
