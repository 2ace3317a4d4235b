#include "common/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvfleet {
namespace {

// A file holding one integer ("max" or a value past 2^62 mean no limit).
std::optional<int64_t> ReadLimit(const std::string& path) {
  std::ifstream f(path);
  std::string text;
  if (!(f >> text)) return std::nullopt;
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) || value < 0 || value >= (int64_t{1} << 62)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

absl::StatusOr<int64_t> MemAvailableBytes(const std::string& meminfo_path) {
  std::ifstream meminfo(meminfo_path);
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot read MemAvailable from ", meminfo_path, "; give the memory in bytes instead"));
}

std::optional<int64_t> CgroupMemoryHeadroomBytes(const std::string& cgroup_root) {
  for (const auto& [limit_file, usage_file] :
       {std::pair{"/memory.max", "/memory.current"},
        std::pair{"/memory/memory.limit_in_bytes", "/memory/memory.usage_in_bytes"}}) {
    const std::optional<int64_t> limit = ReadLimit(cgroup_root + limit_file);
    const std::optional<int64_t> usage = ReadLimit(cgroup_root + usage_file);
    if (limit && usage) return std::max<int64_t>(0, *limit - *usage);
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> HostFreeMemoryBytes() {
  absl::StatusOr<int64_t> available = MemAvailableBytes();
  if (!available.ok()) return available;
  const std::optional<int64_t> headroom = CgroupMemoryHeadroomBytes();
  return headroom ? std::min(*available, *headroom) : *available;
}

}  // namespace kvfleet
