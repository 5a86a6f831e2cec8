// libFuzzer target: qgru::parse_npy on arbitrary bytes; an accepted array converts to float.
#include "fuzz_common.h"
#include "qgru/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qgru::fuzz::run_one([&] {
    const qgru::Tensor tensor = qgru::parse_npy(qgru::fuzz::bytes_of(data, size), "fuzz.npy");
    if (static_cast<uint64_t>(tensor.numel()) * qgru::dtype_size(tensor.dtype) != tensor.bytes.size()) __builtin_trap();
    if (tensor.dtype != qgru::DType::BF16) (void)qgru::tensor_to_f32(tensor);
  });
}
