// libFuzzer target: qgru::parse_npz (ZIP central directory, ZIP64 records, member .npy files, CRC-32).
#include "fuzz_common.h"
#include "qgru/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qgru::fuzz::run_one([&] {
    const auto arrays = qgru::parse_npz(qgru::fuzz::bytes_of(data, size), "fuzz.npz");
    for (const auto& [key, tensor] : arrays) {
      if (static_cast<uint64_t>(tensor.numel()) * qgru::dtype_size(tensor.dtype) != tensor.bytes.size()) __builtin_trap();
    }
  });
}
