// qgru's GPTQ against checkpoints written by the PyTorch reference (scripts/gptq_reference.py: the
// IST-DASLab/gptq algorithm in float64, packed by AutoGPTQ's loops) on the same W and X: reading "their"
// files and reproducing their codes, scales, zeros and g_idx.
#include <doctest/doctest.h>

#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/hessian.h"
#include "qgru/io/npy.h"
#include "qgru/io/safetensors.h"

using namespace qgru::gptq;

namespace {

void check_reference(const std::string& ref_name, GptqOptions options, CheckpointFormat format) {
  const std::string dir = std::string(QGRU_TEST_DATA_DIR) + "/gptq/";
  const auto model = qgru::read_safetensors(dir + "model.safetensors");
  const qgru::Tensor& weight = model.tensors.at("fc1.weight");
  const int64_t N = weight.shape[0], K = weight.shape[1];
  HessianAccumulator hessian(K);
  hessian.add_tensor(qgru::read_npy(dir + "x1.npy"), false, "x1.npy");
  const GptqResult ours = gptq_quantize(qgru::tensor_to_f64(weight), N, K, hessian.hessian(), options);
  const QuantizedLayer mine = to_checkpoint_layer(ours, "fc1");
  const QuantizedLayer theirs = read_layer(qgru::read_safetensors(dir + ref_name), "fc1", options.bits, format, ref_name);
  REQUIRE(theirs.N == N);
  REQUIRE(theirs.K == K);
  REQUIRE(theirs.G == mine.G);
  CHECK(theirs.g_idx == mine.g_idx);
  CHECK(theirs.zeros == mine.zeros);
  CHECK(theirs.scales == mine.scales);
  int64_t mismatches = 0;
  for (size_t i = 0; i < mine.codes.size(); ++i) mismatches += mine.codes[i] != theirs.codes[i];
  CAPTURE(mismatches);
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("gptq_reproduces_pytorch_reference_checkpoint_act_order_groups_v1") {
  GptqOptions options;
  options.group_size = 32;
  options.act_order = true;
  check_reference("ref_fc1_g32_actorder_v1.safetensors", options, CheckpointFormat::kGptq);
}

TEST_CASE("gptq_reproduces_pytorch_reference_checkpoint_3bit_sym_per_row_v2") {
  GptqOptions options;
  options.bits = 3;
  options.group_size = -1;
  options.sym = true;
  check_reference("ref_fc1_3bit_sym_v2.safetensors", options, CheckpointFormat::kGptqV2);
}
