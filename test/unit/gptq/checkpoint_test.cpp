// Checkpoint write → bytes → read, in both formats and every width; readers refuse wrong shapes and dtypes
// with the file and tensor named; quantize_config.json round trip; the Hessian accumulator against plain sums.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "gptq_test_util.h"
#include "qgru/base/error.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/hessian.h"

#include <nlohmann/json.hpp>

#include <cstdio>

using namespace qgru::gptq;

namespace {

QuantizedLayer make_layer(int bits, int64_t N, int64_t K, int64_t gs, bool act_order) {
  const auto X = gptq_test::activations_kmajor(K, 48, 3, 2);
  const auto H = gptq_test::hessian_plain(X, K, 48);
  const auto W = gptq_test::normal_values(static_cast<size_t>(N * K), 1, 0.2);
  GptqOptions options;
  options.bits = bits;
  options.group_size = gs;
  options.act_order = act_order;
  return to_checkpoint_layer(gptq_quantize(W, N, K, H, options), "test");
}

qgru::SafetensorsFile round_trip(const qgru::SafetensorsFile& file) {
  return qgru::parse_safetensors(qgru::serialize_safetensors(file), "mem.safetensors");
}

}  // namespace

TEST_CASE("checkpoint_round_trips_every_width_and_format") {
  for (int bits : {2, 3, 4, 8}) {
    for (auto format : {CheckpointFormat::kGptq, CheckpointFormat::kGptqV2}) {
      CAPTURE(bits);
      const QuantizedLayer layer = make_layer(bits, 32, 64, 16, bits == 3);
      qgru::SafetensorsFile file;
      add_layer(file, "model.fc", layer, format);
      const qgru::SafetensorsFile back = round_trip(file);
      CHECK(back.tensors.at("model.fc.qweight").shape == std::vector<int64_t>{64 * bits / 32, 32});
      CHECK(back.tensors.at("model.fc.qzeros").shape == std::vector<int64_t>{4, 32 * bits / 32});
      CHECK(back.tensors.at("model.fc.scales").dtype == qgru::DType::F16);
      CHECK(list_layers(back) == std::vector<std::string>{"model.fc"});
      const QuantizedLayer read = read_layer(back, "model.fc", bits, format, "mem.safetensors");
      CHECK(read.codes == layer.codes);
      CHECK(read.scales == layer.scales);
      CHECK(read.g_idx == layer.g_idx);
      CHECK(read.zeros == layer.zeros);  // v1 too: the clients' arithmetic carries every zero point
      CHECK(dequantize(read) == dequantize(layer));
    }
  }
}

TEST_CASE("checkpoint_reader_names_file_and_tensor_on_bad_input") {
  const QuantizedLayer layer = make_layer(4, 32, 64, 32, false);
  qgru::SafetensorsFile file;
  add_layer(file, "fc", layer, CheckpointFormat::kGptqV2);
  auto broken = file;
  broken.tensors.erase("fc.g_idx");
  CHECK_THROWS_WITH_AS(read_layer(broken, "fc", 4, CheckpointFormat::kGptqV2, "x.safetensors"),
                       doctest::Contains("x.safetensors: tensor 'fc.g_idx' is missing"), qgru::Error);
  broken = file;
  broken.tensors["fc.qzeros"].shape = {2, 8};
  broken.tensors["fc.qzeros"].bytes.resize(64);
  CHECK_THROWS_WITH_AS(read_layer(broken, "fc", 4, CheckpointFormat::kGptqV2, "x.safetensors"),
                       doctest::Contains("'fc.qzeros' is I32 [2, 8], expected I32 [2, 4]"), qgru::Error);
  broken = file;
  broken.tensors["fc.qweight"].dtype = qgru::DType::F32;
  CHECK_THROWS_WITH_AS(read_layer(broken, "fc", 4, CheckpointFormat::kGptqV2, "x.safetensors"),
                       doctest::Contains("'fc.qweight' is F32"), qgru::Error);
  broken = file;
  int32_t bad_group = 7;
  std::memcpy(broken.tensors["fc.g_idx"].bytes.data(), &bad_group, 4);
  CHECK_THROWS_WITH_AS(read_layer(broken, "fc", 4, CheckpointFormat::kGptqV2, "x.safetensors"),
                       doctest::Contains("'fc.g_idx'[0] = 7"), qgru::Error);
}

TEST_CASE("checkpoint_act_order_with_groups_dequantizes_through_g_idx") {
  const QuantizedLayer layer = make_layer(4, 32, 64, 16, true);
  bool non_monotone = false;
  for (size_t k = 1; k < layer.g_idx.size(); ++k) non_monotone |= layer.g_idx[k] < layer.g_idx[k - 1];
  CHECK(non_monotone);  // act-order really scattered the groups
  const auto W_hat = dequantize(layer);
  for (int64_t n = 0; n < layer.N; ++n) {
    for (int64_t k = 0; k < layer.K; ++k) {
      const auto g = layer.g_idx[static_cast<size_t>(k)];
      const double want = static_cast<double>(layer.scales[static_cast<size_t>(g * layer.N + n)]) *
                          (layer.codes[static_cast<size_t>(n * layer.K + k)] - layer.zeros[static_cast<size_t>(g * layer.N + n)]);
      REQUIRE(W_hat[static_cast<size_t>(n * layer.K + k)] == want);
    }
  }
}

