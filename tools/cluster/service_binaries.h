// Where `kvfleet up` finds the service binaries it launches. Two layouts are
// recognised in a directory DIR:
//   a build tree: DIR/services/<svc>/kvfleet-<svc>   (cmake -B DIR)
//   installed:    DIR/kvfleet-<svc>                  (side by side)
// By default DIR is the build tree the running kvfleet belongs to:
// <build>/tools/kvfleet/kvfleet → <build>; any other kvfleet → its own
// directory. Pure functions of paths and the filesystem.
//
//   ASSIGN_OR_RETURN(std::string exe, CurrentExecutable());
//   ASSIGN_OR_RETURN(ServiceBinaries bins, FindServiceBinaries(DefaultBinDir(exe)));
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kvfleet::cluster {

struct ServiceBinaries {
  std::string cachemanager;  // paths of kvfleet-cachemanager, kvfleet-worker, kvfleet-router
  std::string worker;
  std::string router;
};

// The running program's path (/proc/self/exe).
absl::StatusOr<std::string> CurrentExecutable();

// The directory to search when no --bin-dir is given, from the path of the
// running kvfleet executable.
std::string DefaultBinDir(const std::string& executable_path);

// Each binary in `bin_dir`, build-tree layout first. Fails naming every path
// tried for the first one missing.
absl::StatusOr<ServiceBinaries> FindServiceBinaries(const std::string& bin_dir);

}  // namespace kvfleet::cluster
