// How many CPUs this process may use: the affinity mask (taskset, a cpuset)
// and the cgroup CPU quota (a pod's CPU limit), not the node's core count.
// A worker in a pod limited to 4 CPUs on a 64-core node that starts 64
// threads is throttled on every step; sizing its pool from the quota avoids
// that.
//
//   ThreadPool pool(UsableCpus());
#pragma once

#include <optional>
#include <string>

namespace kvfleet {

// The cgroup CPU quota in CPUs (v2: cpu.max "QUOTA PERIOD"; v1:
// cpu/cpu.cfs_quota_us over cpu/cpu.cfs_period_us) under `cgroup_root`, or
// nullopt when unlimited or unreadable. 2.5 for a pod limited to 2500m.
std::optional<double> CgroupCpuQuota(const std::string& cgroup_root = "/sys/fs/cgroup");

// min(hardware threads, the affinity mask, the cgroup quota rounded up), at least 1.
int UsableCpus();

}  // namespace kvfleet
