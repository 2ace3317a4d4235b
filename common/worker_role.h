// Which phases of a request a worker takes (disaggregated prefill and
// decode, docs/architecture.md): a router sends a prefill worker only the
// prompts it splits off (compute the prompt and its first token, then hand
// off), a decode worker the rest, and a worker of role both anything. The
// name travels in WorkerInfo.role and the cachemanager's registration.
#pragma once

#include <optional>
#include <string_view>

namespace kvfleet {

enum class WorkerRole { kBoth, kPrefill, kDecode };

constexpr std::string_view WorkerRoleName(WorkerRole role) {
  switch (role) {
    case WorkerRole::kPrefill:
      return "prefill";
    case WorkerRole::kDecode:
      return "decode";
    case WorkerRole::kBoth:
      break;
  }
  return "both";
}

// "prefill", "decode" or "both"; empty (a worker from before roles) is both.
constexpr std::optional<WorkerRole> ParseWorkerRole(std::string_view name) {
  if (name == "prefill") return WorkerRole::kPrefill;
  if (name == "decode") return WorkerRole::kDecode;
  if (name == "both" || name.empty()) return WorkerRole::kBoth;
  return std::nullopt;
}

// Whether the worker takes whole requests and the decode half of a split.
constexpr bool Decodes(WorkerRole role) { return role != WorkerRole::kPrefill; }

}  // namespace kvfleet
