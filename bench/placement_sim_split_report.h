// placement_sim's roles sweep (--prefill-workers): which worker splits to
// run, and its tables (bench/README.md, "Placement simulator"). Only
// placement_sim.cc includes it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/placement_sim.h"

namespace kvfleet::bench::placement_sim {

// One entry of --prefill-workers: "0" (aggregated: every worker both), a
// count of prefill workers, or a ratio "p:d" of the workers (rounded, at
// least one of each).
struct RolesSpec {
  int64_t count = 0;  // when ratio_prefill is 0
  int64_t ratio_prefill = 0, ratio_decode = 0;

  bool aggregated() const { return ratio_prefill == 0 && count == 0; }
  // Prefill workers in a cluster of `workers`; an error when none decode.
  absl::StatusOr<int32_t> PrefillWorkers(int64_t workers) const;
  // "aggregated", "1:7" or "4P".
  std::string Name() const;
};
absl::StatusOr<std::vector<RolesSpec>> ParseRoles(const std::string& list);

// Every entry on one trace: the same workers, load and objectives.
struct RolesRun {
  int64_t workers = 0;
  double load = 0;
  double network_gbps = 0;  // the handoff pulls' links
  double seconds = 0;       // to simulate them all
  std::vector<RolesSpec> specs;
  std::vector<int32_t> prefill_workers;  // each entry's
  std::vector<SimResult> results;
};

// The run's table: each entry against the aggregated one (the first
// aggregated entry, else the first), and which entry is best.
void PrintRolesRun(const RolesRun& run, const SimOptions& sim, FILE* out);
// One line per (workers, load): aggregated against the best split, as
// Markdown (the README's headline table).
void PrintRolesSummary(const std::vector<RolesRun>& runs, const SimOptions& sim, FILE* out);
nlohmann::json RolesJson(const RolesRun& run);

// Whether an entry keeps up with the trace: it finishes requests at 95% or
// more of the aggregated entry's rate. One that does not queues without
// bound on one side (prefill workers too few, or decode workers), and its
// goodput share then counts only the requests of the other side.
bool KeepsUp(const RolesRun& run, size_t k);
// The best split of a run: among those that keep up, the highest goodput
// share, then the lowest ITL p99; -1 when none keeps up.
int BestSplit(const RolesRun& run);
// The aggregated entry's index (the first entry when none is).
size_t AggregatedIndex(const RolesRun& run);

}  // namespace kvfleet::bench::placement_sim
