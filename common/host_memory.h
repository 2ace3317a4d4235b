// How much host memory new work may take: the kernel's MemAvailable, and
// the headroom under this process's cgroup memory limit (a pod's limit). A
// fraction of MemAvailable alone can get a pod killed: MemAvailable sees the
// whole node, the limit only this container.
//
//   ASSIGN_OR_RETURN(int64_t free, HostFreeMemoryBytes());  // min(MemAvailable, limit - usage)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace kvfleet {

// /proc/meminfo's MemAvailable, in bytes.
absl::StatusOr<int64_t> MemAvailableBytes(const std::string& meminfo_path = "/proc/meminfo");

// limit − usage of the cgroup under `cgroup_root` (v2: memory.max and
// memory.current; v1: memory/memory.limit_in_bytes and
// memory/memory.usage_in_bytes), or nullopt when no limit is set or none
// can be read. Never negative.
std::optional<int64_t> CgroupMemoryHeadroomBytes(const std::string& cgroup_root = "/sys/fs/cgroup");

// min(MemAvailable, cgroup headroom).
absl::StatusOr<int64_t> HostFreeMemoryBytes();

}  // namespace kvfleet
