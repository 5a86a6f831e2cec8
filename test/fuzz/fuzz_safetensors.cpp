// libFuzzer target: qgru::parse_safetensors on arbitrary bytes, and the tensors' sizes it accepts.
#include "fuzz_common.h"
#include "qgru/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qgru::fuzz::run_one([&] {
    const qgru::SafetensorsFile file = qgru::parse_safetensors(qgru::fuzz::bytes_of(data, size), "fuzz.safetensors");
    for (const auto& [name, tensor] : file.tensors) {
      // Every accepted tensor holds exactly numel x dtype size bytes.
      if (static_cast<uint64_t>(tensor.numel()) * qgru::dtype_size(tensor.dtype) != tensor.bytes.size()) __builtin_trap();
    }
  });
}
