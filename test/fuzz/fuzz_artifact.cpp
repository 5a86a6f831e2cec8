// libFuzzer target: qgru::read_artifact through files in a private temporary folder.
// Input: the artifact JSON, then the separator line below, then the tensor file's bytes. "@SHA256@" in the
// JSON is replaced by the tensor part's sha256, so that mutations of the tensor file reach the checks behind
// the hash (the seeds, made by scripts/fuzz.sh from test/corpus, use it).
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "fuzz_common.h"
#include "qgru/base/sha256.h"
#include "qgru/runtime/artifact.h"

namespace {

const char kSeparator[] = "\n--qgru-fuzz-tensor-file--\n";

std::string make_folder() {
  char name[] = "/tmp/qgru_fuzz_artifact_XXXXXX";
  if (::mkdtemp(name) == nullptr) __builtin_trap();
  return name;
}

void put(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string folder = make_folder();
  static const std::string json_path = folder + "/a.qgru.json";
  static const std::string tensor_path = folder + "/a.qgru.safetensors";
  const std::string input = qgru::fuzz::text_of(data, size);
  const size_t split = input.find(kSeparator);
  std::string json = input.substr(0, split);
  const std::string tensors = split == std::string::npos ? std::string() : input.substr(split + sizeof(kSeparator) - 1);
  const size_t mark = json.find("@SHA256@");
  if (mark != std::string::npos) json.replace(mark, 8, qgru::sha256_hex(tensors.data(), tensors.size()));
  put(json_path, json.data(), json.size());
  if (split == std::string::npos) {
    ::unlink(tensor_path.c_str());
  } else {
    put(tensor_path, tensors.data(), tensors.size());
  }
  return qgru::fuzz::run_one([&] { (void)qgru::read_artifact(json_path); });
}
