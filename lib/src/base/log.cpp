#include "qgru/base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include <cstdio>

namespace qgru {

std::shared_ptr<spdlog::logger> log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto created = spdlog::stderr_color_mt("qgru");
    created->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    created->set_level(spdlog::level::info);
    return created;
  }();
  return logger;
}

void set_log_verbosity(int level) {
  auto logger = log();
  if (level <= 0) {
    logger->set_level(spdlog::level::warn);
  } else if (level == 1) {
    logger->set_level(spdlog::level::info);
  } else {
    logger->set_level(spdlog::level::debug);
  }
}

bool stderr_is_terminal() { return isatty(fileno(stderr)) != 0; }

}  // namespace qgru
