#pragma once
// Errors: one exception type for "bad input or failure" (CLI exit code 1). Its message is one line that
// names the file, the tensor and what was expected; the CLI prints it as "qgru: error: <message>".
#include <stdexcept>
#include <string>

namespace qgru {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Exit codes shared by every subcommand (documented in `qgru --help`).
enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

}  // namespace qgru
