// Compiled to PTX only, by scripts/check_ptx_dequant.sh (never linked): one extern "C" kernel per fast
// dequantization entry point, so the script can find each function's PTX by name and check that it is made
// of prmt/lop3 and packed-half arithmetic, with no int->float conversion instruction.
#include <cstdint>

#include "qgru/kernels/fast_dequant.h"

namespace dq = qgru::kernels;

extern "C" __global__ void probe_int8x4_biased_to_f16(const uint32_t* in, uint32_t* out) {
  const dq::F16x2x2 h = dq::int8x4_biased_to_f16_raw(in[threadIdx.x]);
  out[2 * threadIdx.x] = h.pair[0];
  out[2 * threadIdx.x + 1] = h.pair[1];
}

extern "C" __global__ void probe_dequant_u8x4(const uint32_t* in, const uint32_t* offset, const uint16_t* scale,
                                              uint32_t* out) {
  const dq::F16x2x2 h = dq::dequant_u8x4_raw(in[threadIdx.x], offset[threadIdx.x], scale[threadIdx.x]);
  out[2 * threadIdx.x] = h.pair[0];
  out[2 * threadIdx.x + 1] = h.pair[1];
}

extern "C" __global__ void probe_dequant_u4x8(const uint32_t* in, const uint32_t* offset, const uint16_t* scale,
                                              uint32_t* out) {
  const dq::F16x2x4 h = dq::dequant_u4x8_raw(in[threadIdx.x], offset[threadIdx.x], scale[threadIdx.x]);
  for (int j = 0; j < 4; ++j) out[4 * threadIdx.x + j] = h.pair[j];
}
