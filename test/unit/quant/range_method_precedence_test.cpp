#include <doctest/doctest.h>

#include <string>

#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/range_method_precedence.h"

using qgru::GruTensor;

TEST_CASE("a config's range methods overriding calibrate --method in silence") {
  const qgru::BitwidthConfig int8 = qgru::load_bitwidth_config("int8");  // range_method "ema" for every tensor
  CHECK(qgru::range_method_precedence_note(int8, "", "kl") ==
        "range methods: ema for every observed tensor (config 'int8'), overriding the statistics' 'kl' "
        "(calibrate --method)");
  // The same method as the statistics': nothing is overridden, nothing to say.
  CHECK(qgru::range_method_precedence_note(int8, "", "ema").empty());
  CHECK(qgru::range_method_precedence_note(int8, "mse", "kl").find("mse for every observed tensor (--range-method)") !=
        std::string::npos);
}

TEST_CASE("per-tensor methods resolved in the wrong order or left unnamed") {
  qgru::BitwidthConfig config = qgru::load_bitwidth_config("int8");
  config.range_method.clear();
  for (int i = 0; i < qgru::kGruTensorCount; ++i) config.of(static_cast<GruTensor>(i)).range_method.clear();
  CHECK(qgru::range_method_precedence_note(config, "", "kl").empty());  // the statistics' method everywhere
  config.of(GruTensor::h).range_method = "minmax";
  CHECK(qgru::resolved_range_method(config, "", "kl", GruTensor::h) == "minmax");
  CHECK(qgru::resolved_range_method(config, "", "kl", GruTensor::x) == "kl");
  CHECK(qgru::resolved_range_method(config, "mse", "kl", GruTensor::h) == "mse");
  config.range_method = "ema";
  CHECK(qgru::resolved_range_method(config, "", "kl", GruTensor::x) == "ema");
  CHECK(qgru::resolved_range_method(config, "", "kl", GruTensor::h) == "minmax");
  const std::string note = qgru::range_method_precedence_note(config, "", "kl");
  CHECK(note.find("ema for x, weight_ih_linear") != std::string::npos);
  CHECK(note.find("; minmax for h") != std::string::npos);
  CHECK(note.find("overriding the statistics' 'kl'") != std::string::npos);
}
