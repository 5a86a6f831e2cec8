// quantize --scales: the scale kind of every tensor, and the ranges that fit exact scales where nobody named a
// method (qgru/quant/scale_choice.h), below --range-method and a config file's own methods.
#include <doctest/doctest.h>

#include <string>

#include "qgru/base/error.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/range_method_precedence.h"
#include "qgru/quant/scale_choice.h"

using qgru::GruTensor;
using qgru::ScaleChoice;

TEST_CASE("multiplier scales on a preset replace its EMA ranges, which clip under exact scales") {
  qgru::BitwidthConfig int8 = qgru::load_bitwidth_config("int8");  // "range_method": "ema"
  const std::string note = qgru::apply_scale_choice(int8, ScaleChoice::Multiplier, true);
  CHECK(note.find("percentile:99.9 for x, h, weight_ih_linear") != std::string::npos);
  for (int i = 0; i < qgru::kGruTensorCount; ++i) CHECK(int8.tensors[static_cast<size_t>(i)].multiplier_scale);
  CHECK(int8.multiplier_scales());
  for (GruTensor t : qgru::kObservedGruTensors) {
    CAPTURE(qgru::gru_tensor_name(t));
    CHECK(qgru::resolved_range_method(int8, "", "ema", t) == "percentile:99.9");
    CHECK(qgru::resolved_range_method(int8, "ema", "ema", t) == "ema");  // --range-method still wins
  }
  // 16-bit activations: minmax (percentile:99.9 clips too much at 16 bits); the 8-bit weights are not observed.
  qgru::BitwidthConfig wide = qgru::load_bitwidth_config("int16-activations");
  qgru::apply_scale_choice(wide, ScaleChoice::Multiplier, true);
  CHECK(qgru::resolved_range_method(wide, "", "ema", GruTensor::update_gate_input) == "minmax");
  CHECK(wide.of(GruTensor::W).range_method.empty());
  CHECK(qgru::multiplier_range_method(8) == "percentile:99.9");
  CHECK(qgru::multiplier_range_method(9) == "minmax");
}

TEST_CASE("multiplier scales keep the methods a config file names, and fill in the ones it leaves to the statistics") {
  qgru::BitwidthConfig file = qgru::load_bitwidth_config("int8");
  CHECK(qgru::apply_scale_choice(file, ScaleChoice::Multiplier, false).empty());  // "ema" named by the file
  CHECK(qgru::resolved_range_method(file, "", "kl", GruTensor::x) == "ema");
  CHECK(file.of(GruTensor::x).multiplier_scale);

  qgru::BitwidthConfig silent = qgru::load_bitwidth_config("int8");
  silent.range_method.clear();  // a file naming no method: the statistics' would apply
  silent.of(GruTensor::h).range_method = "kl";
  qgru::apply_scale_choice(silent, ScaleChoice::Multiplier, false);
  CHECK(qgru::resolved_range_method(silent, "", "ema", GruTensor::x) == "percentile:99.9");
  CHECK(qgru::resolved_range_method(silent, "", "ema", GruTensor::h) == "kl");
}

TEST_CASE("powers of two leave the methods as they are; an unknown scale kind is a usage error") {
  qgru::BitwidthConfig config = qgru::load_bitwidth_config("int8");
  config.of(GruTensor::x).multiplier_scale = true;
  CHECK(qgru::apply_scale_choice(config, qgru::parse_scale_choice("pow2", "--scales"), true).empty());
  CHECK_FALSE(config.multiplier_scales());
  CHECK(qgru::resolved_range_method(config, "", "kl", GruTensor::x) == "ema");
  CHECK(qgru::parse_scale_choice("power_of_two", "--scales") == ScaleChoice::PowerOfTwo);
  CHECK_THROWS_AS(qgru::parse_scale_choice("exact", "--scales"), qgru::UsageError);
}
