#include "common/host_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

namespace kvfleet {
namespace {

std::optional<double> Quota(double quota, double period) {
  if (!(quota > 0) || !(period > 0)) return std::nullopt;
  return quota / period;
}

}  // namespace

std::optional<double> CgroupCpuQuota(const std::string& cgroup_root) {
  {
    std::ifstream v2(cgroup_root + "/cpu.max");
    std::string quota;
    double period = 0;
    if (v2 >> quota >> period) {
      if (quota == "max") return std::nullopt;
      try {
        return Quota(std::stod(quota), period);
      } catch (...) {
        return std::nullopt;
      }
    }
  }
  std::ifstream quota_file(cgroup_root + "/cpu/cpu.cfs_quota_us");
  std::ifstream period_file(cgroup_root + "/cpu/cpu.cfs_period_us");
  double quota = 0, period = 0;
  if (quota_file >> quota && period_file >> period) return Quota(quota, period);  // v1 says -1 for none
  return std::nullopt;
}

int UsableCpus() {
  int cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t mask;
  if (::sched_getaffinity(0, sizeof(mask), &mask) == 0) cpus = std::min(cpus, std::max(1, CPU_COUNT(&mask)));
  if (const std::optional<double> quota = CgroupCpuQuota()) {
    cpus = std::min(cpus, std::max(1, static_cast<int>(std::ceil(*quota - 1e-9))));
  }
  return cpus;
}

}  // namespace kvfleet
