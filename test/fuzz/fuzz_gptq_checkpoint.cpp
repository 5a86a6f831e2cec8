// libFuzzer target: a GPTQ checkpoint layer (qgru linear's reader): safetensors bytes, then read_layer for the
// layer "fc" at the bit width and format picked by the first byte.
#include "fuzz_common.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/pack.h"
#include "qgru/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const int kBits[] = {2, 3, 4, 8};
  const int bits = kBits[data[0] & 3];
  const auto format = (data[0] & 4) ? qgru::gptq::CheckpointFormat::kGptqV2 : qgru::gptq::CheckpointFormat::kGptq;
  return qgru::fuzz::run_one([&] {
    const qgru::SafetensorsFile file = qgru::parse_safetensors(qgru::fuzz::bytes_of(data + 1, size - 1), "fuzz.safetensors");
    (void)qgru::gptq::read_layer(file, "fc", bits, format, "fuzz.safetensors");
  });
}
