// The stop-string matcher on arbitrary stop lists and deltas: whatever the
// split, the text sent is exactly the whole text cut at the stop string that
// ends first (earliest start on a tie), or all of it when none appears.
#include <string>
#include <vector>

#include "model/tokenizer/stop_string_matcher.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// The reference: the earliest end of any stop in `text`; ties to the
// earliest start.
std::string CutAtFirstStop(const std::string& text, const std::vector<std::string>& stops) {
  size_t best_end = std::string::npos, best_start = std::string::npos;
  for (const std::string& stop : stops) {
    const size_t at = text.find(stop);
    if (at == std::string::npos) continue;
    const size_t end = at + stop.size();
    if (end < best_end || (end == best_end && at < best_start)) best_end = end, best_start = at;
  }
  return best_start == std::string::npos ? text : text.substr(0, best_start);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  fuzz::FuzzInput in(data, size);
  std::vector<std::string> stops(in.Byte() % 5);
  for (std::string& s : stops) {
    s = in.String(12);
    if (s.empty()) s.push_back('x');
  }
  absl::StatusOr<model::StopStringMatcher> m = model::StopStringMatcher::Create(stops);
  fuzz::Check(m.ok(), "a valid stop list refused");
  std::string text, sent;
  while (!in.empty() && !m->stopped()) {
    // Deltas as the detokenizer gives them are whole characters; bytes are
    // a superset the matcher must also survive, but the property is stated
    // for whole text, which bytes also are here.
    const std::string delta = in.String(8);
    text += delta;
    sent += m->Push(delta);
  }
  if (!m->stopped()) sent += m->Finish();
  const std::string expected = CutAtFirstStop(text, stops);
  if (m->stopped()) {
    fuzz::Check(sent == expected, "stopped, but not at the first stop string");
  } else {
    fuzz::Check(sent == text && expected == text, "no stop seen, but one is in the text or text was lost");
  }
  return 0;
}
