// qgru CUDA self-test: device dequantization vs host emulation, the GPU quantized linear vs a CPU reference,
// the GRU cell executor vs the CPU cell loop, whole quantized models (every preset) vs the CPU reference
// executor code for code, the float GRU vs the CPU float executor within tolerance, and the C API's CUDA
// linear vs its CPU path. Without a GPU it says so plainly and does NOT pass:
//   exit 77 ("SKIPPED", ctest's skip code) by default, exit 1 with --require-gpu.
#include <cstdio>
#include <cstring>
#include <exception>

#include "gpu_checks.h"
#include "qgru_cuda/device.h"

int main(int argc, char** argv) {
  bool require_gpu = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--require-gpu") == 0) {
      require_gpu = true;
    } else {
      std::fprintf(stderr, "usage: %s [--require-gpu]\n", argv[0]);
      return 2;
    }
  }
  const qgru::cuda::DeviceProbe probe = qgru::cuda::probe_devices();
  if (probe.device_count == 0) {
    std::printf("no usable GPU: %s\n", probe.reason.c_str());
    std::printf("GPU self-test NOT RUN (this is not a pass)%s\n", require_gpu ? "" : "; exit 77 = skipped");
    return require_gpu ? 1 : 77;
  }
  try {
    std::printf("GPU: %s\n", qgru::cuda::device_name().c_str());
    int failures = qgru::cuda_test::check_dequant_on_device();
    failures += qgru::cuda_test::check_quant_linear();
    failures += qgru::cuda_test::check_gru_cell();
    failures += qgru::cuda_test::check_quant_gru();
    failures += qgru::cuda_test::check_float_gru();
    failures += qgru::cuda_test::check_capi_linear();
    std::printf("%s: %d failing check(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
