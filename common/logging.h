// Logging: the project's one logging library is spdlog. Code logs through
// these macros so the sink and format are configured in one place.
//
//   KVFLEET_LOG_INFO("loaded {} tensors from {}", n, path);
#pragma once

#include <spdlog/spdlog.h>

#define KVFLEET_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define KVFLEET_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define KVFLEET_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define KVFLEET_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)

namespace kvfleet {

// Sends logs to stderr (stdout is for program output such as generated text)
// at the given level: "debug", "info", "warn", "error", "off".
void InitLogging(const std::string& level);

}  // namespace kvfleet
