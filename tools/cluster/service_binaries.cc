#include "tools/cluster/service_binaries.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kvfleet::cluster {
namespace {

namespace fs = std::filesystem;

bool IsExecutableFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// `service` is "router", "worker" or "cachemanager".
absl::StatusOr<std::string> FindOne(const fs::path& dir, const std::string& service) {
  const std::string file = "kvfleet-" + service;
  const std::vector<fs::path> candidates = {dir / "services" / service / file, dir / file};
  for (const fs::path& candidate : candidates) {
    if (IsExecutableFile(candidate)) return candidate.string();
  }
  std::vector<std::string> tried;
  for (const fs::path& candidate : candidates) tried.push_back(candidate.string());
  return absl::NotFoundError(absl::StrCat("no executable ", file, " (tried ", absl::StrJoin(tried, ", "),
                                          "); build it, or point --bin-dir at the directory that holds it"));
}

}  // namespace

absl::StatusOr<std::string> CurrentExecutable() {
  std::error_code ec;
  const fs::path path = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot read /proc/self/exe: ", ec.message()));
  return path.string();
}

std::string DefaultBinDir(const std::string& executable_path) {
  const fs::path dir = fs::path(executable_path).parent_path();
  if (dir.filename() == "kvfleet" && dir.parent_path().filename() == "tools") {
    return dir.parent_path().parent_path().string();
  }
  return dir.string();
}

absl::StatusOr<ServiceBinaries> FindServiceBinaries(const std::string& bin_dir) {
  ServiceBinaries binaries;
  ASSIGN_OR_RETURN(binaries.cachemanager, FindOne(bin_dir, "cachemanager"));
  ASSIGN_OR_RETURN(binaries.worker, FindOne(bin_dir, "worker"));
  ASSIGN_OR_RETURN(binaries.router, FindOne(bin_dir, "router"));
  return binaries;
}

}  // namespace kvfleet::cluster
