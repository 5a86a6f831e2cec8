// libFuzzer target: the calibration statistics reader (qgru calibrate's output, read by --merge and quantize).
#include "fuzz_common.h"
#include "qgru/calib/calibration_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qgru::fuzz::run_one([&] {
    const qgru::CalibrationStats stats = qgru::parse_calibration_stats(qgru::fuzz::text_of(data, size), "fuzz.json");
    // What --merge does with one shard, and writing it back.
    const qgru::CalibrationStats merged = qgru::merge_calibration_stats({stats}, {"fuzz.json"});
    (void)qgru::serialize_calibration_stats(merged);
  });
}
