#pragma once
// Internal: the device flow's element kernels between the cells (device_flow.cu; per element
// qgru/kernels/device_flow.h and qgru/runtime/code_maps.h, the functions the CPU tests run).
#include <cuda_runtime.h>

#include <cstdint>

#include "qgru/kernels/device_flow.h"

namespace qgru::cuda {

// output_element over the T·N·D·H outputs (y floats, and the codes when sink.codes is set).
void launch_output(const kernels::OutputSink& sink, int64_t count, cudaStream_t stream);
// codes[i] = value for i < count (each cell's starting state zp_h when no h0 is given).
void launch_fill_codes(int32_t* codes, int64_t count, int32_t value, cudaStream_t stream);

}  // namespace qgru::cuda
