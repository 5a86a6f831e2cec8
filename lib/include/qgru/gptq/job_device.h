#pragma once
// The devices a GPTQ job (qgru/gptq/job.h: run_job) computes on, by name, for every caller of run_job: `qgru gptq
// --device`, the Python package's qgru.gptq(device=) and qgru.Hessian(device=). Implemented in qgru_capi, the
// GPTQ library that links the CUDA one (qgru_cuda_gptq) when qgru is built with CUDA.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qgru/gptq/job.h"

namespace qgru::gptq {

// "cpu", then "cuda" when this qgru was built with CUDA (whether or not a GPU is present).
std::vector<std::string> job_devices();

// The JobDevice of `device`: "cpu" an empty one (run_job's CPU path); "cuda" the GPU's Hessian accumulation
// (float64, cuBLAS) and GPTQ (cuBLAS, cuSOLVER), qgru_cuda/gptq_device.h. qgru::Error, one line naming the
// device, for another name, a build without CUDA, or a machine without a usable GPU (checked here, before any
// work).
JobDevice make_job_device(const std::string& device);

}  // namespace qgru::gptq
