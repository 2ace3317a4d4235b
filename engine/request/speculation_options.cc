#include "engine/request/speculation_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvfleet::engine::spec {
namespace {

absl::Status CheckProposer(const std::string& name, const std::vector<std::string>& available,
                           const std::string& what) {
  if (name == kProposerOff || name == kProposerAuto ||
      std::find(available.begin(), available.end(), name) != available.end()) {
    return absl::OkStatus();
  }
  const std::string loaded = available.empty() ? std::string("none") : absl::StrJoin(available, ", ");
  return absl::InvalidArgumentError(absl::StrCat(what, " \"", name, "\" is not loaded on this worker (loaded: ", loaded,
                                                 "); use one of them, \"auto\" or \"off\""));
}

}  // namespace

absl::Status SpeculationOptions::Validate(const std::vector<std::string>& available) const {
  if (max_draft_tokens < 1 || max_draft_tokens > kMaxDraftTokensLimit) {
    return absl::InvalidArgumentError(absl::StrCat("speculation: max_draft_tokens must be in [1, ",
                                                   kMaxDraftTokensLimit, "], got ", max_draft_tokens));
  }
  return CheckProposer(proposer, available, "speculation: the default proposer");
}

absl::Status SpeculationParams::Validate(const std::vector<std::string>& available) const {
  if (max_draft_tokens < 0 || max_draft_tokens > kMaxDraftTokensLimit) {
    return absl::InvalidArgumentError(absl::StrCat("speculation.max_draft_tokens must be in [0, ", kMaxDraftTokensLimit,
                                                   "] (0: the worker's), got ", max_draft_tokens));
  }
  if (proposer.empty()) return absl::OkStatus();
  return CheckProposer(proposer, available, "speculation.proposer");
}

}  // namespace kvfleet::engine::spec
