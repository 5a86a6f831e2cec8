#pragma once
// Logging goes to stderr only (stdout carries results). Use qgru::log()->info(...) etc.
#include <spdlog/spdlog.h>

namespace qgru {

// The process-wide stderr logger, created on first use.
std::shared_ptr<spdlog::logger> log();

// Verbosity from the CLI: 0 = warnings, 1 = info (default), 2 = debug.
void set_log_verbosity(int level);

// True when stderr is a terminal (progress lines are drawn only then).
bool stderr_is_terminal();

}  // namespace qgru
