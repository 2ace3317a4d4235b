#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace kvfleet {

void InitLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("kvfleet");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %v");
}

}  // namespace kvfleet
