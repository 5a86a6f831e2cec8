// A two-way setting read from the environment (the CUDA executor's QGRU_CUDA_GRU_PATH and QGRU_CUDA_GRU_FLOW).
#pragma once

#include <cstdlib>
#include <string>

#include "qgru/base/error.h"

namespace qgru::cuda {

// True when environment variable `name` says `other_word`; false when it is unset, empty or `default_word`;
// qgru::Error "NAME=VALUE: expected OTHER or DEFAULT" for anything else.
inline bool environment_says(const char* name, const char* default_word, const char* other_word) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0' || std::string(value) == default_word) return false;
  if (std::string(value) == other_word) return true;
  throw Error(std::string(name) + "=" + value + ": expected " + other_word + " or " + default_word);
}

}  // namespace qgru::cuda
