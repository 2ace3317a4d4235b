#include "engine/spec/draft_lengths.h"

#include <algorithm>
#include <queue>

namespace kvfleet::engine::spec {
namespace {

constexpr double kMargin = 1.2;

}  // namespace

std::vector<int32_t> ChooseDraftLengths(std::span<const DraftCandidate> candidates, const StepCostModel& cost,
                                        const PlainStep& plain) {
  std::vector<int32_t> lengths(candidates.size(), 0);
  // The next token each candidate could add, worth r^(k+1); a max-heap on
  // that worth. Within a request the worth only falls, so best-first across
  // requests is exact for this linear cost.
  struct Next {
    double worth;
    size_t candidate;
    bool operator<(const Next& o) const { return worth < o.worth; }
  };
  std::priority_queue<Next> heap;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].max_tokens > 0 && candidates[i].acceptance > 0.0) {
      heap.push({std::clamp(candidates[i].acceptance, 0.0, 1.0), i});
    }
  }
  double produced = std::max(plain.produced, 1.0);
  double seconds = cost.Seconds(plain.tokens);
  while (!heap.empty()) {
    const Next next = heap.top();
    heap.pop();
    const DraftCandidate& c = candidates[next.candidate];
    double extra = cost.seconds_per_token() + c.propose_seconds_per_token;
    if (lengths[next.candidate] == 0) extra += c.setup_seconds;
    // (P + w) / (T + extra) > P / T  ⟺  w × T > extra × P, with a margin:
    // the costs are estimates from a noisy clock, and a guess that only
    // breaks even is not worth the risk of a slow-down.
    if (next.worth * seconds <= kMargin * extra * produced) continue;  // this request stops; others may go on
    produced += next.worth;
    seconds += extra;
    int32_t& k = lengths[next.candidate];
    if (++k < c.max_tokens) heap.push({next.worth * std::clamp(c.acceptance, 0.0, 1.0), next.candidate});
  }
  return lengths;
}

}  // namespace kvfleet::engine::spec
