// What the client sees of each request in the simulator (placement_sim.h):
// its first token, the gaps between its tokens, whether it met the
// objectives, and the run's summary.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "bench/engine_bench.h"
#include "bench/placement_sim_cluster.h"

namespace kvfleet::bench::placement_sim::detail {

// A token reaches the client when its step ends (token transit left out, as
// for the first). A split request's second token comes from the decode
// worker, after the handoff, the pull and the decode worker's queue: by
// default the router holds the first until then, and both arrive together
// (a gap of 0; the wait is in the TTFT); with split_stream_first_token the
// wait is the second token's gap.
void Simulation::OnToken(size_t i) {
  LiveRequest& l = live_[i];
  if (l.first_token_at < 0) {
    l.first_token_at = now_;
    ttft_.push_back(now_ - w_.requests[i].arrival_s);
    if (l.held_at >= 0) {
      handoff_gaps_.push_back(now_ - l.held_at);
      l.gaps.push_back(0);
      itl_.push_back(0);
    }
  } else {
    const double gap = now_ - l.last_token_at;
    l.gaps.push_back(gap);
    itl_.push_back(gap);
    if (l.phase == Phase::kDecode && l.gaps.size() == 1) handoff_gaps_.push_back(gap);
  }
  l.last_token_at = now_;
}

// The request's own p99 gap (nearest rank, so the largest for fewer than
// 100): a stream that stalls once in a long answer still meets it, one that
// stalls often does not.
void Simulation::ScoreRequest(size_t i) {
  LiveRequest& l = live_[i];
  const bool ttft = l.first_token_at - w_.requests[i].arrival_s <= o_.ttft_objective_s;
  const bool itl = l.gaps.empty() || Percentile(std::move(l.gaps), 99) <= o_.itl_objective_s;
  l.gaps = {};
  ttft_met_ += ttft ? 1 : 0;
  itl_met_ += itl ? 1 : 0;
  both_met_ += ttft && itl ? 1 : 0;
  if (w_.requests[i].prompt_tokens() >= o_.split.min_uncached_tokens) {
    ++long_;
    long_met_ += ttft && itl ? 1 : 0;
  }
}

SimResult Simulation::Summarize() {
  SimResult s{.policy = std::string(router::PolicyName(o_.policy)),
              .requests = static_cast<int64_t>(w_.requests.size()),
              .finished = finished_,
              .ttft_p50_s = Percentile(ttft_, 50),
              .ttft_p90_s = Percentile(ttft_, 90),
              .ttft_p99_s = Percentile(ttft_, 99),
              .tokens_computed = tokens_computed_,
              .tokens_served = served_tokens_,
              .pull_decisions = pull_decisions_,
              .pulls = pulls_,
              .blocks_pulled = blocks_pulled_,
              .pulled_blocks_hit = pulled_blocks_hit_,
              .pulls_declined = pulls_declined_,
              .itl_p50_s = Percentile(itl_, 50),
              .itl_p90_s = Percentile(itl_, 90),
              .itl_p99_s = Percentile(itl_, 99),
              .splits = splits_,
              .splits_priced_out = splits_priced_out_,
              .handoff_pulls = handoff_pulls_,
              .handoff_gap_p50_s = Percentile(handoff_gaps_, 50),
              .handoff_gap_p90_s = Percentile(handoff_gaps_, 90)};
  const double start = w_.requests.empty() ? 0 : w_.requests.front().arrival_s;
  s.makespan_s = last_finish_ - start;
  s.throughput_tokens_per_s = s.makespan_s > 0 ? static_cast<double>(served_tokens_) / s.makespan_s : 0;
  s.requests_per_s = s.makespan_s > 0 ? static_cast<double>(finished_) / s.makespan_s : 0;
  const double requests = static_cast<double>(std::max<int64_t>(s.requests, 1));
  s.ttft_met = static_cast<double>(ttft_met_) / requests;
  s.itl_met = static_cast<double>(itl_met_) / requests;
  s.goodput_share = static_cast<double>(both_met_) / requests;
  s.goodput_long_share = long_ > 0 ? static_cast<double>(long_met_) / static_cast<double>(long_) : 0;
  s.goodput_per_s = s.makespan_s > 0 ? static_cast<double>(both_met_) / s.makespan_s : 0;
  s.handoff_pull_mean_s = handoff_pulls_ > 0 ? handoff_pull_seconds_ / static_cast<double>(handoff_pulls_) : 0;
  s.hit_ratio = prompt_tokens_ > 0 ? static_cast<double>(cached_tokens_) / static_cast<double>(prompt_tokens_) : 0;
  int64_t loaded = 0;
  for (const auto& w : workers_) loaded += w->tiers.loaded_blocks();
  s.lower_tier_hit_ratio =
      prompt_tokens_ > 0 ? static_cast<double>(loaded * o_.cluster.block_size) / static_cast<double>(prompt_tokens_)
                         : 0;
  double sum = 0;
  int64_t lora_hits = 0;
  for (auto& w : workers_) {
    NoteRunning(*w);
    const double mean = s.makespan_s > 0 ? w->running_area / s.makespan_s : 0;
    s.max_running = std::max(s.max_running, mean);
    sum += mean;
    s.preemptions += w->scheduler.num_preemptions();
    s.leases_expired += w->leases.counters().expired;
    s.leases_displaced += w->leases.counters().displaced;
    s.lora_admissions += w->lora.acquires();
    s.lora_loads += w->lora.loads();
    s.lora_waits += w->lora.waits();
    lora_hits += w->lora.hits();
    const engine::BlockPoolStats stats = w->pool.Stats(), recount = w->pool.Recount();
    if (stats.used != 0 || stats.cached != recount.cached || stats.empty != recount.empty || recount.used != 0) {
      s.audit = absl::StrCat(w->id, ": ", stats.used, " blocks still in use after every request finished (",
                             recount.used, " on a recount)");
    }
  }
  s.mean_running = sum / static_cast<double>(workers_.size());
  s.lora_slot_hit_ratio =
      s.lora_admissions > 0 ? static_cast<double>(lora_hits) / static_cast<double>(s.lora_admissions) : 0;
  if (finished_ != s.requests && s.audit.empty()) {
    s.audit = absl::StrCat(s.requests - finished_, " requests never finished");
  }
  return s;
}

}  // namespace kvfleet::bench::placement_sim::detail
