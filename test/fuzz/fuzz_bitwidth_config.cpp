// libFuzzer target: the bit-width config reader (configs/*.json).
#include "fuzz_common.h"
#include "qgru/runtime/bitwidth_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qgru::fuzz::run_one(
      [&] { (void)qgru::parse_bitwidth_config_text(qgru::fuzz::text_of(data, size), "fuzz.json"); });
}
