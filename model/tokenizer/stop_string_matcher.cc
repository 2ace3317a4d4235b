#include "model/tokenizer/stop_string_matcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvfleet::model {

absl::StatusOr<StopStringMatcher> StopStringMatcher::Create(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is empty"));
  }
  return StopStringMatcher(std::move(stops));
}

size_t StopStringMatcher::HeldBackLength() const {
  size_t held = 0;
  for (const std::string& stop : stops_) {
    const size_t longest = std::min(stop.size() - 1, pending_.size());
    for (size_t n = longest; n > held; --n) {
      if (std::string_view(pending_).substr(pending_.size() - n) == std::string_view(stop).substr(0, n)) {
        held = n;
        break;
      }
    }
  }
  return held;
}

std::string StopStringMatcher::Push(std::string_view delta) {
  if (stopped_) return "";
  pending_.append(delta);
  // The stop that completes first (earliest end; then earliest start) is the
  // one generation would have ended on token by token, so the result does
  // not depend on how the text was cut into deltas.
  size_t first = std::string::npos, first_end = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at == std::string::npos) continue;
    const size_t end = at + stop.size();
    if (end < first_end || (end == first_end && at < first)) {
      first = at;
      first_end = end;
      matched_ = stop;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  const size_t held = HeldBackLength();
  std::string out = pending_.substr(0, pending_.size() - held);
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string StopStringMatcher::Finish() {
  if (stopped_) return "";
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace kvfleet::model
