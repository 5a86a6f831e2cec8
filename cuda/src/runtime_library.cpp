#include "runtime_library.h"

#include <dlfcn.h>

namespace qgru::cuda {

RuntimeLibrary open_runtime_library(const std::string& label, const std::vector<std::string>& candidates,
                                    const std::string& help) {
  RuntimeLibrary library;
  std::string first_reason;
  for (const std::string& candidate : candidates) {
    library.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library.handle != nullptr) {
      library.file = candidate;
      return library;
    }
    const char* reason = dlerror();
    if (first_reason.empty()) first_reason = reason != nullptr ? reason : "not found";
  }
  library.error = label + " (" + (candidates.empty() ? std::string("no file named") : candidates.front()) +
                  ") could not be loaded: " + (first_reason.empty() ? "no candidate file" : first_reason) + "; " + help;
  return library;
}

void* runtime_symbol(RuntimeLibrary& library, const char* name) {
  void* symbol = library.handle != nullptr ? dlsym(library.handle, name) : nullptr;
  if (symbol == nullptr && library.error.empty()) library.error = library.file + " has no " + name;
  return symbol;
}

}  // namespace qgru::cuda
