#include "services/router/placement/placement_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kvfleet::router {
namespace {

absl::Status NonNegativeFinite(const char* name, double value) {
  if (!std::isfinite(value) || value < 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be a finite number >= 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Policy> ParsePolicy(std::string_view name) {
  for (Policy p : {Policy::kPrefixAware, Policy::kLeastLoaded, Policy::kRoundRobin}) {
    if (name == PolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown placement policy \"",
                                                 absl::string_view(name.data(), name.size()),
                                                 "\"; expected prefix_aware, least_loaded or round_robin"));
}

std::string_view PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kPrefixAware:
      return "prefix_aware";
    case Policy::kLeastLoaded:
      return "least_loaded";
    case Policy::kRoundRobin:
      return "round_robin";
  }
  return "unknown";
}

absl::Status PlacementOptions::Validate() const {
  if (policy != Policy::kPrefixAware && policy != Policy::kLeastLoaded && policy != Policy::kRoundRobin) {
    return absl::InvalidArgumentError(absl::StrCat("unknown placement policy ", static_cast<int>(policy)));
  }
  if (absl::Status s = NonNegativeFinite("prefill_weight", prefill_weight); !s.ok()) return s;
  if (absl::Status s = NonNegativeFinite("decode_weight", decode_weight); !s.ok()) return s;
  if (absl::Status s = NonNegativeFinite("kv_pressure_weight", kv_pressure_weight); !s.ok()) return s;
  if (!(kv_pressure_threshold > 0.0 && kv_pressure_threshold <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_pressure_threshold must be in (0, 1], got ", kv_pressure_threshold));
  }
  if (decision_memory.count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("decision_memory must be >= 0 ms (0 turns it off), got ", decision_memory.count(), " ms"));
  }
  if (decision_memory_min.count() < 0 || decision_memory_max < decision_memory_min) {
    return absl::InvalidArgumentError(absl::StrCat("decision_memory_min must be >= 0 ms and decision_memory_max >= it, got ",
                                                   decision_memory_min.count(), " and ", decision_memory_max.count(),
                                                   " ms"));
  }
  if (absl::Status s = NonNegativeFinite("decision_memory_prefill_factor", decision_memory_prefill_factor); !s.ok()) {
    return s;
  }
  if (memory_max_blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("memory_max_blocks must be >= 1, got ", memory_max_blocks));
  }
  if (in_flight_window.count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("in_flight_window must be >= 0 ms (0 turns it off), got ", in_flight_window.count(), " ms"));
  }
  if (max_in_flight < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_in_flight must be >= 1, got ", max_in_flight));
  }
  if (affinity_guard_margin < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("affinity_guard_margin must be >= 0 requests, got ", affinity_guard_margin));
  }
  if (!std::isfinite(affinity_guard_ratio) || affinity_guard_ratio < 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("affinity_guard_ratio must be a finite number >= 1, got ", affinity_guard_ratio));
  }
  if (!std::isfinite(peer_pull_assumed_bytes_per_second) || peer_pull_assumed_bytes_per_second <= 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer_pull_assumed_bytes_per_second must be a finite number > 0, got ", peer_pull_assumed_bytes_per_second));
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::router
