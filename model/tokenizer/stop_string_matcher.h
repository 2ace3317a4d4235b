// Stop strings on streamed text: generation ends at the first stop string
// to complete (the earliest end; on a tie, the earliest start), and the
// client never sees it or any part of it. Push takes each detokenized delta and returns what is safe to
// send now, holding back a tail that could still grow into a stop string;
// once one appears, it returns the text before it and stopped() turns true.
//
// Deltas are whole UTF-8 characters (IncrementalDetokenizer's output) and
// stop strings are valid UTF-8, so held-back tails start at character
// boundaries and every returned piece is whole characters.
//
// Thread-safety: one matcher per stream; not thread-safe.
//
//   ASSIGN_OR_RETURN(StopStringMatcher m, StopStringMatcher::Create({"\n\n", "END"}));
//   std::string send = m.Push(delta);   // may be ""; check m.stopped()
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kvfleet::model {

// Each Push costs about (stop strings) x (longest stop)^2 byte compares, so
// servers bound both (services/limits/request_limits.h).
class StopStringMatcher {
 public:
  // INVALID_ARGUMENT for an empty stop string. No stop strings is valid (a
  // pass-through).
  static absl::StatusOr<StopStringMatcher> Create(std::vector<std::string> stops);

  // Text to send now. After a stop string matched, returns "" for good.
  std::string Push(std::string_view delta);
  // The end of the stream without a stop: whatever was held back.
  std::string Finish();

  bool stopped() const { return stopped_; }
  // The stop string that matched ("" until one does).
  const std::string& matched() const { return matched_; }

 private:
  explicit StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Length of the longest tail of pending_ that is a proper prefix of a stop.
  size_t HeldBackLength() const;

  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace kvfleet::model
