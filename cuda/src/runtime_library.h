#pragma once
// A CUDA library opened at run time (dlopen) instead of linked: cuBLAS (qgru_cuda/cublas_library.h) and cuSOLVER
// (gptq_solver.cu). Every process that never uses it starts without it (no dynamic loader time, no dependency on
// its file), and a machine without it answers the one use that needs it with one line saying why.
#include <string>
#include <vector>

namespace qgru::cuda {

struct RuntimeLibrary {
  void* handle = nullptr;  // dlopen's handle; never closed (the library stays loaded for the process)
  std::string file;        // the candidate that opened
  std::string error;       // why it is unusable: not loaded, or a symbol missing ("" when usable)
};

// Opens the first of `candidates` (names the dynamic loader searches for, or paths) that dlopen finds, with
// RTLD_NOW | RTLD_LOCAL. When none opens, error is one line: "<label> (<candidates[0]>) could not be loaded:
// <dlerror() of the first candidate>; <help>" (the first candidate's reason: it is the one expected, and its
// reason names a missing dependency where the file itself exists). `candidates` must not be empty.
RuntimeLibrary open_runtime_library(const std::string& label, const std::vector<std::string>& candidates,
                                    const std::string& help);

// The address of symbol `name` in an opened library, or nullptr with error set to "<file> has no <name>" (the
// first missing symbol's, when error is still empty).
void* runtime_symbol(RuntimeLibrary& library, const char* name);

// runtime_symbol as a function pointer of the caller's type (decltype(&declared_function)).
template <typename Function>
void resolve_runtime_symbol(RuntimeLibrary& library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(runtime_symbol(library, name));
}

}  // namespace qgru::cuda
