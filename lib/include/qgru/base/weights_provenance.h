#pragma once
// Statistics and artifacts record the sha256 of the float weights they were made from (their provenance);
// quantize and verify check it against the model they are given, the CLI and the Python package alike.
#include <string>

namespace qgru {

// `recorded_by` (statistics, or "artifact PATH") records `recorded_sha256`; refuse (qgru::Error) when the model
// at hand, `model_name` with `model_sha256`, has other bytes, or with `allow` (--allow-model-mismatch) only
// warn. A file that records no sha256 (made by an older qgru) is let through with a warning: there is nothing
// to compare.
void require_same_weights(const std::string& recorded_by, const std::string& recorded_sha256,
                          const std::string& model_name, const std::string& model_sha256, bool allow);

}  // namespace qgru
