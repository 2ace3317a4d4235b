#include "common/write_file.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace kvfleet {

absl::Status WriteFile(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

absl::Status WriteFile(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  return WriteFile(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace kvfleet
