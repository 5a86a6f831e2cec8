// Device dequantization vs host emulation, bit for bit (see gpu_checks.h).
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gpu_checks.h"
#include "qgru/kernels/fast_dequant.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda_test {

namespace dq = qgru::kernels;

namespace {

struct Case {
  uint32_t word, offset;
  uint16_t scale;
  uint16_t bits;
};

__global__ void dequant_cases_kernel(const Case* cases, int count, uint32_t* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= count) return;
  const Case c = cases[i];
  if (c.bits == 4) {
    const dq::F16x2x4 h = dq::dequant_u4x8_raw(c.word, c.offset, c.scale);
    for (int j = 0; j < 4; ++j) out[4 * i + j] = h.pair[j];
  } else {
    const dq::F16x2x2 h = dq::dequant_u8x4_raw(c.word, c.offset, c.scale);
    out[4 * i] = h.pair[0];
    out[4 * i + 1] = h.pair[1];
    const dq::F16x2x2 s = dq::int8x4_biased_to_f16_raw(c.word);
    out[4 * i + 2] = s.pair[0];
    out[4 * i + 3] = s.pair[1];
  }
}

std::vector<uint32_t> host_results(const std::vector<Case>& cases) {
  std::vector<uint32_t> out(cases.size() * 4, 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (c.bits == 4) {
      const dq::F16x2x4 h = dq::dequant_u4x8_raw(c.word, c.offset, c.scale);
      for (int j = 0; j < 4; ++j) out[4 * i + j] = h.pair[j];
    } else {
      const dq::F16x2x2 h = dq::dequant_u8x4_raw(c.word, c.offset, c.scale);
      const dq::F16x2x2 s = dq::int8x4_biased_to_f16_raw(c.word);
      out[4 * i] = h.pair[0];
      out[4 * i + 1] = h.pair[1];
      out[4 * i + 2] = s.pair[0];
      out[4 * i + 3] = s.pair[1];
    }
  }
  return out;
}

}  // namespace

int check_dequant_on_device() {
  const uint16_t scales[] = {0x3C00, 0x3555, 0x2E66, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xB555, 0x8000, 0x1E35, 0x5BFF};
  std::vector<Case> cases;
  for (uint16_t s : scales) {
    for (uint32_t offset = 0; offset < 64; ++offset) {
      for (uint32_t u = 0; u < 16; ++u) cases.push_back({u * 0x11111111u ^ (offset * 0x01010101u), offset, s, 4});
    }
    for (uint32_t offset : {0u, 1u, 127u, 128u, 255u, 256u, 1023u}) {
      for (uint32_t u = 0; u < 256; ++u) cases.push_back({u * 0x01010101u ^ 0x00FF3C00u, offset, s, 8});
    }
  }
  const int count = static_cast<int>(cases.size());
  cuda::DeviceBuffer d_cases = cuda::DeviceBuffer::from(cases);
  cuda::DeviceBuffer d_out(cases.size() * 4 * sizeof(uint32_t));
  d_out.zero();
  dequant_cases_kernel<<<(count + 127) / 128, 128>>>(static_cast<const Case*>(d_cases.data()), count,
                                                     static_cast<uint32_t*>(d_out.data()));
  QGRU_CUDA_CHECK_LAUNCH("dequant_cases_kernel<<<...>>>");
  QGRU_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint32_t> device = d_out.to_vector<uint32_t>(cases.size() * 4);
  const std::vector<uint32_t> host = host_results(cases);
  int failures = 0;
  for (size_t i = 0; i < device.size(); ++i) {
    if (device[i] != host[i] && ++failures <= 5) {
      const Case& c = cases[i / 4];
      std::printf("dequant mismatch: bits=%u word=0x%08x offset=%u scale=0x%04x pair %zu: device 0x%08x host 0x%08x\n",
                  c.bits, c.word, c.offset, c.scale, i % 4, device[i], host[i]);
    }
  }
  std::printf("%s device dequant vs host emulation: %d cases, %d mismatching words\n", failures ? "FAIL" : "ok  ",
              count, failures);
  return failures ? 1 : 0;
}

}  // namespace qgru::cuda_test