TEST_CASE("quantize_config_has_the_keys_and_meta_layout_gptqmodel_reads") {
  QuantizeConfig config;
  config.bits = 2;
  config.group_size = 64;
  config.damp_percent = 0.05;
  config.act_group_aware = true;
  const nlohmann::json v1 = nlohmann::json::parse(quantize_config_json(config));
  // The keys GPTQModel 7.7.0's QuantizeConfig.from_quant_config and transformers' GPTQConfig read.
  CHECK(v1.at("bits") == 2);
  CHECK(v1.at("group_size") == 64);
  CHECK(v1.at("desc_act") == false);
  CHECK(v1.at("sym") == false);
  CHECK(v1.at("quant_method") == "gptq");
  CHECK(v1.at("format") == "gptq");
  CHECK(v1.at("checkpoint_format") == "gptq");
  CHECK(v1.at("pack_dtype") == "int32");
  const double damp = v1.at("damp_percent").get<double>();
  CHECK((damp > 0.0 && damp < 1.0));  // both clients refuse anything else
  const auto& meta = v1.at("meta");
  CHECK(meta.at("act_group_aware") == true);
  CHECK(meta.at("damp_percent") == damp);
  // Every layer is quantized from the activations given; no re-capture between layers, so not true_sequential.
  CHECK(v1.at("true_sequential") == false);
  CHECK(meta.at("true_sequential") == false);
  CHECK(meta.contains("uri"));
  // quantizer: a list of "name:version" (GPTQModel's meta_get_versionable splits on ':'); an asymmetric v1
  // file is read only when an entry names gptqmodel >= 0.9.0 (MIN_VERSION_WITH_V2).
  REQUIRE(meta.at("quantizer").is_array());
  bool qgru_entry = false, gptqmodel_entry = false;
  for (const auto& entry : meta.at("quantizer")) {
    const std::string text = entry.get<std::string>();
    const auto colon = text.find(':');
    REQUIRE(colon != std::string::npos);
    qgru_entry |= text.substr(0, colon) == "qgru";
    if (text.substr(0, colon) == "gptqmodel") {
      int major = 0, minor = 0;
      REQUIRE(std::sscanf(text.c_str() + colon + 1, "%d.%d", &major, &minor) == 2);
      gptqmodel_entry = major > 0 || minor >= 9;
    }
  }
  CHECK(qgru_entry);
  CHECK(gptqmodel_entry);
  config.format = CheckpointFormat::kGptqV2;  // v2 needs no such declaration
  const nlohmann::json v2 = nlohmann::json::parse(quantize_config_json(config));
  CHECK(v2.at("meta").at("quantizer").size() == 1);
  CHECK(v2.at("format") == "gptq_v2");
  config.desc_act = true;  // GPTQModel refuses desc_act together with act_group_aware
  CHECK_THROWS_AS(quantize_config_json(config), qgru::Error);
}

TEST_CASE("quantize_config_layouts_choose_how_v1_zero_points_are_read") {
  CHECK(parse_quantize_config(quantize_config_json({}), "new.json").v1_zero_rule == V1ZeroRule::kClients);
  CHECK(parse_quantize_config(R"({"bits": 4, "group_size": 128, "meta": {"quantizer": "qgru"}})", "old.json").v1_zero_rule ==
        V1ZeroRule::kPerField);
  CHECK(parse_quantize_config(R"({"bits": 4, "group_size": 128, "meta": {"quantizer": ["gptqmodel:7.7.0"]}})", "g.json")
            .v1_zero_rule == V1ZeroRule::kClients);
  CHECK_THROWS_WITH_AS(
      parse_quantize_config(R"({"bits": 4, "group_size": 128, "format": "gptq", "checkpoint_format": "gptq_v2"})", "q.json"),
      doctest::Contains("q.json: format 'gptq' and checkpoint_format 'gptq_v2' disagree"), qgru::Error);
  CHECK_THROWS_WITH_AS(
      parse_quantize_config(R"({"bits": 4, "group_size": 128, "desc_act": true, "meta": {"act_group_aware": true}})", "q.json"),
      doctest::Contains("both true"), qgru::Error);
  CHECK(parse_quantize_config(R"({"bits": 4, "group_size": 128, "format": "gptq_v2"})", "q.json").format ==
        CheckpointFormat::kGptqV2);
}

