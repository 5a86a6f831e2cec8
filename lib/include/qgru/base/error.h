#pragma once
// Errors: one exception type for "bad input or failure" (CLI exit code 1), and UsageError for a command line
// that cannot work whatever the files hold (exit code 2). A message is one line that names the file, the
// tensor and what was expected; the CLI prints it as "qgru: error: <message>" (control characters and bytes
// that are not UTF-8 shown as \xNN, qgru/base/message_text.h).
#include <stdexcept>
#include <string>

namespace qgru {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The command line names files (or values) that cannot work together: an output that is also an input or
// another output, an output that is a device node, a name that breaks a naming rule (qgru/base/output_policy.h).
class UsageError : public Error {
 public:
  using Error::Error;
};

// Exit codes shared by every subcommand (documented in `qgru --help`).
enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

}  // namespace qgru
