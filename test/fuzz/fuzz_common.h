#pragma once
// Shared by the libFuzzer targets (test/fuzz/fuzz_*.cpp). A reader may refuse any input with qgru::Error;
// every other outcome (a crash, a sanitizer report, another exception escaping, a leak, a hang, an
// allocation past -rss_limit_mb / -malloc_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/base/error.h"

namespace qgru::fuzz {

inline std::vector<uint8_t> bytes_of(const uint8_t* data, size_t size) { return std::vector<uint8_t>(data, data + size); }
inline std::string text_of(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// Runs `body`, accepting qgru::Error (the readers' refusal) and nothing else.
template <class Body>
int run_one(Body&& body) {
  try {
    body();
  } catch (const qgru::Error&) {
  }
  return 0;
}

}  // namespace qgru::fuzz