TEST_CASE("config_disagreement_names_what_would_change_how_a_checkpoint_is_read") {
  QuantizeConfig a, b;
  CHECK(config_disagreement(a, b).empty());
  b.bits = 8;
  b.format = CheckpointFormat::kGptqV2;
  CHECK(config_disagreement(a, b) == "bits 8 here, 4 there, format gptq_v2 here, gptq there");
  QuantizeConfig old_layout;
  old_layout.v1_zero_rule = V1ZeroRule::kPerField;
  CHECK(config_disagreement(old_layout, a).find("v1 zero points") != std::string::npos);
  QuantizeConfig damp = a;
  damp.damp_percent = 0.1;
  CHECK(config_disagreement(a, damp) == "damp_percent 0.1 here, 0.01 there");
}

TEST_CASE("quantize_config_round_trip_and_refusals") {
  QuantizeConfig config;
  config.bits = 3;
  config.group_size = -1;
  config.desc_act = true;
  config.sym = true;
  config.format = CheckpointFormat::kGptqV2;
  const QuantizeConfig back = parse_quantize_config(quantize_config_json(config), "q.json");
  CHECK(back.bits == 3);
  CHECK(back.group_size == -1);
  CHECK(back.desc_act);
  CHECK(back.sym);
  CHECK(back.format == CheckpointFormat::kGptqV2);
  CHECK(parse_quantize_config(R"({"bits": 4, "group_size": 128})", "old.json").format == CheckpointFormat::kGptq);
  CHECK_THROWS_WITH_AS(parse_quantize_config(R"({"bits": 5, "group_size": 128})", "q.json"),
                       doctest::Contains("bits = 5"), qgru::Error);
  CHECK_THROWS_WITH_AS(parse_quantize_config(R"({"bits": 4, "group_size": 128, "quant_method": "awq"})", "q.json"),
                       doctest::Contains("q.json: quant_method is 'awq'"), qgru::Error);
  CHECK_THROWS_WITH_AS(parse_quantize_config(R"({"group_size": 128})", "q.json"),
                       doctest::Contains("'bits' is missing"), qgru::Error);
  CHECK(quantize_config_path_beside("a/b/model.safetensors") == "a/b/quantize_config.json");
  CHECK(layer_prefix("model.layers.0.mlp.up_proj.weight") == "model.layers.0.mlp.up_proj");
}

TEST_CASE("hessian_accumulates_across_chunks_and_layouts") {
  const int64_t K = 12, M1 = 1500, M2 = 7;  // M1 spans two internal chunks
  const auto X1 = gptq_test::activations_kmajor(K, M1, 2, 4);
  const auto X2 = gptq_test::activations_kmajor(K, M2, 0, 5);
  auto H = gptq_test::hessian_plain(X1, K, M1);
  const auto H2 = gptq_test::hessian_plain(X2, K, M2);
  for (size_t i = 0; i < H.size(); ++i) H[i] += H2[i];

  HessianAccumulator feature_major(K), token_major(K);
  std::vector<float> x1(X1.begin(), X1.end()), x2(X2.begin(), X2.end());
  // float copies: the library sees float32 activations; compare with the float-rounded plain sum.
  std::vector<double> X1f(x1.begin(), x1.end()), X2f(x2.begin(), x2.end());
  auto Hf = gptq_test::hessian_plain(X1f, K, M1);
  const auto H2f = gptq_test::hessian_plain(X2f, K, M2);
  for (size_t i = 0; i < Hf.size(); ++i) Hf[i] += H2f[i];
  feature_major.add_feature_major(x1.data(), M1);
  feature_major.add_feature_major(x2.data(), M2);
  std::vector<float> t1(x1.size()), t2(x2.size());
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t t = 0; t < M1; ++t) t1[static_cast<size_t>(t * K + k)] = x1[static_cast<size_t>(k * M1 + t)];
    for (int64_t t = 0; t < M2; ++t) t2[static_cast<size_t>(t * K + k)] = x2[static_cast<size_t>(k * M2 + t)];
  }
  token_major.add_token_major(t1.data(), M1);
  token_major.add_token_major(t2.data(), M2);
  CHECK(feature_major.tokens() == M1 + M2);
  const auto A = feature_major.hessian(), B = token_major.hessian();
  for (size_t i = 0; i < Hf.size(); ++i) {
    CHECK(A[i] == doctest::Approx(Hf[i]).epsilon(1e-10));
    CHECK(B[i] == doctest::Approx(Hf[i]).epsilon(1e-10));
  }
  qgru::Tensor wrong = qgru::Tensor::from_vector<float>({3, 5}, std::vector<float>(15, 1.0f));
  CHECK_THROWS_WITH_AS(token_major.add_tensor(wrong, false, "x.npy"), doctest::Contains("x.npy: activations have shape [3, 5]"),
                       qgru::Error);
}

TEST_CASE("checkpoint_reader_refuses_empty_extents_without_overflow") {
  qgru::SafetensorsFile file;
  file.tensors["fc.qweight"] = qgru::Tensor::from_vector<int32_t>({int64_t{1} << 62, 0}, {});
  CHECK_THROWS_WITH_AS(read_layer(file, "fc", 4, CheckpointFormat::kGptqV2, "x.safetensors"),
                       doctest::Contains("'fc.qweight' is I32"), qgru::Error);
}
