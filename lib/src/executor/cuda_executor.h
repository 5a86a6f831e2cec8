#pragma once
// The chooser's CUDA executor (private to lib/src/executor/): qgru_cuda's whole-model executor (QuantGruCuda) on one
// device, its exceptions answered as ExecutorError. Compiled with CUDA only when QGRU_EXECUTOR_WITH_CUDA is set
// (lib/CMakeLists.txt); otherwise every CUDA request is NotBuilt.
#include <memory>
#include <string>

#include "qgru/runtime/executor.h"

namespace qgru::executor {

bool cuda_built();
// Empty when device `device_id` can be used; otherwise why not (the build has no CUDA, the CUDA probe's reason, or
// the ordinal is out of range).
std::string cuda_unusable_reason(int device_id);
// Throws the ExecutorError that says why device `device_id` cannot be used (NotBuilt or NoDevice).
[[noreturn]] void throw_cuda_unusable(int device_id);
// The CUDA executor on device `device_id` (usable: cuda_unusable_reason is empty). ExecutorError NotSupported when a
// cell has no kernel, Failed when a CUDA call fails (here or in its runs).
std::unique_ptr<Executor> make_cuda_executor(const QuantizedGru& model, int device_id);

}  // namespace qgru::executor
