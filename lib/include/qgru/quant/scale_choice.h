#pragma once
// `quantize --scales pow2|multiplier`: every tensor's scale kind (docs/FIXED_POINT.md §1a), and the range
// methods that fit it. Powers of two round every range up to the next power of two; exact (multiplier) scales
// fit the range as it is. The per-step EMA ranges the int8 preset and the statistics' default name are
// narrower than the data: rounded up to a power of two they get their headroom back, exact scales keep the
// clipping and lose (examples/digits int8: the EMA with exact scales loses several dB to the EMA with powers
// of two, README "qgru quantize"). So multiplier scales come with ranges that fit exact scales
// (multiplier_range_method) unless a method was named for the tensor: by --range-method (which wins over
// everything, qgru/quant/range_method_precedence.h) or by a config file's own range_method.
#include <string>

#include "qgru/runtime/bitwidth_config.h"

namespace qgru {

enum class ScaleChoice { PowerOfTwo, Multiplier };

// "pow2" or "power_of_two" (the configs' word), "multiplier"; anything else is refused naming `what`.
ScaleChoice parse_scale_choice(const std::string& text, const std::string& what);

// The range method exact scales get where no method was named: percentile:99.9 up to 8 bits, minmax wider
// (docs/CALIBRATION.md, "Power-of-two against multiplier scales": the single method that beat the power-of-two
// preset on every measured model with multiplier scales, at int8 and at 16-bit activations respectively).
std::string multiplier_range_method(int bits);

// Sets every tensor's scale kind to `choice` (a tensor's own "scale" in the config included). With
// Multiplier, every observed tensor whose method nobody named gets multiplier_range_method(bits): all of them
// when the config is a preset (`config_is_preset`: its methods were chosen for powers of two), else those
// for which the config file names no method. Returns one line saying what changed, for the log ("" when the
// methods stay).
std::string apply_scale_choice(BitwidthConfig& config, ScaleChoice choice, bool config_is_preset);

}  // namespace qgru
