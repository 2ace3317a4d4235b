// Writes a whole file (created or truncated), for the tools that export
// models, features and heads.
//
//   RETURN_IF_ERROR(WriteFile(dir / "config.json", json.dump(2)));
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

#include "absl/status/status.h"

namespace kvfleet {

// PERMISSION_DENIED naming the path when it cannot be written whole.
absl::Status WriteFile(const std::filesystem::path& path, std::string_view bytes);
absl::Status WriteFile(const std::filesystem::path& path, std::span<const uint8_t> bytes);

}  // namespace kvfleet
