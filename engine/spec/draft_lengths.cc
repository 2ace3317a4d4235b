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
  // The worth of candidate c's guess j (0-based).
  const auto worth_of = [&](const DraftCandidate& c, int32_t j, double previous) {
    if (!c.worths.empty()) return j < static_cast<int32_t>(c.worths.size()) ? std::clamp(c.worths[j], 0.0, 1.0) : 0.0;
    return previous * std::clamp(c.acceptance, 0.0, 1.0);
  };
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double first = worth_of(candidates[i], 0, 1.0);
    if (candidates[i].max_tokens > 0 && first > 0.0) heap.push({first, i});
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
    if (++k < c.max_tokens) {
      if (const double w = worth_of(c, k, next.worth); w > 0.0) heap.push({w, next.candidate});
    }
  }
  return lengths;
}

}  // namespace kvfleet::engine::spec
